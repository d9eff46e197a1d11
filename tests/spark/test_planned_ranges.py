"""Executors read planned consume-queue ranges without searching each queue's end again (a task over
thousands of queues pays per unit read, not per queue opened), and a queue cut or replaced after planning is
data loss, never zeros or a silent short read. Planned and read in this process, costs counted."""

import numpy as np
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import Pushed, QueuePartition, QueueRangesPartition, plan
from rocketstore_spark.spark.reader import RocketStoreReader
from rocketstore_spark.spark.store_cache import OPEN_STORES
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L


@pytest.fixture(autouse=True)
def fresh_executor_cache():
    """Each test starts as a new executor would (no store opened by an earlier test)."""
    OPEN_STORES.clear()  # closes them
    yield
    OPEN_STORES.clear()


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


@pytest.mark.parametrize("tags", [None, "TagA"])  # with a tag, short ranges are read in runs (planned_units)
def test_a_queue_cut_after_planning_is_data_loss(golden_copy, tags):
    opts, parts = queue_plan(golden_copy, topics="TopicTest", **({"tags": tags} if tags else {}))
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


@pytest.mark.parametrize("tags", [None, "TagA"])
def test_a_queue_whose_files_went_away_after_planning_is_data_loss(golden_copy, tags):
    opts, parts = queue_plan(golden_copy, topics="TopicTest", **({"tags": tags} if tags else {}))
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

    with RocketStore.open_writer(tmp_path / "s", **SMALL) as w:  # 10 units per consume-queue file
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
    import rocketstore_spark.store.read.redispatch as redispatch
    from rocketstore_spark.store import RocketStore
    from tests.store.write.test_writer import SMALL, messages

    with RocketStore.open_writer(tmp_path / "s", **SMALL) as w:
        w.append(messages(60))
    walked = []
    real = redispatch.recover
    monkeypatch.setattr(redispatch, "recover", lambda *a, **k: walked.append(1) or real(*a, **k))
    OPEN_STORES.clear()
    opts, parts = queue_plan(tmp_path / "s")
    assert walked == [] and sum(hi - lo for p in parts for _, _, lo, hi in ranges_of(p)) == 60
    assert parts[0].store.valid_end == RocketStore.open(tmp_path / "s").max_phy_offset()
    assert walked == [1]  # the plain open above walked


# --- tag reads over many short planned ranges (read in runs, store/read/planned_units.py) --------------------

ROW_COLUMNS = ("topic", "queueId", "queueOffset", "tags", "body")


def queue_by_queue_rows(path, parts, tags):
    """The rows of every planned range read by a store that loads and searches each queue (no runs)."""
    from rocketstore_spark.store import RocketStore

    rows = []
    with RocketStore.open(str(path)) as store:
        for p in parts:
            for topic, qid, lo, hi in ranges_of(p):
                for b in store.read_queue(topic, qid, lo, hi, tags=tags, columns=ROW_COLUMNS[1:]):
                    rows += [(topic,) + r for r in zip(*(b.column(c).to_pylist() for c in ROW_COLUMNS[1:]))]
    return sorted(rows)


def reader_rows(reader, parts):
    rows = []
    for p in parts:
        for b in reader.read(p):
            rows += list(zip(*(b.column(c).to_pylist() for c in ROW_COLUMNS)))
    return sorted(rows)


@pytest.fixture
def loaded_queues(monkeypatch):
    """(topic, queue id) of every consume queue an executor's store loads (an object, a file listing or naming,
    an end), as opposed to ranges read in runs."""
    import rocketstore_spark.store.read.queue_set as queue_set

    loaded = []
    real = queue_set.ConsumeQueue

    def counted(topic, queue_id, *args, **kwargs):
        if "planned_end" in kwargs:  # loaded when first named (a whole store's listed queues are not the executor's)
            loaded.append((topic, queue_id))
        return real(topic, queue_id, *args, **kwargs)

    monkeypatch.setattr(queue_set, "ConsumeQueue", counted)
    return loaded


