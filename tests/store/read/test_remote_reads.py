"""Reading a store on S3 (a real SeaweedFS server, no mocks) through ``pyarrow.fs``: every read, lookup and
verification equals the same operation on the local copy; nothing is downloaded whole; bad remote input gets
errors naming the object, and nothing hangs."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from rocketstore_spark.errors import RemoteReadError, StoreNotFoundError
from rocketstore_spark.store import RocketStore, counting
from tests.store.read.remote_checks import (
    assert_lookups_answer_the_same,
    assert_one_queue_fetches_its_records,
    assert_queues_read_the_same,
    assert_verify_reports_the_same,
)

pytestmark = pytest.mark.remote  # a real S3-compatible server: `make test-remote`


@pytest.fixture(scope="session")
def s3_golden(s3_server, golden_store_path):
    """(URI, fs_options) of the golden store uploaded to the test server."""
    uri = s3_server.upload(golden_store_path, "rst", "remote-reads/archive/broker-a/store")
    return uri, s3_options(s3_server)


def s3_options(server) -> dict:
    return {"endpoint": server.endpoint, "scheme": "http", "anonymous": True, "region": "us-east-1",
            "retries": 1, "request_timeout": 5, "connect_timeout": 2}


def test_every_queue_and_the_commit_log_read_the_same_from_s3(s3_golden, golden_store):
    uri, fs = s3_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert str(remote.root) == uri
        assert_queues_read_the_same(remote, golden_store)


def test_a_one_queue_read_fetches_its_records_not_the_files(s3_golden, golden_store, golden_store_path):
    uri, fs = s3_golden
    assert_one_queue_fetches_its_records(uri, fs, golden_store, golden_store_path)


def test_lookups_by_key_msg_id_offset_and_time_answer_as_locally(s3_golden, golden_store, golden_view):
    uri, fs = s3_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert_lookups_answer_the_same(remote, golden_store, golden_view["queries"][:25])


def test_verify_reports_the_same_from_s3(s3_golden, golden_store_path):
    uri, fs = s3_golden
    assert_verify_reports_the_same(uri, fs, golden_store_path)


def test_missing_buckets_prefixes_and_non_stores_are_clear_errors(s3_server, s3_golden):
    _, fs = s3_golden
    with pytest.raises(StoreNotFoundError, match="s3://no-such-bucket-here/store does not exist"):
        RocketStore.open("s3://no-such-bucket-here/store", fs_options=fs)
    with pytest.raises(StoreNotFoundError, match="s3://rst/remote-reads/archive/broker-z/store does not exist"):
        RocketStore.open("s3://rst/remote-reads/archive/broker-z/store", fs_options=fs)
    with pytest.raises(StoreNotFoundError, match="is not a RocketMQ store: expected a commitlog/"):
        RocketStore.open("s3://rst/remote-reads/archive/broker-a/store/index", fs_options=fs)


def test_an_object_that_vanishes_under_a_read_is_named(s3_server, golden_store_path, golden_store):
    uri = s3_server.upload(golden_store_path, "rst", "remote-vanish/store")
    fs = s3_options(s3_server)
    with RocketStore.open(uri, fs_options=fs) as remote:
        remote.max_phy_offset()
        victim = remote.commitlog.queue.files[3]
        s3_server.filesystem().delete_file(f"rst/remote-vanish/store/commitlog/{victim.path.name}")
        with pytest.raises((StoreNotFoundError, RemoteReadError)) as err:
            list(remote.scan_raw())
        assert f"{uri}/commitlog/{victim.path.name}" in str(err.value)


def test_a_server_that_stops_mid_read_fails_with_the_object_not_a_hang(tmp_path, golden_store_path):
    from tests.s3_server import start_s3_server

    server = start_s3_server(tmp_path / "weed")
    try:
        uri = server.upload(golden_store_path, "remote-stop", "store")
        remote = RocketStore.open(uri, fs_options=s3_options(server))
        remote.max_phy_offset()
    finally:
        server.stop()
    started = time.monotonic()
    with pytest.raises(RemoteReadError) as err:
        list(remote.scan_raw())
    assert time.monotonic() - started < 60
    assert f"{uri}/" in str(err.value) and "failed after 2 attempt(s)" in str(err.value)
    remote.close()


def test_a_production_shaped_store_reads_the_same_from_s3(s3_server, tmp_path):
    """Many queues (skewed topics, retry and DLQ queues, mixed sizes, several commit-log files): every queue,
    the commit-log scan and the queue ends agree with the local copy byte for byte."""
    from tests.cli.test_cli import run

    local = tmp_path / "store"
    run("generate", local, "--messages", 6000, "--topics", 30, "--queues-per-topic", 4, "--retry-groups", 12,
        "--commit-log-file-size", 1 << 20, "--consume-queue-file-size", 6000, "--index-hash-slots", 500,
        "--index-max-entries", 2000)
    uri = s3_server.upload(local, "rst", "remote-production/broker-p/store")
    fs = s3_options(s3_server)
    cq_files = len(list((local / "consumequeue").glob("*/*/*")))
    with counting() as opening:
        remote = RocketStore.open(uri, fs_options=fs)
    # each queue's end: one read per consume-queue file it searches (a young queue's whole file, or the first
    # window of an old one), not a binary search of round trips
    assert opening.reads <= cq_files and opening.remote_requests <= cq_files + 20  # + headers, first records
    with remote, RocketStore.open(local) as here:
        assert len(here.topics()) > 30 and len(here.commitlog.queue.files) > 2
        assert remote.topics() == here.topics()
        ranges = [(t, q, None, None) for t in here.topics() for q in here.queue_ids(t)]
        assert len(ranges) > 120
        assert [remote.max_offset(t, q) for t, q, _, _ in ranges] == [here.max_offset(t, q) for t, q, _, _ in ranges]
        assert pa.Table.from_batches(list(remote.read_queues(ranges))).equals(
            pa.Table.from_batches(list(here.read_queues(ranges))))
        assert pa.Table.from_batches(list(remote.scan_raw())).equals(
            pa.Table.from_batches(list(here.scan_raw())))


def test_a_prefix_being_synced_is_followed_by_the_streaming_tail(s3_server, golden_copy):
    """A broker's store copied to S3 again and again (``aws s3 sync``): each call of the tail sees the objects as
    they are now, and the new messages' queue ends."""
    from pyarrow import fs as pafs

    from rocketstore_spark.store import LiveTail

    def sync():
        pafs.copy_files(str(golden_copy), "rst/remote-sync/store", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=s3_server.filesystem())

    s3_server.filesystem().create_dir("rst")
    sync()
    tail = LiveTail.open("s3://rst/remote-sync/store", fs_options=s3_options(s3_server))
    before = tail.ends()
    with RocketStore.open(golden_copy) as here:
        assert before == {t: {str(q): here.max_offset(t, q) for q in here.queue_ids(t)} for t in here.topics()
                          if t in before}
    with RocketStore.open_writer(golden_copy) as writer:
        writer.append(pa.table({"topic": ["synced"] * 5, "queueId": pa.array([0, 1, 0, 1, 0], pa.int32()),
                                "body": [b"x%d" % i for i in range(5)]}))
    sync()
    after = tail.ends()
    assert after["synced"] == {"0": 3, "1": 2}
    assert {t: e for t, e in after.items() if t != "synced"} == before
    with RocketStore.open("s3://rst/remote-sync/store", fs_options=s3_options(s3_server)) as remote:
        assert [b"x0", b"x2", b"x4"] == pa.Table.from_batches(list(remote.read_queue("synced", 0))) \
            .column("body").to_pylist()


