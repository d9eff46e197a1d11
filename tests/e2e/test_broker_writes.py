"""A real broker writes, rocketstore reads: Apache RocketMQ 5.3.3's broker stores what its Java client sends
(plain, keyed, tagged, with user properties; large bodies the client compresses; a batch; a delayed message;
committed and rolled-back transactions); once it is stopped, the store API and a Spark read return exactly what
the client sent and what real consumers received."""

from pyspark.sql import functions as F

from rocketstore_spark.store import RocketStore
from tests.e2e.common import assert_row_is_received, assert_row_is_sent, by_index, same_rows, spark_rows, store_rows

TOPIC = "orders"


def test_broker_store_reads_as_sent_and_received(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir)
    sent = harness("produce", TOPIC, 40)
    kinds = {s["kind"] for s in sent}
    assert kinds == {"plain", "large", "batch", "delayed", "tx-commit", "tx-rollback"}
    delivered = by_index([s for s in sent if s["kind"] != "tx-rollback"])
    rolled_back = {s["properties"]["index"] for s in sent if s["kind"] == "tx-rollback"}

    push = by_index(harness("push", "e2e-push", TOPIC, len(delivered)))
    pull = by_index(harness("pull", "e2e-pull", TOPIC, len(delivered)))
    assert push.keys() == pull.keys() == delivered.keys()
    for uniq, got in push.items():
        assert {k: pull[uniq][k] for k in ("queueId", "queueOffset", "bodySha256")} == \
               {k: got[k] for k in ("queueId", "queueOffset", "bodySha256")}
    by_key = harness("by-key", TOPIC, "key-3")
    offset_id = next(s["offsetMsgId"] for s in sent if s["kind"] == "large")
    by_id = harness("by-id", TOPIC, offset_id)
    broker.stop()

    with RocketStore.open(store_dir) as store:
        assert store.recovery.mode == "normal"
        rows = store_rows(store, TOPIC)
        assert rows.keys() == delivered.keys() and not rolled_back & rows.keys()
        for uniq, row in rows.items():
            assert_row_is_sent(row, delivered[uniq])
            assert_row_is_received(row, push[uniq])
            if delivered[uniq]["kind"] in ("plain", "large", "batch"):  # sent straight to their queue
                assert (row["queueId"], row["queueOffset"], row["msgId"]) == (
                    delivered[uniq]["queueId"], delivered[uniq]["queueOffset"], delivered[uniq]["offsetMsgId"])
        # compressed on the wire and in the store, whole again when read
        large = [r for u, r in rows.items() if delivered[u]["kind"] == "large"]
        assert all(r["sysFlag"] & 1 for r in large) and max(len(r["body"]) for r in large) == 300_000
        # queryMessage and viewMessage: the broker's answers are the store API's
        keyed = store.query_by_key(TOPIC, "key-3").to_pylist()
        assert sorted(r["commitLogOffset"] for r in keyed) == sorted(m["commitLogOffset"] for m in by_key) != []
        looked = store.look_message_by_msg_id(offset_id)
        assert looked["uniqKey"] == by_id[0]["msgId"] and looked["commitLogOffset"] == by_id[0]["commitLogOffset"]

    df = spark.read.format("rocketstore").load(str(store_dir)).where(F.col("topic") == TOPIC)
    same_rows(spark_rows(df), rows)
