"""rocketstore writes, a real broker serves: a store written by the Spark sink is opened by Apache RocketMQ 5.3.3's
broker, whose push and lite-pull consumers receive every message (body, keys, tags, properties, queue offset),
whose queryMessage finds them by key and by message id, and whose committed consumer offsets end where the
consumers stopped."""

from pyspark.sql import functions as F

from rocketstore_spark.store import RocketStore
from tests.e2e.common import by_index, sha256, store_rows
from tests.e2e.services import SINK_SIZE_OPTIONS

TOPIC = "sunk"
MESSAGES = 300


def test_sink_store_served_by_broker(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, launch=False)  # its address goes into the messages' offsetMsgIds
    df = spark.range(0, MESSAGES, numPartitions=3).select(
        F.lit(TOPIC).alias("topic"),
        F.concat(F.lit("sink-"), F.col("id").cast("string"),
                 F.expr("repeat('abc', CASE WHEN id % 50 = 0 THEN 3000 ELSE cast(id % 40 AS int) END)"))
        .cast("binary").alias("body"),
        F.array(F.concat(F.lit("sk-"), F.col("id").cast("string")), F.lit("every")).alias("keys"),
        F.concat(F.lit("t"), (F.col("id") % 3).cast("string")).alias("tags"),
        F.create_map(F.lit("index"), F.col("id").cast("string"), F.lit("origin"), F.lit("spark")).alias("properties"))
    writer = df.write.format("rocketstore").mode("append").option("storeHost", broker.addr) \
        .option("compressBody", "zlib")
    for k, v in SINK_SIZE_OPTIONS.items():
        writer = writer.option(k, v)
    writer.save(str(store_dir))
    source = {str(r["id"]): r for r in spark.range(0, MESSAGES).collect()}
    with RocketStore.open(store_dir) as store:
        written = store_rows(store, TOPIC)
        ends = {q: store.max_offset(TOPIC, q) for q in store.queue_ids(TOPIC)}
    assert written.keys() == source.keys() and sum(ends.values()) == MESSAGES

    broker.launch()
    push = by_index(harness("push", "sink-push", TOPIC, MESSAGES))
    pull = by_index(harness("pull", "sink-pull", TOPIC, MESSAGES))
    for received in (push, pull):
        assert received.keys() == written.keys()
        for index, got in received.items():
            row = written[index]
            assert (got["topic"], got["queueId"], got["queueOffset"], got["commitLogOffset"]) == \
                   (TOPIC, row["queueId"], row["queueOffset"], row["commitLogOffset"])
            assert got["bodySha256"] == sha256(row["body"]) and row["body"].startswith(f"sink-{index}".encode())
            assert got["keys"] == [f"sk-{index}", "every"] and got["tags"] == f"t{int(index) % 3}"
            assert {k: got["properties"].get(k) for k in ("index", "origin")} == {"index": index, "origin": "spark"}
            assert got["msgId"] == row["uniqKey"]
    # the consumers' committed offsets are the queues' ends
    for group in ("sink-push", "sink-pull"):
        offsets = {line["queueId"]: line for line in harness("offsets", group) if line["topic"] == TOPIC}
        assert {q: (o["consumerOffset"], o["brokerOffset"]) for q, o in offsets.items()} == \
               {q: (end, end) for q, end in ends.items()}, group
    # queryMessage by key and viewMessage by the offsetMsgId rocketstore wrote
    found = harness("by-key", TOPIC, "sk-150")
    assert [(m["queueId"], m["queueOffset"]) for m in found] == [(written["150"]["queueId"],
                                                                  written["150"]["queueOffset"])]
    assert found[0]["bodySha256"] == sha256(written["150"]["body"])
    for index in ("0", "77", "299"):
        (viewed,) = harness("by-id", TOPIC, written[index]["msgId"])
        assert viewed["commitLogOffset"] == written[index]["commitLogOffset"]
        assert viewed["bodySha256"] == sha256(written[index]["body"])
    broker.stop()
    with RocketStore.open(store_dir) as store:  # the broker's stop leaves a store rocketstore still reads
        assert store_rows(store, TOPIC).keys() == written.keys()
