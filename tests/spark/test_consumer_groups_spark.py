"""Consumer groups in Spark: ``option("table", "consumerOffsets")`` and ``startingGroup`` (batch and streaming),
on a store holding the consumer offsets a real RocketMQ 5.3.3 broker wrote (see
tests/store/files/test_consumer_offsets.py; the end-to-end test checks the same against a running broker)."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.source import RocketStoreDataSource
from rocketstore_spark.store import RocketStore
from tests.store.files.test_consumer_offsets import ADMIN, config_store

pytestmark = pytest.mark.spark


def test_consumer_offsets_table(spark, tmp_path):
    root = config_store(tmp_path)
    df = spark.read.format("rocketstore").option("table", "consumerOffsets").load(str(root))
    assert df.columns[:4] == ["brokerName", "group", "topic", "queueId"]
    got = {(r.group, r.queueId): (r.committedOffset, r.maxOffset, r.lag)
           for r in df.where("topic = 'orders'").collect()}
    assert got == {(o["group"], o["queueId"]): (o["consumerOffset"], o["brokerOffset"],
                                               o["brokerOffset"] - o["consumerOffset"]) for o in ADMIN}
    with RocketStore.open(root) as store:
        api = {(r["group"], r["topic"], r["queueId"]): r["nextMessageStoreTime"] for r in store.consumer_offsets()}
    for r in df.collect():
        t = r.nextMessageStoreTime
        assert api[(r.group, r.topic, r.queueId)] == (None if t is None else round(t.timestamp() * 1000))


def test_starting_group_batch_and_stream(spark, tmp_path):
    root = config_store(tmp_path)
    committed = {o["queueId"]: o["consumerOffset"] for o in ADMIN if o["group"] == "g-pull"}
    df = spark.read.format("rocketstore").option("topics", "orders").option("startingGroup", "g-pull").load(str(root))
    rows = df.select("queueId", "queueOffset").collect()
    ends = {o["queueId"]: o["brokerOffset"] for o in ADMIN if o["group"] == "g-pull"}
    assert sorted((r.queueId, r.queueOffset) for r in rows) == \
           sorted((q, off) for q in ends for off in range(committed[q], ends[q]))
    # a group that consumed everything: nothing left to read
    assert spark.read.format("rocketstore").option("startingGroup", "g-push").load(str(root)).count() == 0

    query = (spark.readStream.format("rocketstore").option("topics", "orders").option("startingGroup", "g-pull")
             .load(str(root)).select("queueId", "queueOffset")
             .writeStream.format("memory").queryName("from_group").trigger(availableNow=True).start())
    query.awaitTermination(180)
    streamed = spark.sql("select queueId, queueOffset from from_group").collect()
    assert sorted((r.queueId, r.queueOffset) for r in streamed) == sorted((r.queueId, r.queueOffset) for r in rows)


def test_group_option_errors(spark, tmp_path):
    root = config_store(tmp_path)
    with pytest.raises(InvalidArgumentError, match="'g-pul'.*did you mean 'g-pull'"):
        parse_read_options({"path": str(root), "startingGroup": "g-pul"})
    with pytest.raises(InvalidArgumentError, match="either startingGroup or startingOffsets"):
        parse_read_options({"path": str(root), "startingGroup": "g-pull", "startingOffsets": "earliest"})
    with pytest.raises(InvalidArgumentError, match="table must be one of messages, consumerOffsets"):
        parse_read_options({"path": str(root), "table": "groups"})
    source = RocketStoreDataSource({"path": str(root), "table": "consumerOffsets"})
    with pytest.raises(InvalidArgumentError, match="batch table"):
        source.streamReader(None)
