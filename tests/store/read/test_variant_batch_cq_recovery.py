"""Abnormal recovery of a batch-cq store: re-dispatch rebuilds the batch consume-queue units a crash lost, in
memory (the store is never modified), as the real 5.3.3 store does (``BatchConsumeQueue.putBatchMessagePositionInfo``
from the ``DispatchRequest`` of ``checkMessageAndReturnSize``: base = ``INNER_BASE``, batchSize = ``INNER_NUM`` for
an inner batch, else the record's QUEUEOFFSET and 1; records at or before the queue's last unit skipped).

Checked with the referee (VView, ``abort`` present) on the same copies: the real store rebuilds every unit, so
its messages, queues and time queries equal the golden view byte for byte; its key queries differ only by the
re-indexed boundary record (``buildIndex`` re-indexes a record AT the kept index file's endPhyOffset)."""

import shutil
import struct

import pyarrow as pa
import pytest

from rocketstore_spark.errors import StoreConfigError
from rocketstore_spark.store import RocketStore
from tests.conftest import sizes_from_args
from tests.store.read.test_variant_batch_cq import unwrapped
from tests.store.read.variant_view import (
    ALL,
    compare_key_queries,
    compare_offsets,
    compare_time_queries,
    row_as_view,
    run_vview,
    variant_fixtures,
    view_by_queue,
)

FILE_SIZE = 1048576
BCQ_UNIT, CQ_UNIT = 46, 20
BOUNDARY = 10128165  # the first index file's endPhyOffset: kept after the crash, its last record re-indexed

golden, view, _store, copy = variant_fixtures("batch-cq", own_store=True)


def cut_queues_at(store_dir, phy_start: int) -> None:
    """Zero every consume-queue and batch consume-queue unit pointing at or past ``phy_start`` (a crash before
    the queues were flushed), dropping queue files left with nothing; leave ``abort``, as a crash does."""
    for base, unit in (("batchconsumequeue", BCQ_UNIT), ("consumequeue", CQ_UNIT)):
        for qdir in (store_dir / base).glob("*/*"):
            for f in sorted(qdir.iterdir()):
                data = bytearray(f.read_bytes())
                n = len(data) // unit
                cut = next((i for i in range(n) if struct.unpack_from(">i", data, i * unit + 8)[0] > 0
                            and struct.unpack_from(">q", data, i * unit)[0] >= phy_start), None)
                if cut is not None:
                    data[cut * unit:] = bytes(len(data) - cut * unit)
                    f.write_bytes(bytes(data))
            for f in reversed(sorted(qdir.iterdir())[1:]):
                if any(f.read_bytes()):
                    break
                f.unlink()
    (store_dir / "abort").write_bytes(b"")


def lose_batch_queues(store_dir, first_store_time: int) -> None:
    """No ``batchconsumequeue/`` at all and a checkpoint older than the first record: recovery walks (and
    re-dispatches) the whole commit log, and only the caller can say which topic is a BatchCQ topic."""
    shutil.rmtree(store_dir / "batchconsumequeue")
    checkpoint = bytearray((store_dir / "checkpoint").read_bytes())
    struct.pack_into(">q", checkpoint, 8, first_store_time)  # logicsMsgTimestamp
    (store_dir / "checkpoint").write_bytes(bytes(checkpoint))
    (store_dir / "abort").write_bytes(b"")


def compare_batch_reads(store, view) -> int:
    total = 0
    for (topic, qid), lines in view_by_queue(view["messages"]).items():
        want = [e for line in lines for e in unwrapped(line)]
        got = [row_as_view(r) for r in pa.Table.from_batches(list(store.read_queue(topic, qid, columns=ALL)))
               .to_pylist()]
        bad = [(w["cqOffset"], k, g.get(k), w[k]) for g, w in zip(got, want) for k in w if g.get(k) != w[k]]
        assert len(got) == len(want) and not bad, (topic, qid, len(got), len(want), bad[:5])
        total += len(got)
    return total


def snapshot(store_dir) -> dict:
    return {p.relative_to(store_dir): p.read_bytes() for p in sorted(store_dir.rglob("*")) if p.is_file()}


def test_units_lost_in_a_crash_are_rebuilt_as_the_real_store_does(copy, golden, view):
    last_file = (view["manifest"][-1]["commitLogOffset"] // FILE_SIZE) * FILE_SIZE
    cut_queues_at(copy, last_file)
    before = snapshot(copy)
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        assert s.recovery.mode == "abnormal"
        bcq = s.consume_queue("BatchTopic", 0)
        assert bcq.disk_max_offset < bcq.max_offset  # the rebuilt units are in memory only
        compare_offsets(s, view)
        assert compare_batch_reads(s, view) == 7029
        compare_time_queries(s, view["time_queries"])
        # the real store's answer on this copy: the boundary record found twice (indexed again after the crash)
        boundary = next(m for m in view["manifest"] if m["commitLogOffset"] == BOUNDARY)
        got = s.query_by_key(boundary["topic"], boundary["uniqKey"], columns=["commitLogOffset"]).column(0)
        assert got.to_pylist() == [BOUNDARY, BOUNDARY]
    assert snapshot(copy) == before


def test_a_lost_batch_queue_is_rebuilt_for_the_topics_named_batch(copy, golden, view):
    """Without ``batchconsumequeue/`` the files no longer say BatchTopic is a BatchCQ topic, nor the batch
    queues' file size (``--batch-topics``, ``--bcq-size`` of the store's ``store.args``/``sizes.args``)."""
    lose_batch_queues(copy, view["manifest"][0]["storeTimestamp"])
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(StoreConfigError, match="nothing says whether 'BatchTopic' is a BatchCQ topic"):
            s.max_phy_offset()
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args"), batch_topics="BatchTopic",
                          batch_consume_queue_file_size=4600) as s:
        assert s.recovery.mode == "abnormal" and s.variant.name == "batch-cq"
        compare_offsets(s, view)
        assert compare_batch_reads(s, view) == 7029
        compare_time_queries(s, view["time_queries"])
    assert not (copy / "batchconsumequeue").exists()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["cut", "lost"])
def test_rebuilt_units_equal_the_referees_answers(copy, golden, view, tmp_path, scenario):
    """The referee (RocketMQ 5.3.3's store) reopens the same crashed copy: every answer equal to rocketstore's."""
    if scenario == "cut":
        cut_queues_at(copy, (view["manifest"][-1]["commitLogOffset"] // FILE_SIZE) * FILE_SIZE)
        options = {}
    else:
        lose_batch_queues(copy, view["manifest"][0]["storeTimestamp"])
        options = {"batch_topics": "BatchTopic", "batch_consume_queue_file_size": 4600}
    ours = tmp_path / "ours"
    shutil.copytree(copy, ours)
    real = run_vview(copy, tmp_path / "view", golden)
    assert real["summary"]["recoveryMode"] == "abnormal" and real["summary"]["problemCount"] == 0
    with RocketStore.open(ours, **sizes_from_args(golden / "sizes.args"), **options) as s:
        compare_offsets(s, real)
        assert compare_batch_reads(s, real) == 7029
        compare_time_queries(s, real["time_queries"])
        compare_key_queries(s, view["manifest"], real["queries"])