def test_an_object_that_shrinks_under_a_read_is_named_with_the_offset(s3_server, golden_store_path):
    uri = s3_server.upload(golden_store_path, "rst", "remote-shrink/store")
    with RocketStore.open(uri, fs_options=s3_options(s3_server)) as remote:
        remote.max_phy_offset()
        victim = remote.commitlog.queue.files[5]
        with s3_server.filesystem().open_output_stream(f"rst/remote-shrink/store/commitlog/{victim.path.name}") as out:
            out.write(b"\0" * 1024)  # a half-synced copy: the object is replaced by a short one
        with pytest.raises(RemoteReadError, match="shorter than when it was listed") as err:
            list(remote.scan_raw())
        assert f"{uri}/commitlog/{victim.path.name}" in str(err.value) and err.value.offset is not None


def test_access_denied_fails_at_once_and_credentials_never_show(tmp_path, golden_store_path, monkeypatch):
    from tests.s3_server import start_s3_server

    secret = "Secret-Key-Never-Shown-123"
    server = start_s3_server(tmp_path / "weed", identities=[{
        "name": "reader", "credentials": [{"accessKey": "READERKEY", "secretKey": secret}],
        "actions": ["Admin", "Read", "List", "Write"]}])
    try:
        uri = server.upload(golden_store_path, "remote-private", "store")
        anonymous = {**s3_options(server), "retries": 3}
        started = time.monotonic()
        with pytest.raises((RemoteReadError, StoreNotFoundError)) as err:
            RocketStore.open(uri, fs_options=anonymous)
        assert time.monotonic() - started < 5  # denied is not retried
        assert "s3://remote-private/store" in str(err.value) and "denied" in str(err.value).lower()
        wrong = {**s3_options(server), "anonymous": False, "access_key": "READERKEY", "secret_key": "wrong-" + secret}
        with pytest.raises((RemoteReadError, StoreNotFoundError)) as err:
            RocketStore.open(uri, fs_options=wrong)
        assert secret not in str(err.value) and "wrong-" not in str(err.value)
        signed = {**s3_options(server), "anonymous": False, "access_key": "READERKEY", "secret_key": secret}
        with RocketStore.open(uri, fs_options=signed) as remote, RocketStore.open(golden_store_path) as here:
            assert remote.max_phy_offset() == here.max_phy_offset()
            topic = here.topics()[2]
            assert pa.Table.from_batches(list(remote.read_queue(topic, 0))).equals(
                pa.Table.from_batches(list(here.read_queue(topic, 0))))
    finally:
        server.stop()


