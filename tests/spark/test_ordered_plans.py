"""Commit-log-ordered plans return exactly the rows of consume-queue plans.

Most cases run the planner and the reader in this process (no Spark session: they are the same code Spark calls),
comparing ``scanMode=commitlog`` with ``scanMode=queue`` row for row on the golden store, a production-shaped store,
stores whose tail is not dispatched, is torn or whose oldest files expired, and several stores at once. Costs are
counted (partitions planned, file reads through the file layer), never timed.
"""

import shutil

import numpy as np
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import (
    CommitLogSlicePartition,
    Pushed,
    QueuePartition,
    QueueRangesPartition,
    plan,
)
from rocketstore_spark.spark.reader import RocketStoreReader
from rocketstore_spark.spark.schema import SPARK_COLUMNS
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L

SYSTEM = {"includeSystemTopics": "true"}
# a few topics of the golden store, system ones included: cheaper to read twice than the whole store
FEW = {"topicPattern": "TopicTest|BenchTopic|%.*|RMQ_.*|SCHEDULE.*", "includeSystemTopics": "true"}


def read(options: dict, pushed=None, columns=SPARK_COLUMNS):
    """(partitions, rows sorted by broker and commit-log offset) of a batch read, planned and read here."""
    opts = parse_read_options(options)
    reader = RocketStoreReader(opts, columns)
    reader.pushed = pushed or Pushed()
    parts = plan(opts, reader.pushed)
    rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
    for r in rows:
        if "properties" in r:
            r["properties"] = sorted(r["properties"])
    return parts, sorted(rows, key=lambda r: (r["brokerName"], r["commitLogOffset"]))


def same_rows(options: dict, pushed=None, *, expect_rows=True):
    """Both plans of ``options``: assert identical rows; return (queue parts, commit-log parts, rows)."""
    q_parts, q_rows = read(dict(options, scanMode="queue"), pushed)
    c_parts, c_rows = read(dict(options, scanMode="commitlog"), pushed)
    assert all(isinstance(p, CommitLogSlicePartition) for p in c_parts)
    assert all(isinstance(p, (QueuePartition, QueueRangesPartition)) for p in q_parts)
    assert len(c_rows) == len(q_rows)
    assert c_rows == q_rows
    assert bool(q_rows) == expect_rows
    return q_parts, c_parts, q_rows


@pytest.mark.parametrize("options", [
    {},
    pytest.param(SYSTEM, marks=pytest.mark.slow),
    {"topicPattern": "BenchTopic|%.*", "includeRetryTopics": "true", "maxBytesPerPartition": "65536"},
    {"tags": "TagA || TagB", **SYSTEM},
    {"topics": "TopicTest", "startingOffsets": '{"TopicTest": {"2": 10, "5": 1000000}}',
     "endingOffsets": '{"TopicTest": {"2": 25, "1": 3}}'},
    {"topicPattern": "orders.*|TopicTest", "minPartitions": "7"},
], ids=["default", "system", "retry-small-partitions", "tags", "json-bounds", "pattern-min-partitions"])
def test_both_plans_return_the_same_rows_on_the_golden_store(golden_store_path, options):
    same_rows(dict(options, path=str(golden_store_path)))


def test_a_stretch_searched_in_many_small_steps_reads_the_same(golden_store_path, monkeypatch):
    """A stretch is searched and (remotely) fetched a step at a time; records straddling steps are read once."""
    from rocketstore_spark.store.read import ordered_scan

    monkeypatch.setattr(ordered_scan, "FETCH_STEP", 4099)
    same_rows({"path": str(golden_store_path), "topics": "TopicTest,BenchTopic"})


