"""Executors read planned consume-queue ranges without searching each queue's end again (issue 19: a task over
thousands of queues pays per unit read, not per queue opened), and a queue cut or replaced after planning is
data loss, never zeros or a silent short read. Planned and read in this process, costs counted."""

import numpy as np
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import Pushed, QueuePartition, QueueRangesPartition, plan
from rocketstore_spark.spark.reader import _OPEN_STORES, RocketStoreReader
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L


@pytest.fixture(autouse=True)
def fresh_executor_cache():
    """Each test starts as a new executor would (no store opened by an earlier test)."""
    for store in _OPEN_STORES.values():
        store.close()
    _OPEN_STORES.clear()
    yield
    for store in _OPEN_STORES.values():
        store.close()
    _OPEN_STORES.clear()


def queue_plan(path, **options):
    opts = parse_read_options({"path": str(path), "scanMode": "queue", "includeSystemTopics": "true", **options})
    parts = plan(opts, Pushed())
    assert parts and all(isinstance(p, (QueuePartition, QueueRangesPartition)) for p in parts)
    return opts, parts


def ranges_of(part):
    return part.ranges if isinstance(part, QueueRangesPartition) else \
        ((part.topic, part.queue_id, part.start, part.end),)


def test_a_task_reads_each_planned_queue_with_one_unit_read_per_window(golden_store_path):
    """No end search per queue: the reads a task makes are the unit windows of its ranges (one per queue and
    consume-queue file touched here), where searching each queue's end cost several more."""
    opts, parts = queue_plan(golden_store_path, maxMessagesPerPartition="100000")
    reader = RocketStoreReader(opts, ("body",))
    ranges = [r for p in parts for r in ranges_of(p)]
    with counting() as cost:
        rows = sum(b.num_rows for p in parts for b in reader.read(p))
    assert rows == sum(hi - lo for _, _, lo, hi in ranges)
    windows = sum(-(-(hi - lo) // 40_000) for _, _, lo, hi in ranges if hi > lo)  # read_queues' unit steps
    assert cost.reads <= windows + len(ranges)  # plus min_offset's first unit per queue


def test_a_queue_cut_after_planning_is_data_loss(golden_copy):
    opts, parts = queue_plan(golden_copy, topics="TopicTest")
    topic, qid, lo, hi = max((r for p in parts for r in ranges_of(p)), key=lambda r: r[3] - r[2])
    assert hi - lo > 2
    per = parts[0].store.sizes[1] // L.CQ_STORE_UNIT_SIZE  # units per consume-queue file
    path = golden_copy / L.CONSUMEQUEUE_DIR / topic / str(qid) / f"{(hi - 1) // per * per * L.CQ_STORE_UNIT_SIZE:020d}"
    units = np.fromfile(path, dtype=L.CQ_UNIT_DTYPE)
    units[hi - 2 - int(path.name) // L.CQ_STORE_UNIT_SIZE:] = np.zeros(1, dtype=L.CQ_UNIT_DTYPE)
    units.tofile(path)
    reader = RocketStoreReader(opts, ("body",))
    with pytest.raises(DataLossError, match=f"{topic}/{qid}.*truncated or replaced since planning"):
        for p in parts:
            for _ in reader.read(p):
                pass


def test_a_queue_whose_files_went_away_after_planning_is_data_loss(golden_copy):
    opts, parts = queue_plan(golden_copy, topics="TopicTest")
    topic, qid, _, _ = next(r for p in parts for r in ranges_of(p) if r[3] > r[2])
    for path in (golden_copy / L.CONSUMEQUEUE_DIR / topic / str(qid)).iterdir():
        path.unlink()
    reader = RocketStoreReader(opts, ("body",))
    with pytest.raises(DataLossError, match=f"{topic}/{qid}"):
        for p in parts:
            for _ in reader.read(p):
                pass


def test_a_longer_range_planned_later_reloads_the_queue(golden_store_path):
    """A streaming executor keeps its store between micro-batches: a queue loaded for a shorter planned range
    is loaded again for a longer one (its end is the newer plan's)."""
    opts, parts = queue_plan(golden_store_path, topics="TopicTest")
    reader = RocketStoreReader(opts, ("queueOffset",))
    topic, qid, lo, hi = max((r for p in parts for r in ranges_of(p)), key=lambda r: r[3] - r[2])
    handle = parts[0].store
    short = QueuePartition(handle, topic, qid, lo, lo + (hi - lo) // 2)
    full = QueuePartition(handle, topic, qid, lo, hi)
    first = [o for b in reader.read(short) for o in b.column(0).to_pylist()]
    second = [o for b in reader.read(full) for o in b.column(0).to_pylist()]
    assert first == list(range(lo, lo + (hi - lo) // 2))
    assert second == list(range(lo, hi))


def test_a_task_names_the_planned_files_instead_of_listing_queue_directories(golden_store_path, monkeypatch):
    """A task over thousands of short queues opens the files its ranges need by name: no queue directory is
    listed (a listing and a stat per file cost more than reading a young queue's few units)."""
    import rocketstore_spark.store.files.mapped_file_queue as mfq

    opts, parts = queue_plan(golden_store_path, maxMessagesPerPartition="100000")
    listed = []
    real = mfq.scandir
    monkeypatch.setattr(mfq, "scandir", lambda d: listed.append(str(d)) or real(d))
    reader = RocketStoreReader(opts, ("body",))
    rows = sum(b.num_rows for p in parts for b in reader.read(p))
    assert rows == sum(hi - lo for p in parts for _, _, lo, hi in ranges_of(p))
    assert not [d for d in listed if f"/{L.CONSUMEQUEUE_DIR}/" in d]


def test_a_range_starting_earlier_than_a_loaded_one_reloads_the_queue(tmp_path):
    """Files are named from a range's start: a later range starting earlier (in an earlier consume-queue file)
    loads the queue again instead of reading from the later file on."""
    from rocketstore_spark.store import RocketStore
    from tests.store.write.test_writer import SMALL, messages

    with RocketStore.open(tmp_path / "s", mode="a", **SMALL) as w:  # 10 units per consume-queue file
        w.append(messages(90, queueId=[0] * 90))
    opts, parts = queue_plan(tmp_path / "s", topics="orders")
    reader = RocketStoreReader(opts, ("queueOffset",))
    lo, hi = 0, max(r[3] for p in parts for r in ranges_of(p) if r[:2] == ("orders", 0))
    topic, qid, handle = "orders", 0, parts[0].store
    assert hi == 90
    late = [o for b in reader.read(QueuePartition(handle, topic, qid, hi - 1, hi)) for o in b.column(0).to_pylist()]
    whole = [o for b in reader.read(QueuePartition(handle, topic, qid, lo, hi)) for o in b.column(0).to_pylist()]
    assert late == [hi - 1] and whole == list(range(lo, hi))


def test_the_planner_opens_a_store_rocketstore_wrote_without_walking_it(tmp_path, monkeypatch):
    """A store whose last writer was rocketstore's opens from the writer's record of the end; a store a broker
    wrote (no record) is walked as the broker's recovery walks it."""
    import rocketstore_spark.spark.planning as planning
    import rocketstore_spark.store.read.store_reader as store_reader
    from rocketstore_spark.store import RocketStore
    from tests.store.write.test_writer import SMALL, messages

    with RocketStore.open(tmp_path / "s", mode="a", **SMALL) as w:
        w.append(messages(60))
    walked = []
    real = store_reader.recover
    monkeypatch.setattr(store_reader, "recover", lambda *a, **k: walked.append(1) or real(*a, **k))
    planning._RECOVERED.clear()
    opts, parts = queue_plan(tmp_path / "s")
    assert walked == [] and sum(hi - lo for p in parts for _, _, lo, hi in ranges_of(p)) == 60
    assert parts[0].store.valid_end == RocketStore.open(tmp_path / "s").max_phy_offset()
    assert walked == [1]  # the plain open above walked
