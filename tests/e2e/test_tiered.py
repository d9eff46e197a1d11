"""A broker with the tiered-storage plugin (rocketmq-tieredstore 5.3.3, POSIX file backend) keeps history beyond
its local store; rocketstore reads that history, alone and together with the local store, as the broker serves it.

First the broker runs with ``tieredStorageLevel=FORCE``: every fetch is served from the tiered storage, so what a
consumer receives is the tiered history itself (tiered commit-log offsets included). Then the local store loses
its oldest commit-log file (as the broker's expiry deletes it) and the broker runs again with the default level
(``NOT_IN_DISK``): offsets the local store no longer holds come from the tiered storage, the others from either
(a pull batch starting in the tiered range is served from there), which the comparisons below allow for. The
store API, a Spark batch read and a Spark stream (AvailableNow, from earliest) read the same history.
"""

import json
import time

import pyarrow as pa
from pyspark.sql import functions as F

from rocketstore_spark.store import RocketStore
from tests.e2e.common import assert_row_is_received, assert_row_is_sent, by_index, sha256, spark_rows, store_rows

HISTORY, BULK = "history", "bulk"
HISTORY_KEYS = ("key-7", "key-250", "k3")  # KEYS tokens: "key-<index>" and "k<index % 5>"
BULK_KEYS = ("key-5", "key-390", "k1")
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


def answer_in_full(harness, topic, key, sent, attempts=6):
    """The broker's queryMessage answer once it finds every message sent with ``key``: the broker indexes a
    message after uploading it, and a query meeting an index file while it is compacted and uploaded finds only
    part of it, so an answer taken too early may be short."""
    wanted = sum(key in line["keys"] for line in sent.values())
    for _ in range(attempts):
        lines = harness("by-key", topic, key)
        if len(lines) >= wanted:
            break
        time.sleep(10)
    return lines


def assert_query_answers(table, lines):
    """``query_by_key``'s rows are the messages the broker's queryMessage answered, each as the client got it."""
    rows = by_queue_offset(table.to_pylist())
    assert len(rows) == table.num_rows and rows.keys() == by_queue_offset(lines).keys()
    for key, got in by_queue_offset(lines).items():
        assert_row_is_received({**rows[key], "properties": dict(rows[key]["properties"] or {})}, got)


