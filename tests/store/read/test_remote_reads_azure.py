"""Reading a store on Azure Blob Storage (a real Azurite server from npm, no mocks) through ``pyarrow.fs``: the same
checks as on S3 (``remote_checks``), each URI form of ``abfs://``, and the account key kept out of every message.
All slow: Azurite is installed from npm on demand (``make azurite``), which the default suite does not assume."""

from __future__ import annotations

import base64
import time

import pytest

from rocketstore_spark.errors import InvalidArgumentError, RemoteReadError, StoreNotFoundError
from rocketstore_spark.store import RocketStore
from tests.azure_server import ACCOUNT, ACCOUNT_KEY
from tests.store.read.remote_checks import (
    assert_lookups_answer_the_same,
    assert_one_queue_fetches_its_records,
    assert_queues_read_the_same,
    assert_verify_reports_the_same,
    table,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def azure_golden(azure_server, golden_store_path):
    """(URI, fs_options) of the golden store uploaded to Azurite: abfs://rst@devstoreaccount1.dfs.core.windows.net/..."""
    return azure_server.upload(golden_store_path, "rst", "remote-reads/archive/broker-a/store"), azure_server.options()


def test_every_queue_and_the_commit_log_read_the_same_from_azure(azure_golden, golden_store):
    uri, fs = azure_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert str(remote.root) == uri
        assert_queues_read_the_same(remote, golden_store)


def test_each_abfs_uri_form_names_the_same_store(azure_golden, golden_store):
    """Hadoop's container@account host, the account host with the container first in the path, and a bare
    container with fs.accountName."""
    uri, fs = azure_golden
    path = uri.split(".windows.net/", 1)[1]
    topic = golden_store.topics()[2]
    local = table(golden_store.read_queue(topic, 0))
    for other, options in [(f"abfss://rst@{ACCOUNT}.blob.core.windows.net/{path}", fs),
                           (f"abfs://{ACCOUNT}.dfs.core.windows.net/rst/{path}", fs),
                           (f"abfs://rst/{path}", {**fs, "accountName": ACCOUNT})]:
        with RocketStore.open(other, fs_options=options) as remote:
            assert str(remote.root) == other and remote.topics() == golden_store.topics()
            assert table(remote.read_queue(topic, 0)).equals(local), other


def test_lookups_answer_as_locally_from_azure(azure_golden, golden_store, golden_view):
    uri, fs = azure_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert_lookups_answer_the_same(remote, golden_store, golden_view["queries"][:25])


def test_verify_reports_the_same_from_azure(azure_golden, golden_store_path):
    uri, fs = azure_golden
    assert_verify_reports_the_same(uri, fs, golden_store_path)


def test_a_one_queue_read_from_azure_fetches_its_records_not_the_files(azure_golden, golden_store, golden_store_path):
    uri, fs = azure_golden
    assert_one_queue_fetches_its_records(uri, fs, golden_store, golden_store_path)


def test_missing_containers_prefixes_and_non_stores_on_azure_are_clear_errors(azure_golden):
    uri, fs = azure_golden
    missing = f"abfs://no-such-container@{ACCOUNT}.dfs.core.windows.net/store"
    with pytest.raises(StoreNotFoundError, match=f"{missing} does not exist"):
        RocketStore.open(missing, fs_options=fs)
    with pytest.raises(StoreNotFoundError, match=f"{uri.replace('broker-a', 'broker-z')} does not exist"):
        RocketStore.open(uri.replace("broker-a", "broker-z"), fs_options=fs)
    with pytest.raises(StoreNotFoundError, match="is not a RocketMQ store: expected a commitlog/"):
        RocketStore.open(f"{uri}/index", fs_options=fs)


def test_a_wrong_account_key_fails_at_once_and_never_shows(azure_golden):
    uri, fs = azure_golden
    wrong = base64.b64encode(b"Wrong-Key-Never-Shown-123".ljust(64, b"x")).decode()  # base64, not the account's
    started = time.monotonic()
    with pytest.raises((RemoteReadError, StoreNotFoundError)) as err:
        RocketStore.open(uri, fs_options={**fs, "accountKey": wrong, "retries": 3})
    assert time.monotonic() - started < 10  # refused is not retried
    assert uri.rsplit("/", 1)[0] in str(err.value) and wrong not in str(err.value) and ACCOUNT_KEY not in str(err.value)
    assert "403" in str(err.value) or "authentication" in str(err.value).lower()
    with pytest.raises(InvalidArgumentError, match="fs.accountKey is not base64") as err:
        RocketStore.open(uri, fs_options={**fs, "accountKey": "not-a-key!"})
    assert "not-a-key!" not in str(err.value)
