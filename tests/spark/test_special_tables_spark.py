"""The special topics' tables in Spark (``option("table", "pendingTransactions" / "timerMessages")``) on a store a
real RocketMQ 5.3.3 broker wrote (see tests/store/read/test_special_topics.py; the end-to-end test checks the same
against a running broker)."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.source import RocketStoreDataSource
from rocketstore_spark.store import (
    COMPACTED_FIELDS,
    MESSAGE_TRACE_FIELDS,
    PENDING_TRANSACTION_FIELDS,
    TIMER_MESSAGE_FIELDS,
    RocketStore,
)
from tests.store.read.test_special_topics import unpack

pytestmark = pytest.mark.spark


def test_pending_transactions_table(spark, tmp_path):
    root, _ = unpack(tmp_path, "special-topics-broker-5.3.3")
    df = spark.read.format("rocketstore").option("table", "pendingTransactions").load(str(root))
    assert df.columns == ["brokerName", *PENDING_TRANSACTION_FIELDS]
    with RocketStore.open(root) as store:
        api = store.pending_transactions()
    rows = df.collect()
    assert len(rows) == len(api) == 3
    for r, a in zip(sorted(rows, key=lambda r: r.halfOffset), api):
        assert (r.transactionId, r.topic, r.queueId, r.producerGroup, r.checkTimes, r.halfOffset) == \
               (a["transactionId"], a["topic"], a["queueId"], a["producerGroup"], a["checkTimes"], a["halfOffset"])
        assert round(r.bornTimestamp.timestamp() * 1000) == a["bornTimestamp"]
        assert bytes(r.body) == a["body"] and dict(r.properties) == a["properties"]
    assert (spark.read.format("rocketstore").option("table", "pendingTransactions").option("topics", "other")
            .load(str(root)).count()) == 0


def test_timer_messages_table(spark, tmp_path):
    root, _ = unpack(tmp_path, "special-topics-broker-5.3.3")
    df = spark.read.format("rocketstore").option("table", "timerMessages").option("topics", "timed").load(str(root))
    assert df.columns == ["brokerName", *TIMER_MESSAGE_FIELDS]
    with RocketStore.open(root) as store:
        api = {(r["uniqKey"], r["timerQueueOffset"]): r for r in store.timer_messages()}
    rows = df.collect()
    assert len(rows) == len(api) == 20
    for r in rows:
        a = api[(r.uniqKey, r.timerQueueOffset)]
        assert (r.state, r.rollTimes, r.queueId) == (a["state"], a["rollTimes"], a["queueId"])
        assert round(r.deliverTime.timestamp() * 1000) == a["deliverTime"]
    assert {r.state for r in df.groupBy("state").count().collect()} == {"delivered", "rolled", "pending"}


def test_the_tables_are_batch_only(tmp_path):
    root, _ = unpack(tmp_path, "special-topics-broker-5.3.3")
    for table in ("pendingTransactions", "timerMessages", "messageTraces", "compactedValues"):
        source = RocketStoreDataSource({"path": str(root), "table": table})
        with pytest.raises(InvalidArgumentError, match=f"table={table} is a batch table"):
            source.streamReader(None)


def test_message_traces_table(spark, tmp_path):
    root, _ = unpack(tmp_path, "traces-broker-5.3.3")
    df = spark.read.format("rocketstore").option("table", "messageTraces").load(str(root))
    assert df.columns == ["brokerName", *MESSAGE_TRACE_FIELDS]
    with RocketStore.open(root) as store:
        api = store.message_traces()
    rows = df.collect()
    assert len(rows) == len(api) == 18
    for r, a in zip(sorted(rows, key=lambda r: (r.traceQueueOffset, r.traceType, r.msgId)),
                    sorted(api, key=lambda a: (a["traceQueueOffset"], a["traceType"], a["msgId"]))):
        assert (r.traceType, r.msgId, r.groupName, r.costTime, r.success, r.keys) == \
               (a["traceType"], a["msgId"], a["groupName"], a["costTime"], a["success"], a["keys"])
        assert (None if r.timestamp is None else round(r.timestamp.timestamp() * 1000)) == a["timestamp"]
    # topics keeps the producers' records of the topic and the consumers' records of their messages
    assert (spark.read.format("rocketstore").option("table", "messageTraces").option("topics", "traced-orders")
            .load(str(root)).count()) == 18
    assert (spark.read.format("rocketstore").option("table", "messageTraces").option("topics", "other")
            .load(str(root)).count()) == 0
    assert (spark.read.format("rocketstore").option("table", "messageTraces").option("traceTopic", "traced-orders")
            .load(str(root)).count()) == 0  # a topic of plain messages holds no trace record


def test_trace_topic_belongs_to_the_trace_table(tmp_path):
    root, _ = unpack(tmp_path, "traces-broker-5.3.3")
    with pytest.raises(InvalidArgumentError, match="traceTopic names the clients' trace topic of table messageTraces"):
        parse_read_options({"path": str(root), "traceTopic": "MY_TRACES"})
    assert parse_read_options({"path": str(root), "table": "messageTraces"}).trace_topic == "RMQ_SYS_TRACE_TOPIC"
    assert parse_read_options({"path": str(root), "table": "messageTraces",
                               "traceTopic": "MY_TRACES"}).trace_topic == "MY_TRACES"


def test_compacted_values_table(spark, tmp_path):
    root, _ = unpack(tmp_path, "compaction-broker-5.3.3")
    df = spark.read.format("rocketstore").option("table", "compactedValues").load(str(root))
    assert df.columns == ["brokerName", *COMPACTED_FIELDS]
    with RocketStore.open(root) as store:
        api = store.compacted_values()
    assert sorted((r.queueId, r.key, r.queueOffset, bytes(r.body), r.versions) for r in df.collect()) == \
           sorted((a["queueId"], a["key"], a["queueOffset"], a["body"], a["versions"]) for a in api)
    assert (spark.read.format("rocketstore").option("table", "compactedValues").option("topics", "other")
            .load(str(root)).count()) == 0