@pytest.mark.parametrize("variant", ["dledger", "rocksdb-cq", pytest.param("batch-cq", marks=pytest.mark.slow),
                                     pytest.param("lmq", marks=pytest.mark.slow),
                                     pytest.param("prop-crc", marks=pytest.mark.slow)])
def test_every_storage_variant_reads_the_same_from_s3(s3_server, variant_golden, variant):
    """The variants' stores (written by RocketMQ 5.3.3) on S3: detection, every queue and the commit-log scan as
    from the local files (a RocksDB consume queue is copied to a local scratch directory: RocksDB reads files)."""
    local = variant_golden(variant) / "store"
    uri = s3_server.upload(local, "rst", f"remote-{variant}/store")
    with RocketStore.open(uri, fs_options=s3_options(s3_server)) as remote, RocketStore.open(local) as here:
        assert remote.variant.features == here.variant.features and remote.variant.name != "default"
        ranges = [(t, q, None, None) for t in here.topics() for q in here.queue_ids(t)]
        assert ranges
        assert pa.Table.from_batches(list(remote.read_queues(ranges))).equals(
            pa.Table.from_batches(list(here.read_queues(ranges))))
        assert pa.Table.from_batches(list(remote.scan_raw())).equals(
            pa.Table.from_batches(list(here.scan_raw())))


def test_s3a_and_s3n_uris_name_the_same_objects(s3_golden, golden_store):
    uri, fs = s3_golden
    topic = golden_store.topics()[2]
    local = pa.Table.from_batches(list(golden_store.read_queue(topic, 0)))
    for scheme in ("s3a", "s3n"):
        with RocketStore.open(uri.replace("s3://", f"{scheme}://"), fs_options=fs) as remote:
            assert str(remote.root).startswith(f"{scheme}://")
            assert pa.Table.from_batches(list(remote.read_queue(topic, 0))).equals(local)