@pytest.mark.parametrize("tags", ["TagA", "TagB || 标签C", "Tag-264"])
def test_a_tag_read_of_short_planned_ranges_loads_no_queue(golden_store_path, tags, loaded_queues):
    """Short planned ranges are read together: each range's units with one read of the file its offsets name,
    no queue loaded, and the rows are the queue-by-queue read's (the real tag checked)."""
    opts, parts = queue_plan(golden_store_path, tags=tags)
    ranges = [r for p in parts for r in ranges_of(p) if r[3] > r[2]]
    expected = queue_by_queue_rows(golden_store_path, parts, tags)
    assert expected and all(r[3] in tags.split(" || ") for r in expected)
    with counting() as cost:
        got = reader_rows(RocketStoreReader(opts, ROW_COLUMNS), parts)
    assert got == expected
    # SCHEDULE_TOPIC_XXXX's tagsCode is a delivery time, not a tag hash: its queues are read one by one
    assert set(loaded_queues) == {(t, q) for t, q, _, _ in ranges if t == L.SCHEDULE_TOPIC}
    # a read per range, and at most one per record decoded (scattered records are copied; every unit of the
    # schedule topic passes the hash test and is decided on its real tag)
    decoded = len(got) + sum(hi - lo for t, _, lo, hi in ranges if t == L.SCHEDULE_TOPIC)
    assert cost.reads <= len(ranges) + 2 + decoded


@pytest.fixture(scope="module")
def many_short_queues(tmp_path_factory):
    """~1,000 queues of a few dozen units each, in consume-queue files of 2,000 units."""
    from tests.spark.conftest import production_shaped_store

    return production_shaped_store(tmp_path_factory, "short-queues", 30_000, 120, 40, 200, 0.5)


def test_a_rare_tag_over_a_thousand_short_queues_matches_the_queue_by_queue_read(many_short_queues, loaded_queues):
    opts, parts = queue_plan(many_short_queues, tags="rare", includeRetryTopics="true")
    ranges = [r for p in parts for r in ranges_of(p)]
    assert len(ranges) > 150 and len(parts) < len(ranges) // 20  # queues with a match, trimmed to their matches
    with counting() as cost:
        got = reader_rows(RocketStoreReader(opts, ROW_COLUMNS), parts)
    assert loaded_queues == []
    assert got == queue_by_queue_rows(many_short_queues, parts, "rare") and 100 < len(got) < 1_000
    assert cost.reads <= len(ranges) + 2 + len(got)  # a read per range, and per record copied


def test_a_unit_past_the_valid_end_in_a_run_names_its_consume_queue_file(golden_copy):
    from rocketstore_spark.errors import CorruptRecordError

    opts, parts = queue_plan(golden_copy, topics="TopicTest", tags="TagA")
    topic, qid, lo, hi = next(r for p in parts for r in ranges_of(p) if r[3] > r[2])
    per = parts[0].store.sizes[1] // L.CQ_STORE_UNIT_SIZE  # units per consume-queue file
    base = lo // per * per
    path = golden_copy / L.CONSUMEQUEUE_DIR / topic / str(qid) / f"{base * L.CQ_STORE_UNIT_SIZE:020d}"
    units = np.fromfile(path, dtype=L.CQ_UNIT_DTYPE)
    # the first TagA unit of the range now points past the commit log's end
    first = lo + int(np.flatnonzero(units["tags_code"][lo - base:hi - base] == java_hash("TagA"))[0])
    units["phy_offset"][first - base] = 1 << 40
    units.tofile(path)
    with pytest.raises(CorruptRecordError, match=f"unit {first} of {topic}/{qid} points at commit-log offset") as e:
        for p in parts:
            for _ in RocketStoreReader(opts, ("body",)).read(p):
                pass
    assert str(e.value.path) == str(path) and e.value.offset == (first - base) * L.CQ_STORE_UNIT_SIZE


def java_hash(text: str) -> int:
    from rocketstore_spark.store.format.java_hash import java_string_hash

    return java_string_hash(text)
