"""Streaming extras: ``maxBytesPerTrigger``, the source's lag in the query's progress (``reportLatestOffset``) and
per-queue starting times (``startingOffsetsByTimestamp``, batch and streaming). Expected values come from the real
store's manifest (public-a: record sizes, store times, queue offsets), not from the code under test."""

import json
from collections import defaultdict

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.stream_reader import RocketStoreStreamReader
from rocketstore_spark.store import RocketStore

try:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows
except ImportError:  # pragma: no cover - Spark < 4.2
    ReadAllAvailable = ReadMaxBytes = ReadMaxRows = None

TOPIC = "TopicTest"
needs_limits = pytest.mark.skipif(ReadMaxBytes is None, reason="Spark < 4.2 passes no read limits")


def stream_reader(path, **options):
    given = {"path": str(path), "topics": TOPIC, "startingOffsets": "earliest", **options}
    opts = parse_read_options({k: v for k, v in given.items() if v is not None}, stream=True)
    return RocketStoreStreamReader(opts, ("topic", "queueId", "queueOffset"))


def sizes_by_queue(dispatched):
    """queue id → {queue offset: record size} of the topic's dispatched records."""
    out = defaultdict(dict)
    for (topic, qid), records in dispatched.items():
        if topic == TOPIC:
            for m in records:
                out[qid][m["cqOffset"]] = m["storeSize"]
    return out


def batch_bytes(sizes, start, end):
    """Per queue: (messages, bytes) of a batch from the manifest."""
    out = {}
    for qid, first in start.items():
        last = end[qid]
        out[int(qid)] = (last - first, sum(sizes[int(qid)][o] for o in range(first, last)))
    return out


@needs_limits
def test_max_bytes_per_trigger_bounds_each_batch_and_reads_everything(golden_store_path, dispatched):
    sizes = sizes_by_queue(dispatched)
    biggest = max(s for q in sizes.values() for s in q.values())
    budget = 20_000
    reader = stream_reader(golden_store_path, maxBytesPerTrigger=str(budget))
    assert reader.getDefaultReadLimit() == ReadMaxBytes(budget)
    start = reader.initialOffset()
    broker = next(iter(start))
    read = defaultdict(int)
    batches = 0
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start:
            break
        per_queue = batch_bytes(sizes, start[broker][TOPIC], end[broker][TOPIC])
        moved = {q: v for q, v in per_queue.items() if v[0]}
        # the bound holds, but every queue with a backlog moves by at least one message (a soft bound)
        assert sum(b for _, b in moved.values()) <= budget + len(moved) * biggest
        assert sum(b for n, b in moved.values() if n > 1) <= budget
        for q, (n, _) in per_queue.items():
            read[q] += n
        start, batches = end, batches + 1
    assert batches >= sum(sum(q.values()) for q in sizes.values()) // (budget + len(sizes) * biggest)
    assert dict(read) == {q: len(v) for q, v in sizes.items()}  # every message once, none skipped


@needs_limits
def test_both_bounds_hold_and_all_available_ignores_them(golden_store_path, dispatched):
    sizes = sizes_by_queue(dispatched)
    reader = stream_reader(golden_store_path, maxBytesPerTrigger="50000", maxMessagesPerTrigger="40")
    assert reader.getDefaultReadLimit() == ReadMaxRows(40)  # the engine's row limit; bytes apply alongside
    start = reader.initialOffset()
    broker = next(iter(start))
    end = reader.latestOffset(start, ReadMaxRows(40))
    per_queue = batch_bytes(sizes, start[broker][TOPIC], end[broker][TOPIC])
    assert sum(n for n, _ in per_queue.values()) <= 40
    # ReadAllAvailable (Trigger.Once, or the engine's own choice) reads everything there is
    everything = reader.latestOffset(start, ReadAllAvailable())
    assert {int(q): o for q, o in everything[broker][TOPIC].items()} == \
           {q: max(v) + 1 for q, v in sizes.items()}


@needs_limits
def test_reported_latest_offset_says_how_far_behind(golden_store_path, dispatched):
    sizes = sizes_by_queue(dispatched)
    reader = stream_reader(golden_store_path, maxMessagesPerTrigger="25")
    assert reader.reportLatestOffset() is None  # nothing seen yet
    start = reader.initialOffset()
    broker = next(iter(start))
    end = reader.latestOffset(start, ReadMaxRows(25))
    report = reader.reportLatestOffset()
    latest = {q: max(v) + 1 for q, v in sizes.items()}
    assert {int(q): o for q, o in report["latestOffsets"][broker][TOPIC].items()} == latest
    done = {int(q): o for q, o in end[broker][TOPIC].items()}
    assert report["messagesBehind"] == sum(latest[q] - done[q] for q in latest)
    assert report["queuesBehind"] == sum(1 for q in latest if latest[q] > done[q])
    assert report["bytesBehind"] == sum(sizes[q][o] for q in latest for o in range(done[q], latest[q]))
    assert report["bytesBehindEstimated"] is False
    json.dumps(report)  # Spark serialises it into the progress as JSON


