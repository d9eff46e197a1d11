"""Reading a store on GCS (a real gcp-storage-emulator server, no mocks) through ``pyarrow.fs``: the same checks as
on S3 (``remote_checks``). Stores are uploaded as ``gcloud storage cp -r`` does (objects only, no directory
objects), and once with pyarrow's directory markers. The default suite runs one short test; the rest are slow."""

from __future__ import annotations

import time

import pytest

from rocketstore_spark.errors import RemoteReadError, StoreNotFoundError
from rocketstore_spark.store import RocketStore
from tests.store.read.remote_checks import (
    assert_lookups_answer_the_same,
    assert_one_queue_fetches_its_records,
    assert_queues_read_the_same,
    assert_verify_reports_the_same,
    table,
)


@pytest.fixture(scope="session")
def gcs_golden(gcs_server, golden_store_path):
    """(URI, fs_options) of the golden store uploaded to the GCS emulator without directory objects."""
    return gcs_server.upload(golden_store_path, "rst", "remote-reads/archive/broker-a/store"), gcs_server.options()


def test_queues_and_a_lookup_read_the_same_from_gcs(gcs_golden, golden_store, golden_view):
    """The default suite's: every queue's ends, the rows of two topics' queues (12 queues; every queue and the scan
    are the slow test's: the single-threaded emulator serves the ~11,000 ranged GETs of all queues in ~10 s)."""
    uri, fs = gcs_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert str(remote.root) == uri
        assert_queues_read_the_same(remote, golden_store, scan=False, rows_of=("TopicTest", "orders_v1-EU"))
        query = golden_view["queries"][0]
        assert remote.query_by_key(query["topic"], query["key"]).equals(
            golden_store.query_by_key(query["topic"], query["key"]))


@pytest.mark.slow
@pytest.mark.parametrize("markers", [False, True], ids=["objects-only", "directory-markers"])
def test_the_commit_log_scan_and_every_queue_read_the_same_from_gcs(gcs_server, golden_store_path, golden_store,
                                                                     markers):
    uri = gcs_server.upload(golden_store_path, "rst", f"remote-scan-{markers}/store", markers=markers)
    with RocketStore.open(uri, fs_options=gcs_server.options()) as remote:
        assert_queues_read_the_same(remote, golden_store)


@pytest.mark.slow
def test_lookups_answer_as_locally_from_gcs(gcs_golden, golden_store, golden_view):
    uri, fs = gcs_golden
    with RocketStore.open(uri, fs_options=fs) as remote:
        assert_lookups_answer_the_same(remote, golden_store, golden_view["queries"][:25])


@pytest.mark.slow
def test_verify_reports_the_same_from_gcs(gcs_golden, golden_store_path):
    uri, fs = gcs_golden
    assert_verify_reports_the_same(uri, fs, golden_store_path)


@pytest.mark.slow
def test_a_one_queue_read_from_gcs_fetches_its_records_not_the_files(gcs_golden, golden_store, golden_store_path):
    uri, fs = gcs_golden
    assert_one_queue_fetches_its_records(uri, fs, golden_store, golden_store_path)


@pytest.mark.slow
def test_missing_buckets_prefixes_and_non_stores_on_gcs_are_clear_errors(gcs_golden):
    _, fs = gcs_golden
    with pytest.raises(StoreNotFoundError, match="gs://no-such-bucket-here/store does not exist"):
        RocketStore.open("gs://no-such-bucket-here/store", fs_options=fs)
    with pytest.raises(StoreNotFoundError, match="gs://rst/remote-reads/archive/broker-z/store does not exist"):
        RocketStore.open("gs://rst/remote-reads/archive/broker-z/store", fs_options=fs)
    with pytest.raises(StoreNotFoundError, match="is not a RocketMQ store: expected a commitlog/"):
        RocketStore.open("gs://rst/remote-reads/archive/broker-a/store/index", fs_options=fs)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["dledger", "rocksdb-cq"])
def test_storage_variants_read_the_same_from_gcs(gcs_server, variant_golden, variant):
    local = variant_golden(variant) / "store"
    uri = gcs_server.upload(local, "rst", f"remote-{variant}/store")
    with RocketStore.open(uri, fs_options=gcs_server.options()) as remote, RocketStore.open(local) as here:
        assert remote.variant.features == here.variant.features and remote.variant.name != "default"
        ranges = [(t, q, None, None) for t in here.topics() for q in here.queue_ids(t)]
        assert ranges and table(remote.read_queues(ranges)).equals(table(here.read_queues(ranges)))
        assert table(remote.scan_raw()).equals(table(here.scan_raw()))


@pytest.mark.slow
def test_a_gcs_server_that_stops_mid_read_fails_with_the_object_not_a_hang(tmp_path, golden_store_path):
    from tests.gcs_server import start_gcs_server

    server = start_gcs_server(tmp_path / "gcs")
    try:
        uri = server.upload(golden_store_path, "remote-stop", "store")
        remote = RocketStore.open(uri, fs_options=server.options(request_timeout=3))
        remote.max_phy_offset()
    finally:
        server.stop()
    started = time.monotonic()
    with pytest.raises(RemoteReadError) as err:
        list(remote.scan_raw())
    assert time.monotonic() - started < 60
    assert f"{uri}/" in str(err.value) and "failed after 2 attempt(s)" in str(err.value)
    remote.close()
