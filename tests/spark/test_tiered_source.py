"""``tieredStorePath``: a real 5.3.3 broker's tiered storage (``tests/store/files/data/tiered-broker-5.3.3``) read
by Spark alone, and the options such a read refuses at ``load()``."""

import json
from pathlib import Path

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.filters import PUSHDOWN_SUPPORTED
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import plan
from rocketstore_spark.spark.planning_types import Pushed
from rocketstore_spark.spark.source import RocketStoreDataSource
from rocketstore_spark.store import RocketStore

pytestmark = pytest.mark.spark

DATA = Path(__file__).parents[1] / "store" / "files" / "data" / "tiered-broker-5.3.3"
SEGMENTS = str(DATA / "segments")


def test_the_tiered_storage_alone_is_what_the_broker_served(spark):
    got = {g["queueOffset"]: g for g in map(json.loads, (DATA / "received.jsonl").read_text().splitlines())}
    df = spark.read.format("rocketstore").option("tieredStorePath", SEGMENTS).load()
    rows = {r["queueOffset"]: r for r in df.collect()}
    assert rows.keys() == got.keys()
    for offset, row in rows.items():
        assert (row["brokerName"], row["topic"], row["queueId"]) == ("broker-e2e", "history", 0)
        assert row["commitLogOffset"] == got[offset]["commitLogOffset"] and row["uniqKey"] == got[offset]["msgId"]
        assert row["tags"] == got[offset]["tags"] and bytes(row["body"]).startswith(b"message-")


def test_offsets_filters_and_partitions(spark):
    df = (spark.read.format("rocketstore").option("tieredStorePath", SEGMENTS).option("maxMessagesPerPartition", 10)
          .option("startingOffsets", '{"history": {"0": 5}}').option("endingOffsets", '{"history": {"0": 30}}')
          .load())
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r["queueOffset"] for r in df.collect()) == list(range(5, 30))
    tagged = spark.read.format("rocketstore").option("tieredStorePath", SEGMENTS).option("tags", "tag1").load()
    assert {r["tags"] for r in tagged.collect()} == {"tag1"}
    got = {g["queueOffset"]: g["tags"] for g in map(json.loads, (DATA / "received.jsonl").read_text().splitlines())}
    assert sorted(r["queueOffset"] for r in tagged.where("queueOffset >= 40").collect()) == \
        [o for o, tags in sorted(got.items()) if o >= 40 and tags == "tag1"]


@pytest.mark.parametrize("options, message", [
    ({"tieredStorePath": "/nonexistent/tiered"}, "expected a directory"),
    ({"tieredStorePath": "s3://bucket/tiered"}, "must be a local directory"),
    ({"tieredStorePath": SEGMENTS, "startingGroup": "g"}, "startingGroup reads the group's committed offsets"),
    ({"tieredStorePath": SEGMENTS, "scanMode": "raw"}, "scanMode=raw"),
    ({"tieredStorePath": SEGMENTS, "table": "consumerOffsets"}, "table=consumerOffsets"),
])
def test_options_refused_at_load(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_read_options(options)


def test_a_stream_needs_the_local_store():
    source = RocketStoreDataSource({"tieredStorePath": SEGMENTS})
    source.schema()  # load() accepts it (the options are shared)
    with pytest.raises(InvalidArgumentError, match="follows a local store's queue tails"):
        source.streamReader(source.schema())


def test_a_uniq_key_filter_reads_only_what_the_tiered_index_finds(spark):
    got = [json.loads(line) for line in (DATA / "received.jsonl").read_text().splitlines()]
    wanted = got[17]
    df = spark.read.format("rocketstore").option("tieredStorePath", SEGMENTS).load()
    found = df.where(df.uniqKey == wanted["msgId"])
    if PUSHDOWN_SUPPORTED:
        assert found.rdd.getNumPartitions() == 1  # the one offset the index names, not the queue
    assert [(r["queueOffset"], r["commitLogOffset"]) for r in found.collect()] == \
        [(wanted["queueOffset"], wanted["commitLogOffset"])]
    assert df.where(df.uniqKey == "no-such-key").count() == 0


def test_time_options_start_and_end_where_the_store_times_say():
    with RocketStore.open_history(tiered_path=SEGMENTS) as history:
        times = [t for b in history.read_queue("history", 0, columns=["storeTimestamp"])
                 for t in b.column(0).cast("int64").to_pylist()]
        start, end = history.offset_by_time("history", 0, times[10]), history.offset_by_time("history", 0, times[40])
        assert history.offset_by_time("history", 0, times[0] - 1) == 0
        assert history.offset_by_time("history", 0, times[-1] + 1) == len(times)
        assert history.offset_by_time("history", 0, times[40], "upper") >= end
    # the first offset stored at or after each time
    assert times[start] >= times[10] and (start == 0 or times[start - 1] < times[10]) and start <= 10
    assert times[end] >= times[40] and times[end - 1] < times[40] and end <= 40
    opts = parse_read_options({"tieredStorePath": SEGMENTS,
                               "startingOffsetsByTimestamp": json.dumps({"history": {"0": times[10]}}),
                               "endingOffsetsByTimestamp": json.dumps({"history": {"0": times[40]}})})
    parts = plan(opts, Pushed())
    assert [(p.start, p.end) for p in parts] == [(start, end)]
    opts = parse_read_options({"tieredStorePath": SEGMENTS, "startingTimestamp": str(times[10])})
    assert [(p.start, p.end) for p in plan(opts, Pushed())] == [(start, len(times))]


def test_a_directory_without_segments(tmp_path):
    with pytest.raises(InvalidArgumentError, match="one cluster directory"):
        parse_read_options({"tieredStorePath": str(tmp_path)})