def test_tiered_history(broker_factory, harness, tmp_path, spark):
    store_dir, tiered = tmp_path / "store", tmp_path / "tiered"
    broker = broker_factory(store_dir, tieredStoreFilePath=tiered, tieredStorageLevel="FORCE", **TIERED)
    sent = {HISTORY: by_index(harness("trickle", HISTORY, 0, 260, 0)),
            BULK: by_index(harness("bulk", BULK, 0, 400, 3000))}  # 1.2 MB: two local commit-log files
    # served from the tiered storage only: the pulls end once the plugin uploaded everything
    served = {topic: by_queue_offset(harness("pull", f"tiered-{topic}", topic, len(sent[topic]), timeout=300))
              for topic in (HISTORY, BULK)}
    # a group that stopped early: its committed offsets will lie in the tiered range once the local file is gone
    harness("pull", "partial-bulk", BULK, 40)
    committed = {line["queueId"]: line["consumerOffset"] for line in harness("offsets", "partial-bulk")
                 if line["topic"] == BULK}
    # queryMessage by key (FORCE: the broker answers from the tiered index alone; the keys are the same in both
    # topics, the index tells them apart)
    answered = {key: answer_in_full(harness, HISTORY, key, sent[HISTORY]) for key in HISTORY_KEYS}
    broker.stop()
    assert len(list(tiered.rglob("COMMIT_LOG/*"))) > 8, "the tiered commit logs did not roll into segments"
    assert len(list(tiered.rglob("rmq_sys_INDEX/0/INDEX/*"))) > 1, "the tiered index did not roll into segments"
    with open(tmp_path / "by-key.jsonl", "w") as out:  # kept with the captured segments (unit tests)
        for key, lines in answered.items():
            out.writelines(json.dumps({"key": key, **line}) + "\n" for line in lines)
    with open(tmp_path / "received.jsonl", "w") as out:  # the same: what the consumer received of history/0
        out.writelines(json.dumps(line) + "\n" for (q, _), line in sorted(served[HISTORY].items()) if q == 0)
    assert [len(answered[k]) for k in HISTORY_KEYS] == [1, 1, 52]
    with RocketStore.open_history(tiered_path=tiered) as history:
        for key, lines in answered.items():
            assert_query_answers(history.query_by_key(HISTORY, key), lines)
        assert history.query_by_key(HISTORY, "no-such-key").num_rows == 0

    # the tiered storage alone is what the broker served from it
    with RocketStore.open_history(tiered_path=tiered) as history:
        for topic in (HISTORY, BULK):
            rows = history_rows(history, topic)
            assert rows.keys() == served[topic].keys()
            for key, row in rows.items():
                assert_row_is_received(row, served[topic][key])
                assert_row_is_sent(row, sent[topic][row["properties"]["index"]])

    # store times to ask the broker's searchOffset about: queue 0 of bulk, all over its history and past both ends
    with RocketStore.open_history(tiered_path=tiered) as history:
        times = [t for b in history.read_queue(BULK, 0, columns=["storeTimestamp"])
                 for t in b.column(0).cast(pa.int64()).to_pylist()]
    probes = sorted({times[0] - 1, times[-1] + 1, *times[::5], *(t + 1 for t in times[2::9])})

    # the broker's expiry deletes the oldest commit-log file; its messages are left in the tiered storage only
    (store_dir / "commitlog" / "00000000000000000000").unlink()
    broker = broker_factory(store_dir, tieredStoreFilePath=tiered, **TIERED)
    merged = by_queue_offset(harness("pull", "merged-bulk", BULK, len(sent[BULK]), timeout=300))
    # queryMessage by key (NOT_IN_DISK): the local index answers, the tiered index adds what lies before the
    # local store's first message
    merged_answers = {key: harness("by-key", BULK, key) for key in BULK_KEYS}
    # searchOffset: times before the local store's first message are searched in the tiered storage
    at_times = harness("by-time", BULK, 0, *probes)
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

    with RocketStore.open_history(store_dir, tiered_path=tiered) as history:
        for key, lines in merged_answers.items():
            found = history.query_by_key(BULK, key)
            if len(lines) < 64:
                assert_query_answers(found, lines)
                continue
            # more matches than the broker's cap: which tiered items fill it depends on the order its
            # asynchronous segment reads complete; the local store's answer and the count are fixed
            rows, got = by_queue_offset(found.to_pylist()), by_queue_offset(lines)
            assert len(rows) == len(got) == 64
            local_keys = {k for k in got if k[1] >= local_first[k[0]]}
            assert local_keys == {k for k in rows if k[1] >= local_first[k[0]]}
            for k, row in rows.items():
                assert key in row["keys"] and row["commitLogOffset"] == (
                    local_rows[k]["commitLogOffset"] if k in local_keys else served[BULK][k]["commitLogOffset"])
    # key-5 lies in the tiered range only: the broker finds it when the index file holding it began before the
    # local store's first message (files are chosen by when they began), so its answer may be empty, and then
    # so is rocketstore's (compared above)
    assert len(merged_answers["key-5"]) <= 1 and len(merged_answers["key-390"]) == 1
    assert all(line["queueOffset"] < local_first[line["queueId"]] for line in merged_answers["key-5"])
    assert all(line["queueOffset"] >= local_first[line["queueId"]] for line in merged_answers["key-390"])

    with RocketStore.open_history(store_dir, tiered_path=tiered) as history:
        assert len(at_times) == len(probes)
        for line in at_times:
            found = (history.offset_by_time(BULK, 0, line["timestamp"], "lower"),
                     history.offset_by_time(BULK, 0, line["timestamp"], "upper"))
            assert found == (line["lower"], line["upper"]), line
        earliest = history.earliest_local_time()
    assert any(t < earliest for t in probes) and any(t >= earliest for t in probes)

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
    # a uniqKey filter finds, through the tiered index, a message only the tiered storage holds
    expired = next(row for key, row in sorted(rows.items()) if key[1] < local_first[key[0]])
    found = df.filter(F.col("uniqKey") == expired["uniqKey"]).select("queueId", "queueOffset", "commitLogOffset")
    assert [tuple(r) for r in found.collect()] == [(expired["queueId"], expired["queueOffset"],
                                                   expired["commitLogOffset"])]
    # times: the offsets the broker's searchOffset gave for queue 0, before and in the local store
    lower = {line["timestamp"]: line["lower"] for line in at_times}
    early, late = probes[1], probes[-2]
    window = (spark.read.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", BULK)
              .option("startingOffsetsByTimestamp", json.dumps({BULK: {"0": early}}))
              .option("endingOffsetsByTimestamp", json.dumps({BULK: {"0": late}})).load(str(store_dir))
              .where("queueId = 0"))
    assert lower[early] < local_first[0] <= lower[late]
    assert sorted(r["queueOffset"] for r in window.collect()) == list(range(lower[early], lower[late]))
    # startingGroup: from the group's committed offsets, in the tiered range
    assert committed.keys() == local_first.keys() and all(0 <= committed[q] < local_first[q] for q in committed)
    assert any(committed.values())
    from_group = (spark.read.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", BULK)
                  .option("startingGroup", "partial-bulk").load(str(store_dir)))
    starts = {r["queueId"]: (r["first"], r["n"]) for r in
              from_group.groupBy("queueId").agg(F.min("queueOffset").alias("first"), F.count("*").alias("n")).collect()}
    assert starts == {q: (offset, 100 - offset) for q, offset in committed.items()}
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
    # a stream starting at a time before the local store's first message starts in the tiered storage
    out, ckpt = tmp_path / "streamed-from-time", tmp_path / "checkpoint-from-time"
    query = (spark.readStream.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", BULK)
             .option("startingOffsetsByTimestamp", json.dumps({BULK: {"0": early}})).load(str(store_dir))
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    from_time = sorted((r["queueId"], r["queueOffset"]) for r in spark.read.parquet(str(out)).collect())
    assert from_time == [(0, o) for o in range(lower[early], 100)]  # the other queues start at their ends
    alone = spark.read.format("rocketstore").option("tieredStorePath", str(tiered)).option("topics", HISTORY).load()
    assert alone.select(F.min("queueOffset"), F.count("*")).first()[:] == (0, len(sent[HISTORY]))
    tiered_alone = {(r["queueId"], r["queueOffset"]): r for r in spark_rows(alone).values()}
    for key, got in served[HISTORY].items():
        assert tiered_alone[key]["commitLogOffset"] == got["commitLogOffset"]
        assert tiered_alone[key]["uniqKey"] == got["msgId"]
        assert tiered_alone[key]["brokerName"] == "broker-e2e"
