"""A broker with the tiered-storage plugin (rocketmq-tieredstore 5.3.3, POSIX file backend) keeps history beyond
its local store; rocketstore reads that history, alone and together with the local store, as the broker serves it.

First the broker runs with ``tieredStorageLevel=FORCE``: every fetch is served from the tiered storage, so what a
consumer receives is the tiered history itself (tiered commit-log offsets included). Then the local store loses
its oldest commit-log file (as the broker's expiry deletes it) and the broker runs again with the default level
(``NOT_IN_DISK``): offsets the local store no longer holds come from the tiered storage, the others from either
(a pull batch starting in the tiered range is served from there), which the comparisons below allow for. The
store API, a Spark batch read and a Spark stream (AvailableNow, from earliest) read the same history.
"""

from pyspark.sql import functions as F

from rocketstore_spark.store import RocketStore
from tests.e2e.common import assert_row_is_received, assert_row_is_sent, by_index, sha256, spark_rows, store_rows

HISTORY, BULK = "history", "bulk"
TIERED = {"messageStorePlugIn": "org.apache.rocketmq.tieredstore.TieredMessageStore",
          "tieredBackendServiceProvider": "org.apache.rocketmq.tieredstore.provider.PosixFileSegment",
          "tieredStoreGroupCommitCount": 8, "tieredStoreGroupCommitTimeout": 1000,
          "tieredStoreCommitLogMaxSize": 16384, "tieredStoreConsumeQueueMaxSize": 400,
          "tieredStoreIndexFileMaxHashSlotNum": 64, "tieredStoreIndexFileMaxIndexNum": 256}


def history_rows(history, topic):
    rows = {}
    for queue_id in history.queue_ids(topic):
        for batch in history.read_queue(topic, queue_id):
            for row in batch.to_pylist():
                row["properties"] = dict(row["properties"] or {})
                key = (row["queueId"], row["queueOffset"])
                assert key not in rows, f"queue offset {key} read twice"
                rows[key] = row
    return rows


def by_queue_offset(lines):
    return {(line["queueId"], line["queueOffset"]): line for line in lines}


def test_tiered_history(broker_factory, harness, tmp_path, spark):
    store_dir, tiered = tmp_path / "store", tmp_path / "tiered"
    broker = broker_factory(store_dir, tieredStoreFilePath=tiered, tieredStorageLevel="FORCE", **TIERED)
    sent = {HISTORY: by_index(harness("trickle", HISTORY, 0, 260, 0)),
            BULK: by_index(harness("bulk", BULK, 0, 400, 3000))}  # 1.2 MB: two local commit-log files
    # served from the tiered storage only: the pulls end once the plugin uploaded everything
    served = {topic: by_queue_offset(harness("pull", f"tiered-{topic}", topic, len(sent[topic]), timeout=300))
              for topic in (HISTORY, BULK)}
    broker.stop()
    assert len(list(tiered.rglob("COMMIT_LOG/*"))) > 8, "the tiered commit logs did not roll into segments"

    # the tiered storage alone is what the broker served from it
    with RocketStore.open_history(tiered_path=tiered) as history:
        for topic in (HISTORY, BULK):
            rows = history_rows(history, topic)
            assert rows.keys() == served[topic].keys()
            for key, row in rows.items():
                assert_row_is_received(row, served[topic][key])
                assert_row_is_sent(row, sent[topic][row["properties"]["index"]])

    # the broker's expiry deletes the oldest commit-log file; its messages are left in the tiered storage only
    (store_dir / "commitlog" / "00000000000000000000").unlink()
    broker = broker_factory(store_dir, tieredStoreFilePath=tiered, **TIERED)
    merged = by_queue_offset(harness("pull", "merged-bulk", BULK, len(sent[BULK]), timeout=300))
    broker.stop()

    with RocketStore.open(store_dir) as local:
        local_rows = {(r["queueId"], r["queueOffset"]): r for r in store_rows(local, BULK).values()}
        local_first = {q: local.min_offset(BULK, q) for q in local.queue_ids(BULK)}
    assert 0 < min(local_first.values()) and len(local_rows) < len(sent[BULK])
    with RocketStore.open_history(store_dir, tiered_path=tiered) as history:
        rows = history_rows(history, BULK)
        ranges = {q: history.ranges(BULK, q) for q in history.queue_ids(BULK)}
    assert rows.keys() == merged.keys() == served[BULK].keys()
    for (queue_id, offset), row in rows.items():
        got = merged[(queue_id, offset)]
        assert ranges[queue_id].local == (local_first[queue_id], 100) and ranges[queue_id].tiered == (0, 100)
        if offset < local_first[queue_id]:
            assert_row_is_received(row, got)  # only the tiered storage holds it: the broker served it from there
            assert row["commitLogOffset"] == served[BULK][(queue_id, offset)]["commitLogOffset"]
        else:
            # the local store's row; the broker served the offset from one storage or the other
            local = local_rows[(queue_id, offset)]
            assert (row["commitLogOffset"], row["msgId"]) == (local["commitLogOffset"], local["msgId"])
            tiered_offset = served[BULK][(queue_id, offset)]["commitLogOffset"]
            assert got["commitLogOffset"] in (local["commitLogOffset"], tiered_offset)
            assert_row_is_received({**row, "commitLogOffset": got["commitLogOffset"]}, got)

    # Spark: the same history, and the tiered storage alone
    df = spark.read.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", BULK).load(
        str(store_dir))
    spark_history = {(r["queueId"], r["queueOffset"]): r for r in spark_rows(df).values()}
    assert spark_history.keys() == rows.keys()
    for key, row in rows.items():
        assert (spark_history[key]["commitLogOffset"], spark_history[key]["msgId"]) == (row["commitLogOffset"],
                                                                                        row["msgId"])
        assert sha256(spark_history[key]["body"]) == sha256(row["body"])
        assert spark_history[key]["brokerName"] == tmp_path.name  # the store directory's parent, as for any read
    # a stream from earliest starts in the tiered storage and goes on in the local store (AvailableNow)
    out, ckpt = tmp_path / "streamed", tmp_path / "checkpoint"
    query = (spark.readStream.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", BULK)
             .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 150).load(str(store_dir))
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    streamed = {(r["queueId"], r["queueOffset"]): r for r in spark.read.parquet(str(out)).collect()}
    assert streamed.keys() == rows.keys() and len(query.recentProgress) > 1
    for key, row in rows.items():
        assert (streamed[key]["commitLogOffset"], streamed[key]["msgId"], streamed[key]["uniqKey"]) == \
            (row["commitLogOffset"], row["msgId"], row["uniqKey"])
    alone = spark.read.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", HISTORY).load()
    assert alone.select(F.min("queueOffset"), F.count("*")).first()[:] == (0, len(sent[HISTORY]))
    tiered_alone = {(r["queueId"], r["queueOffset"]): r for r in spark_rows(alone).values()}
    for key, got in served[HISTORY].items():
        assert tiered_alone[key]["commitLogOffset"] == got["commitLogOffset"]
        assert tiered_alone[key]["uniqKey"] == got["msgId"]
        assert tiered_alone[key]["brokerName"] == "broker-e2e"