def test_time_bounds_and_pushed_filters_behave_the_same_in_both_plans(golden_store_path, manifest):
    path = str(golden_store_path)
    times = sorted(m["storeTimestamp"] for m in manifest if m["inConsumeQueue"])
    lo, hi = times[len(times) // 3], times[2 * len(times) // 3]
    _, _, rows = same_rows({"path": path, "startingTimestamp": str(lo), "endingTimestamp": str(hi)})
    assert all(lo <= r["storeTimestamp"].timestamp() * 1000 < hi for r in rows)
    offsets = sorted(m["commitLogOffset"] for m in manifest)
    pushed = Pushed(topics={"TopicTest", "orders_v1-EU"}, queue_ids={0, 2, 3}, queue_offset=(5, 400),
                    phy_offset=(offsets[len(offsets) // 5], offsets[4 * len(offsets) // 5]),
                    store_time=(times[len(times) // 10], None), tags={"TagA", "TagC"})
    _, _, rows = same_rows({"path": path}, pushed)
    assert {r["queueId"] for r in rows} <= {0, 2, 3} and all(5 <= r["queueOffset"] < 400 for r in rows)
    same_rows({"path": path}, Pushed(topics={"TopicTest"}, queue_ids={1}, queue_offset=(10, 20)))
    same_rows({"path": path}, Pushed(topics={"no-such-topic"}), expect_rows=False)


def test_a_full_read_plans_commit_log_stretches_of_the_target_size(golden_store_path, golden_store, caplog):
    """Auto mode: a read of the whole store scans the commit log in stretches of about maxBytesPerPartition at
    record starts, running on over the 1 MiB files' ends, and says why; a selective read packs consume-queue
    ranges."""
    path = str(golden_store_path)
    target = 256 * 1024
    with caplog.at_level("INFO", logger="rocketstore_spark"):
        parts = plan(parse_read_options({"path": path, "maxBytesPerPartition": str(target), **SYSTEM}), Pushed())
    assert "commit-log-ordered plan" in caplog.text
    assert all(isinstance(p, CommitLogSlicePartition) for p in parts)
    size = golden_store.sizes.commit_log_file_size
    assert all(a.end == b.start for a, b in zip(parts, parts[1:]))  # one run of consecutive files, cut in parts
    scanned = parts[-1].end - parts[0].start
    assert len(parts) == -(-scanned // target)  # the target given: parts of at most about that size
    assert all(p.end - p.start <= 2 * target for p in parts)
    assert any(p.start // size != (p.end - 1) // size for p in parts)  # across a file's end
    starts = {int(o) for t in golden_store.topics() for q in golden_store.queue_ids(t)
              for o in golden_store.consume_queue(t, q).units(0, golden_store.max_offset(t, q))["phy_offset"]}
    assert all(p.start in starts or p.start % size == 0 for p in parts)  # unit starts or file starts
    caplog.clear()
    with caplog.at_level("INFO", logger="rocketstore_spark"):
        small = plan(parse_read_options({"path": path, "topics": "orders_v1-EU"}), Pushed())
        tagged = plan(parse_read_options({"path": path, "tags": "TagA"}), Pushed())
    assert "consume-queue plan" in caplog.text and "a tag filter" in caplog.text
    assert len(small) == 1 and isinstance(small[0], QueueRangesPartition)  # 4 queues' ranges in one task
    assert {q for _, q, _, _ in small[0].ranges} == {0, 1, 2, 3}
    assert tagged and all(isinstance(p, QueueRangesPartition) for p in tagged)


# --- production-shaped stores ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def production_store(tmp_path_factory):
    """~220 queues (25 topics × 8, retry and DLQ queues), 20,000 messages of 100 B-2 KiB in 4 MiB files."""
    from tests.spark.conftest import production_shaped_store

    return production_shaped_store(tmp_path_factory, "production", 20_000, 25, 20, 500, 0.8)


def test_both_plans_agree_on_a_production_shaped_store(production_store):
    path = str(production_store)
    q_parts, c_parts, rows = same_rows({"path": path, "includeRetryTopics": "true",
                                        "maxBytesPerPartition": str(1 << 20)})
    assert len(rows) == 20_000
    with RocketStore.open(path) as store:
        queues = sum(len(store.queue_ids(t)) for t in store.topics())
        total = store.max_phy_offset() - store.min_phy_offset()
    assert queues > 200
    # packed: far fewer consume-queue partitions than queues; stretches of ~1 MiB
    assert len(q_parts) < queues // 10
    assert -(-total // (1 << 20)) <= len(c_parts) <= -(-total // (1 << 20)) + 4
    same_rows({"path": path, "topicPattern": "topic-0000[0-4]", "tags": "rare"})
    same_rows({"path": path, "topics": "topic-00003,%RETRY%group-00007"})


def test_planning_and_reading_a_production_store_cost_what_the_plan_needs(production_store):
    """Counted: the commit-log plan's driver reads a few consume-queue windows per queue and split point (never
    whole consume queues), and its tasks read no consume queue at all."""
    path = str(production_store)
    opts = parse_read_options({"path": path, "includeRetryTopics": "true", "maxBytesPerPartition": str(1 << 20)})
    plan(opts, Pushed())  # opens and recovers the store once: later plans reuse it
    with RocketStore.open(path) as store:
        queues = sum(len(store.queue_ids(t)) for t in store.topics())
        cq_bytes = sum((p.stat().st_size for p in (production_store / "consumequeue").rglob("*") if p.is_file()))
    with counting() as cost:
        parts = plan(opts, Pushed())
    assert cost.bytes_read < cq_bytes // 4 and cost.reads <= 8 * queues + 64 * len(parts)
    reader = RocketStoreReader(opts, ("body",))
    with counting() as cost:
        rows = sum(b.num_rows for p in parts for b in reader.read(p))
    assert rows == 20_000  # every message, read from the commit log alone
    assert cost.files_opened == 0 and cost.reads == 0


# --- stores whose tail is not dispatched, torn, or whose oldest files expired ------------------------------


def _cut_queues(root, keep):
    """Zero the consume-queue units that ``keep(topic, queue id, units)`` rejects (a boolean mask per file)."""
    for path in (root / L.CONSUMEQUEUE_DIR).glob("*/*/*"):
        units = np.fromfile(path, dtype=L.CQ_UNIT_DTYPE)
        mask = keep(path.parent.parent.name, int(path.parent.name), units)
        if not mask.all():
            first = int(np.flatnonzero(~mask)[0])
            units[first:] = np.zeros(1, dtype=L.CQ_UNIT_DTYPE)
            units.tofile(path)


def test_an_undispatched_tail_and_a_lagging_queue_read_the_same(golden_copy):
    with RocketStore.open(golden_copy) as store:
        end = store.max_phy_offset()
    cut = end - 300_000  # records past here are in no consume queue yet (dispatch runs behind the log)
    _cut_queues(golden_copy, lambda t, q, u: (u["phy_offset"] < cut) | (u["size"] <= 0))
    # and one queue's units lost further back while the others went on (its records past that are orphans)
    _cut_queues(golden_copy, lambda t, q, u: ~((t == "TopicTest") & (q == 3) & (u["phy_offset"] >= cut - 400_000)))
    _, c_parts, rows = same_rows({"path": str(golden_copy), **FEW})
    assert rows and max(r["commitLogOffset"] for r in rows) < cut
    assert not [r for r in rows if (r["topic"], r["queueId"]) == ("TopicTest", 3)
                and r["commitLogOffset"] >= cut - 400_000]
    # the undispatched tail is not even scanned: the scan ends with the last dispatched record read
    assert max(p.end for p in c_parts) == max(r["commitLogOffset"] + r["storeSize"] for r in rows)
    same_rows({"path": str(golden_copy), **FEW, "tags": "TagA || TagB"})  # tag reads: short ranges in runs


def test_a_torn_tail_after_a_crash_reads_the_same(golden_copy):
    """A crash (abort marker) tore the last record and left queues behind: recovery cuts the tail and
    re-dispatches what lies past the queues, and both plans read that view."""
    with RocketStore.open(golden_copy) as store:
        end = store.max_phy_offset()
        last = max(store.consume_queue(t, q).last_unit_end() - store.consume_queue(t, q).last_unit()[1]
                   for t in store.topics() for q in store.queue_ids(t))
    cut = end - 200_000
    _cut_queues(golden_copy, lambda t, q, u: (u["phy_offset"] < cut) | (u["size"] <= 0))
    size = 1 << 20
    with open(golden_copy / L.COMMITLOG_DIR / f"{last - last % size:020d}", "r+b") as fh:
        fh.seek(last % size + 30)
        fh.write(b"\0" * (end - last - 30))  # the last record torn mid-way
    (golden_copy / L.ABORT_FILE).write_bytes(b"")
    with RocketStore.open(golden_copy) as store:
        assert store.max_phy_offset() == last
    _, _, rows = same_rows({"path": str(golden_copy), **FEW})
    assert max(r["commitLogOffset"] for r in rows) > cut  # re-dispatched records are read by both
    _, _, tagged = same_rows({"path": str(golden_copy), **FEW, "tags": "TagA || TagB"})
    assert max(r["commitLogOffset"] for r in tagged) > cut


def test_expired_files_and_fail_on_data_loss_behave_the_same(golden_copy):
    for old in sorted((golden_copy / L.COMMITLOG_DIR).iterdir())[:3]:
        old.unlink()
    path = str(golden_copy)
    same_rows({"path": path, **FEW})
    early = '{"TopicTest": {"0": 0}}'
    for mode in ("queue", "commitlog"):
        with pytest.raises(DataLossError, match="TopicTest/0"):
            read({"path": path, "topics": "TopicTest", "startingOffsets": early, "scanMode": mode})
    same_rows({"path": path, "topics": "TopicTest", "startingOffsets": early, "failOnDataLoss": "false"})
    same_rows({"path": path, **FEW, "tags": "TagA"})
    same_rows({"path": path, "topics": "TopicTest", "startingOffsets": early, "failOnDataLoss": "false",
               "tags": "TagB"})


def test_several_stores_behave_the_same(golden_store_path, tmp_path):
    for name in ("broker-a", "broker-b"):
        shutil.copytree(golden_store_path, tmp_path / name / "store")
    paths = ",".join(str(tmp_path / n / "store") for n in ("broker-a", "broker-b"))
    _, c_parts, rows = same_rows({"path": paths, "topics": "TopicTest,BenchTopic",
                                  "endingOffsets": '{"broker-b": {"TopicTest": {"0": 7}}}'})
    assert {p.store.broker for p in c_parts} == {"broker-a", "broker-b"}
    by_broker = {b: [r for r in rows if r["brokerName"] == b] for b in ("broker-a", "broker-b")}
    assert len(by_broker["broker-a"]) > len(by_broker["broker-b"]) > 0


# --- through Spark --------------------------------------------------------------------------------------


def test_spark_dataframes_of_both_plans_are_equal(spark, pushdown, golden_store_path):
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    def load(mode, **options):
        df = (spark.read.format("rocketstore").option("scanMode", mode).option("includeRetryTopics", "true")
              .options(**options).load(str(golden_store_path)))
        return df.where("queueId < 3 and topic in ('orders_v1-EU', 'BenchTopic', '%DLQ%cg_payments')").select(
            "brokerName", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags",
            "storeTimestamp", F.sha2("body", 256).alias("body"), F.to_json("properties").alias("properties"))

    queue, ordered = load("queue"), load("commitlog", maxBytesPerPartition=str(3 << 20))
    assert ordered.rdd.getNumPartitions() == 10  # 28 MiB of 1-MiB files in parts of about 3 MiB, across files
    assert_df_equality(ordered, queue, ignore_row_order=True)


def test_a_stretch_whose_file_expired_after_planning_is_data_loss(golden_copy):
    first = sorted((golden_copy / L.COMMITLOG_DIR).iterdir())[0]
    first_end = int(first.name) + first.stat().st_size
    before = None
    for fail, expect in (("true", DataLossError), ("false", None)):
        opts = parse_read_options({"path": str(golden_copy), "scanMode": "commitlog", "failOnDataLoss": fail})
        reader = RocketStoreReader(opts, ("commitLogOffset",))
        parts = plan(opts, Pushed())
        if before is None:  # (the store, cached in this process, then knows its first file expired)
            before = [o for b in reader.read(parts[0]) for o in b.column(0).to_pylist()]
            assert before[0] < first_end <= before[-1]  # the part runs on into the next files
        saved = first.read_bytes()
        first.unlink()  # the broker's expiry, between planning and reading
        try:
            if expect:
                with pytest.raises(expect, match="expired"):
                    list(reader.read(parts[0]))
            else:  # the expired file's records skipped, the next files' read
                after = [o for b in reader.read(parts[0]) for o in b.column(0).to_pylist()]
                assert after == [o for o in before if o >= first_end]
        finally:
            first.write_bytes(saved)


@pytest.mark.parametrize("name,options", [("lmq", {}), ("prop-crc", {"verifyCrc": "true"})])
def test_variant_stores_whose_records_are_the_queue_rows_read_the_same(variant_golden, name, options):
    """LMQ stores (LMQ topics not selected) and prop-crc stores (records checked) scan the commit log; selecting
    LMQ topics, whose rows repeat other topics' records, keeps the consume queues even when commitlog is forced."""
    path = str(variant_golden(name) / "store")
    same_rows(dict(options, path=path, **SYSTEM))
    if name == "lmq":
        parts = plan(parse_read_options({"path": path, "includeLmqTopics": "true", "scanMode": "commitlog"}), Pushed())
        assert parts and not any(isinstance(p, CommitLogSlicePartition) for p in parts)


def test_few_queues_are_read_per_queue_in_runs_and_in_commit_log_order_when_interleaved(tmp_path):
    """Eight queues holding all the messages: per queue when each queue's records lie in a run of their own, from
    the commit log when the queues were written round-robin (a queue task would map all eight queues' records)."""
    import pyarrow as pa

    n, queues = 4_000, 8

    def store(name: str, queue_ids: np.ndarray) -> str:
        path = str(tmp_path / name)
        with RocketStore.open_writer(path) as writer:
            writer.append(pa.table({"topic": pa.array(["T"] * n), "queueId": pa.array(queue_ids, pa.int32()),
                                    "body": pa.array([b"x" * 200] * n, pa.binary())}))
        return path

    runs = store("runs", np.repeat(np.arange(queues), n // queues))
    round_robin = store("round-robin", np.arange(n) % queues)
    parts_runs, rows_runs = read({"path": runs})
    parts_rr, rows_rr = read({"path": round_robin})
    assert parts_runs and all(isinstance(p, (QueuePartition, QueueRangesPartition)) for p in parts_runs)
    assert parts_rr and all(isinstance(p, CommitLogSlicePartition) for p in parts_rr)
    # the interleaved store's commit-log rows are its queue plan's rows
    _, queue_rows = read({"path": round_robin, "scanMode": "queue"})
    assert len(rows_rr) == len(rows_runs) == n and rows_rr == queue_rows


def test_plan_options_are_checked_when_parsed(golden_store_path):
    from rocketstore_spark.errors import InvalidArgumentError

    path = str(golden_store_path)
    for bad, match in (({"maxBytesPerPartition": "100"}, "maxBytesPerPartition must be >= 65536"),
                       ({"maxBytesPerPartition": "lots"}, "maxBytesPerPartition must be an integer"),
                       ({"scanMode": "sideways"}, "auto, queue, commitlog, raw"),
                       ({"scanMode": "raw", "startingOffsets": '{"TopicTest": {"0": 1}}'}, "scanMode=raw")):
        with pytest.raises(InvalidArgumentError, match=match):
            parse_read_options(dict(bad, path=path))
    assert parse_read_options({"path": path}).scan_mode == "auto"
    assert parse_read_options({"path": path, "scanMode": "CommitLog"}).scan_mode == "commitlog"


# --- partition sizes --------------------------------------------------------------------------------------


def test_partition_bytes_halves_a_small_read_unless_the_size_is_given():
    from rocketstore_spark.spark.options import DEFAULT_MAX_BYTES_PER_PARTITION as DEFAULT
    from rocketstore_spark.spark.options import MIN_SPLIT_BYTES, ReadOptions, partition_bytes

    default = ReadOptions(stores=())
    assert partition_bytes(default, 10 * DEFAULT) == DEFAULT  # a large read: the default size
    assert partition_bytes(default, DEFAULT) == DEFAULT // 2  # smaller than two: split in two
    assert partition_bytes(default, MIN_SPLIT_BYTES) == MIN_SPLIT_BYTES  # halves never under the floor
    given = ReadOptions(stores=(), max_bytes_per_partition=DEFAULT, max_bytes_per_partition_given=True)
    assert partition_bytes(given, DEFAULT) == DEFAULT  # the user's size as given


def test_a_store_smaller_than_two_partitions_is_read_by_two_tasks(tmp_path, monkeypatch):
    """By default a read smaller than two default partitions gets two (counted, for both plans); a
    maxBytesPerPartition the user gives is kept."""
    from rocketstore_spark.spark import options
    from tests.store.write.test_writer import messages

    path = tmp_path / "s"
    with RocketStore.open_writer(path, commit_log_file_size=8 << 20) as w:
        w.append(messages(3000))
    with RocketStore.open(path) as s:
        total = s.max_phy_offset()
    monkeypatch.setattr(options, "MIN_SPLIT_BYTES", total // 4)  # the store stands for one of ~200 MB
    for mode in ("commitlog", "queue"):
        parts = plan(parse_read_options({"path": str(path), "scanMode": mode}), Pushed())
        # two stretches of the commit log; the queue plan packs its three queues' ranges by half the messages
        assert len(parts) == (2 if mode == "commitlog" else 3), mode
        given = plan(parse_read_options({"path": str(path), "scanMode": mode,
                                         "maxBytesPerPartition": str(8 << 20)}), Pushed())
        assert len(given) == 1, mode


def test_a_default_plan_cuts_an_even_number_of_equal_parts_across_files(golden_store_path, monkeypatch):
    """By default the commit log of consecutive files is cut into equal parts, an even number of them (the
    nearest to parts of maxBytesPerPartition, none more than a quarter larger), each running on over file ends;
    given maxBytesPerPartition or minPartitions, the count is the one they ask for. Counted on the golden store
    (28 files of 1 MiB) with a default of 3 MiB standing for 256 MiB."""
    import dataclasses

    from rocketstore_spark.spark import options

    monkeypatch.setattr(options, "MIN_SPLIT_BYTES", 1 << 20)
    opts = parse_read_options({"path": str(golden_store_path), "scanMode": "commitlog", **SYSTEM})
    parts = plan(dataclasses.replace(opts, max_bytes_per_partition=3 << 20), Pushed())
    scanned = parts[-1].end - parts[0].start
    assert scanned / (3 << 20) > 9  # ten parts of at most 3 MiB would be odd: ten
    assert len(parts) == 10
    assert all(a.end == b.start for a, b in zip(parts, parts[1:]))
    sizes = [p.end - p.start for p in parts]
    assert max(sizes) < 1.5 * scanned / 10 and min(sizes) > 0.5 * scanned / 10
    size = 1 << 20
    assert sum(p.start // size != (p.end - 1) // size for p in parts) >= 8  # nearly all run over a file's end
    given = plan(dataclasses.replace(opts, max_bytes_per_partition=3 << 20, max_bytes_per_partition_given=True),
                 Pushed())
    assert len(given) == -(-scanned // (3 << 20))
    assert len(plan(dataclasses.replace(opts, max_bytes_per_partition=3 << 20, min_partitions=9), Pushed())) == 10


@pytest.mark.parametrize("parts_of_target,expected", [
    (0.5, 1), (1.0, 1), (1.1, 2), (2.0, 2), (2.4, 2), (2.6, 4), (3.0, 4), (4.4, 4), (4.6, 4), (5.0, 4), (5.1, 6),
    (8.87, 8), (9.1, 10), (30.3, 30)])
def test_even_parts_are_the_nearest_even_count_of_parts_at_most_a_quarter_too_large(parts_of_target, expected):
    from rocketstore_spark.spark.ordered_plan import EVEN_SLACK, even_parts

    target = 1000
    run = int(parts_of_target * target)
    assert even_parts(run, target) == expected
    assert run <= EVEN_SLACK * target * expected