def first_at_or_after(records, at):
    """The queue offset of the first record of a queue stored at or after ``at`` (its max offset if none)."""
    for m in records:
        if m["storeTimestamp"] >= at:
            return m["cqOffset"]
    return records[-1]["cqOffset"] + 1


def per_queue_times(dispatched):
    """A start time per queue of the topic: a different record's store time in each."""
    queues = sorted(q for t, q in dispatched if t == TOPIC)
    times = {}
    for i, qid in enumerate(queues):
        records = dispatched[(TOPIC, qid)]
        times[qid] = records[(i * 7) % len(records)]["storeTimestamp"]
    return times


def test_starting_offsets_by_timestamp_in_a_stream(golden_store_path, dispatched):
    times = per_queue_times(dispatched)
    some = dict(list(times.items())[:-1])  # the last queue is not named: a stream starts it at latest
    reader = stream_reader(golden_store_path, startingOffsets=None,
                           startingOffsetsByTimestamp=json.dumps({TOPIC: {str(q): t for q, t in some.items()}}))
    start = reader.initialOffset()
    broker = next(iter(start))
    got = {int(q): o for q, o in start[broker][TOPIC].items()}
    for qid, at in some.items():
        assert got[qid] == first_at_or_after(dispatched[(TOPIC, qid)], at)
    unnamed = (set(times) - set(some)).pop()
    assert got[unnamed] == dispatched[(TOPIC, unnamed)][-1]["cqOffset"] + 1


def test_starting_and_ending_offsets_by_timestamp_in_a_batch_read(spark, golden_store_path, dispatched):
    times = per_queue_times(dispatched)
    queues = sorted(times)
    ends = {q: dispatched[(TOPIC, q)][-3]["storeTimestamp"] for q in queues[:2]}
    df = (spark.read.format("rocketstore").option("topics", TOPIC)
          .option("startingOffsetsByTimestamp", json.dumps({TOPIC: {str(q): t for q, t in times.items()}}))
          .option("endingOffsetsByTimestamp", json.dumps({TOPIC: {str(q): t for q, t in ends.items()}}))
          .load(str(golden_store_path)))
    got = defaultdict(set)
    for r in df.select("queueId", "queueOffset").collect():
        got[r.queueId].add(r.queueOffset)
    for qid in queues:
        records = dispatched[(TOPIC, qid)]
        lo = first_at_or_after(records, times[qid])
        hi = first_at_or_after(records, ends[qid]) if qid in ends else records[-1]["cqOffset"] + 1
        assert got.get(qid, set()) == set(range(lo, hi)), qid


@pytest.mark.parametrize("options, message", [
    ({"startingOffsetsByTimestamp": '{"TopicTest": {"0": 1}}', "startingTimestamp": "5"},
     "either startingOffsetsByTimestamp or startingTimestamp"),
    ({"endingOffsetsByTimestamp": '{"TopicTest": {"0": 1}}', "endingOffsets": "latest"},
     "either endingOffsetsByTimestamp or endingOffsets"),
    ({"startingOffsetsByTimestamp": '{"TopicTest": {"x": 1}}'}, "queue ids must be numbers"),
    ({"startingOffsetsByTimestamp": '{"TopicTest": {"0": true}}'}, "epoch milliseconds or ISO 8601"),
    ({"startingOffsetsByTimestamp": '{"TopicTest": {"0": "yesterday"}}'}, "ISO 8601"),
    ({"startingOffsetsByTimestamp": "{TopicTest"}, "not JSON"),
    ({"maxBytesPerTrigger": "0"}, "maxBytesPerTrigger must be >= 1"),
])
def test_options_are_checked_at_load(options, message, golden_store_path):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_read_options({"path": str(golden_store_path), **options}, stream=True)


def test_unknown_queue_in_timestamps_names_the_queues(spark, golden_store_path):
    with RocketStore.open(golden_store_path) as store:
        queues = store.queue_ids(TOPIC)
    bad = json.dumps({TOPIC: {str(max(queues) + 1): 0}})
    with pytest.raises(Exception, match=f"startingOffsetsByTimestamp: topic 'TopicTest' of .* has no queue "
                                        f"{max(queues) + 1}"):
        spark.read.format("rocketstore").option("startingOffsetsByTimestamp", bad) \
            .load(str(golden_store_path)).count()


@needs_limits
def test_a_query_with_max_bytes_reports_its_lag(spark, golden_store_path, tmp_path, dispatched):
    sizes = sizes_by_queue(dispatched)
    total = sum(len(v) for v in sizes.values())
    q = (spark.readStream.format("rocketstore").option("topics", TOPIC).option("startingOffsets", "earliest")
         .option("maxBytesPerTrigger", "1500000").load(str(golden_store_path))
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    assert sum(p["numInputRows"] for p in progress) == total and len(progress) > 1
    reported = [json.loads(p["sources"][0]["latestOffset"]) for p in progress]
    assert reported[0]["messagesBehind"] == total - progress[0]["numInputRows"]
    assert reported[-1]["messagesBehind"] == 0 and reported[-1]["bytesBehind"] == 0
