"""Store locations: local paths and file:// URIs open; writers refuse remote URIs saying why and what to do;
unknown schemes and bad filesystem options are refused (remote reads: ``test_remote_store.py``)."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError, UnsupportedLocationError
from rocketstore_spark.store import FsOptions, RocketStore, local_store_path
from rocketstore_spark.store.files.store_location import location_scheme

REMOTE = ["s3://bucket/archive/broker-a/store", "s3a://bucket/store", "gs://bucket/store", "hdfs://nn:8020/store",
          "webhdfs://nn:9870/store", "abfs://container@account.dfs.core.windows.net/store",
          "hdfs:/nn/store"]  # the last: a Path-mangled URI


def test_paths_and_file_uris_name_local_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_store_path(tmp_path / "store") == tmp_path / "store"
    assert local_store_path(f"file://{tmp_path}/store") == tmp_path / "store"
    assert local_store_path(f"file:{tmp_path}/st%20ore") == tmp_path / "st ore"
    assert local_store_path("file://localhost/data/store").as_posix() == "/data/store"
    assert local_store_path("~/store") == tmp_path / "store"
    assert location_scheme("relative/dir") is None and location_scheme("S3A://b/k") == "s3a"
    with pytest.raises(UnsupportedLocationError, match="found host 'otherhost'"):
        local_store_path("file://otherhost/data/store")


@pytest.mark.parametrize("uri", ["ftp://host/store", "webdav:/host/store"])
def test_an_unknown_scheme_is_refused_naming_the_schemes_read(uri):
    with pytest.raises(UnsupportedLocationError, match="unknown scheme") as err:
        RocketStore.open(uri)
    assert uri in str(err.value) and "s3://" in str(err.value) and "hdfs://" in str(err.value)


def test_filesystem_options_are_validated_and_secrets_never_shown():
    with pytest.raises(InvalidArgumentError, match="unknown filesystem option 'fs.endpiont'"):
        FsOptions.parse({"fs.endpiont": "x"})
    with pytest.raises(InvalidArgumentError, match="fs.anonymous has a bad value 'maybe'"):
        FsOptions.parse({"fs.anonymous": "maybe"})
    with pytest.raises(InvalidArgumentError, match="together"):
        FsOptions.parse({"fs.accessKey": "AKIA"})
    with pytest.raises(InvalidArgumentError, match=r"fs.secretKey has a bad value \*\*\*"):
        FsOptions.parse({"fs.accessKey": "AKIA", "fs.secretKey": object.__new__(BadText)})
    options = FsOptions.parse({"fs.endpoint": "http://127.0.0.1:9000", "fs.accessKey": "AKIA",
                               "fs.secretKey": "TOP-SECRET", "fs.retries": "2", "connectTimeout": 1})
    assert options.retries == 2 and options.connect_timeout == 1.0
    assert "TOP-SECRET" not in repr(options) and "AKIA" not in repr(options)
    with pytest.raises(InvalidArgumentError):
        FsOptions.parse({"fs.retries": "-1"})


class BadText:
    def __str__(self):
        raise ValueError("no text")


@pytest.mark.parametrize("uri", REMOTE)
def test_a_remote_uri_is_refused_for_writing_saying_why(uri, tmp_path):
    with pytest.raises(UnsupportedLocationError) as err:
        RocketStore.open_writer(uri)
    message = str(err.value)
    assert "POSIX record locks and atomic renames" in message and "local disk" in message
    assert "then copy" in message


def test_a_file_uri_store_opens_for_reading_and_writing(golden_store_path, tmp_path):
    import pyarrow as pa

    with RocketStore.open(f"file://{golden_store_path}") as store:
        assert store.max_phy_offset() > 0
    with RocketStore.open_writer(f"file://{tmp_path}/new") as writer:
        writer.append(pa.table({"topic": ["t"], "body": [b"x"]}))
    with RocketStore.open(tmp_path / "new") as store:
        assert store.max_offset("t", 0) == 1


def test_every_remote_scheme_has_its_filesystem(monkeypatch):
    """gs:// and abfs:// build pyarrow's clients (no request is made); hdfs:// needs a JVM and libhdfs, and says
    so when they are missing."""
    from rocketstore_spark.store.files.remote_clients import connect
    from rocketstore_spark.store.files.remote_fs import FsOptions as Options

    assert type(connect("gs", "bucket", Options.parse({"anonymous": "true"}))).__name__ == "GcsFileSystem"
    assert type(connect("abfs", "container@account.dfs.core.windows.net", Options())).__name__ == \
        "AzureFileSystem"
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-jvm")
    with pytest.raises(UnsupportedLocationError, match="hdfs://nn:8020.*needs a JVM .*libhdfs.so"):
        connect("hdfs", "nn:8020", Options())


def test_abfs_authorities_name_an_account_and_a_container():
    """Hadoop's container@account.dfs.core.windows.net, an account host (the container first in the path), or a
    bare container with fs.accountName; anything else is an error saying which forms are expected."""
    from rocketstore_spark.errors import InvalidArgumentError
    from rocketstore_spark.store.files.remote_clients import azure_location, bucket_root, connect
    from rocketstore_spark.store.files.remote_fs import FsOptions as Options

    none, named = Options(), Options.parse({"fs.accountName": "acct"})
    assert azure_location("ctr@acct.dfs.core.windows.net", none) == ("acct", "ctr", "core.windows.net")
    assert azure_location("ctr@acct.blob.core.chinacloudapi.cn", none) == ("acct", "ctr", "core.chinacloudapi.cn")
    assert azure_location("acct.dfs.core.windows.net", none) == ("acct", "", "core.windows.net")
    assert azure_location("ctr", named) == ("acct", "ctr", None)
    assert bucket_root("abfs", "ctr@acct.dfs.core.windows.net", none) == "ctr"
    assert bucket_root("gs", "bkt", none) == "bkt" and bucket_root("hdfs", "nn:8020", none) == ""
    for authority, options, message in [
            ("ctr", none, "names no storage account and fs.accountName is not set"),
            ("ctr@acct", none, "found no account host after '@'"),
            ("ctr@acct.queue.core.windows.net", none, "found host 'acct.queue.core.windows.net'"),
            ("ctr@other.dfs.core.windows.net", named, "names account 'other' but fs.accountName is 'acct'")]:
        with pytest.raises(InvalidArgumentError, match=message) as err:
            azure_location(authority, options)
        assert "abfs://<container>@<account>.dfs.core.windows.net/<path>" in str(err.value) or "names account" \
            in message
    secret = "not base64 at all!"
    with pytest.raises(InvalidArgumentError, match="fs.accountKey is not base64") as err:
        connect("abfs", "ctr", Options.parse({"accountName": "acct", "accountKey": secret}))
    assert secret not in str(err.value) and secret not in repr(Options.parse({"accountKey": secret}))
    with pytest.raises(InvalidArgumentError, match="fs.accountKey .*not fs.accessKey"):
        connect("abfs", "ctr", Options.parse({"accountName": "acct", "accessKey": "a", "secretKey": "b"}))
    with pytest.raises(InvalidArgumentError, match="are for abfs:// stores, not gs://"):
        connect("gs", "bkt", Options.parse({"accountKey": "YWJj"}))
    with pytest.raises(InvalidArgumentError, match="gs:// takes no fs.accessKey"):
        connect("gs", "bkt", Options.parse({"accessKey": "a", "secretKey": "b"}))
