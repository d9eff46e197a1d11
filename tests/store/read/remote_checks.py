"""What "a remote store reads as the local copy" means, for every object store the tests run (S3 on SeaweedFS, GCS
on gcp-storage-emulator, Azure on Azurite): each check opens the remote URI and compares with the local store."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from rocketstore_spark.store import RocketStore, counting, verify_store


def table(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches))


def assert_queues_read_the_same(remote, local, scan: bool = True, rows_of=None) -> None:
    """Topics, recovery, every queue's ends, the rows of every queue (of the topics ``rows_of`` when given) and
    (``scan``) the commit-log scan equal the local store's."""
    assert remote.topics() == local.topics()
    assert (remote.recovery.mode, remote.recovery.valid_end) == (local.recovery.mode, local.recovery.valid_end)
    for topic in local.topics():
        assert remote.queue_ids(topic) == local.queue_ids(topic)
        for qid in local.queue_ids(topic):
            assert (remote.min_offset(topic, qid), remote.max_offset(topic, qid)) == \
                (local.min_offset(topic, qid), local.max_offset(topic, qid))
            if rows_of is None or topic in rows_of:
                assert table(remote.read_queue(topic, qid)).equals(table(local.read_queue(topic, qid))), (topic, qid)
    if scan:
        assert table(remote.scan_raw()).equals(table(local.scan_raw()))


def assert_lookups_answer_the_same(remote, local, queries: list, rows: int = 20) -> None:
    """Key lookups (checked against what RocketMQ answered, ``queries``), and the message-id, offset and time
    lookups of the first ``rows`` messages of a user topic's queue 0."""
    for query in queries:
        found = remote.query_by_key(query["topic"], query["key"])
        assert found.equals(local.query_by_key(query["topic"], query["key"]))
        assert sorted(found.column("commitLogOffset").to_pylist()) == sorted(query["commitLogOffsets"])
    topic = local.topics()[2]
    first = table(local.read_queue(topic, 0)).slice(0, rows)
    for msg_id, phy, ts in zip(first.column("msgId").to_pylist(), first.column("commitLogOffset").to_pylist(),
                               first.column("storeTimestamp").to_pylist()):
        assert remote.look_message_by_msg_id(msg_id) == local.look_message_by_msg_id(msg_id)
        assert remote.read_record_at(phy).equals(local.read_record_at(phy))
        when = int(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else int(ts)
        assert remote.offset_by_time(topic, 0, when) == local.offset_by_time(topic, 0, when)


def assert_verify_reports_the_same(uri: str, fs_options: dict, local_path) -> None:
    """``verify_store`` says the same of the remote and the local store (the roots aside)."""
    with RocketStore.open(uri, fs_options=fs_options) as remote, RocketStore.open(local_path) as local:
        there, here = verify_store(remote), verify_store(local)
    strip = lambda report: json.loads(json.dumps(report, default=str).replace(uri, "ROOT")  # noqa: E731
                                      .replace(str(local_path), "ROOT"))
    assert strip(there) == strip(here)


def assert_one_queue_fetches_its_records(uri: str, fs_options: dict, local, local_path) -> None:
    """A one-queue read fetches that queue's records and consume-queue units, not the files."""
    store_bytes = sum(p.stat().st_size for p in local_path.rglob("*") if p.is_file())
    topic = max(local.topics(), key=lambda t: 0 if t.startswith(("%", "RMQ_SYS")) else len(t) < 40)
    qid = local.queue_ids(topic)[0]
    here = table(local.read_queue(topic, qid))
    with RocketStore.open(uri, fs_options=fs_options) as remote:
        remote.max_phy_offset()  # recovery first: what it costs is not the read's
        with counting() as cost:
            there = table(remote.read_queue(topic, qid))
    assert there.equals(here) and there.num_rows > 0
    record_bytes = int(np.sum(here.column("storeSize").to_numpy()))
    # the queue's records (neighbours closer than the coalescing gap come along) and its consume-queue units
    assert cost.remote_bytes < record_bytes * 4 + 64 * 1024 + there.num_rows * 20 * 4
    assert cost.remote_bytes < store_bytes // 10
    assert cost.files_mapped <= len(list((local_path / "commitlog").iterdir()))
