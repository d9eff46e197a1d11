"""Storage variants through Spark: LMQ queues opt-in or by name, prop-crc verified, the sink refusing variant
stores, the variant option (one targeted test each; the store API's golden tests cover every row)."""

import shutil

import pytest

from tests.store.read.variant_view import load_view
from tests.store.write.test_writer import no_job_leftovers


def _offsets(line: dict) -> list:
    """(topic, queueId, queueOffset, commitLogOffset) of a view line, one per message of an inner batch."""
    inner = line.get("innerMessages") or [{"queueOffset": line["cqOffset"]}]
    return [(line["topic"], line["queueId"], m["queueOffset"], line["commitLogOffset"]) for m in inner]


def _rows(df, *columns):
    return sorted(tuple(r[c] for c in columns) for r in df.select(*columns).collect())


def test_lmq_queues_are_opt_in_or_named(spark, variant_golden):
    golden = variant_golden("lmq")
    view = load_view(golden)
    path = str(golden / "store")
    read = spark.read.format("rocketstore")
    parents = sorted((line["topic"], line["queueId"], line["cqOffset"], line["commitLogOffset"])
                     for line in view["messages"] if not line["topic"].startswith("%LMQ%"))
    assert _rows(read.load(path), "topic", "queueId", "queueOffset", "commitLogOffset") == parents
    every = sorted((line["topic"], line["queueId"], line["cqOffset"], line["commitLogOffset"])
                   for line in view["messages"])
    got = read.option("includeLmqTopics", "true").load(path)
    assert _rows(got, "topic", "queueId", "queueOffset", "commitLogOffset") == every
    named = read.option("topics", "%LMQ%chat_α").option("tags", "TagA").load(path)
    assert _rows(named, "topic", "queueOffset", "tags") == sorted(
        (line["topic"], line["cqOffset"], line["tags"]) for line in view["messages"]
        if line["topic"] == "%LMQ%chat_α" and line["tags"] == "TagA")


def test_prop_crc_read_with_verify_crc_and_an_explicit_variant(spark, variant_golden):
    golden = variant_golden("prop-crc")
    view = load_view(golden)
    df = (spark.read.format("rocketstore").option("verifyCrc", "true").option("variant", "prop-crc")
          .load(str(golden / "store")))
    rows = df.select("commitLogOffset", "properties").collect()
    assert sorted(r["commitLogOffset"] for r in rows) == sorted(line["commitLogOffset"] for line in view["messages"])
    assert all("__CRC32#" in dict(r["properties"]) for r in rows)
    with pytest.raises(Exception, match="variant must be"):
        spark.read.format("rocketstore").option("variant", "raft").load(str(golden / "store")).count()


def test_the_sink_refuses_a_variant_store(spark, variant_golden, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(variant_golden("prop-crc") / "store", store)
    df = spark.createDataFrame([("T", b"x")], "topic string, body binary")
    with pytest.raises(Exception, match="is a prop-crc store"):
        df.write.format("rocketstore").mode("append").save(str(store))
    assert no_job_leftovers(store)


def test_dledger_queue_and_commitlog_scans(spark, variant_golden):
    """Queue reads and ``scanMode=raw`` over the DLedger entries: the records at entry pos + 48."""
    golden = variant_golden("dledger")
    view = load_view(golden)
    path = str(golden / "store")
    scan = spark.read.format("rocketstore").option("scanMode", "raw").load(path)
    assert _rows(scan, "commitLogOffset", "msgId") == sorted((m["commitLogOffset"], m["msgId"])
                                                             for m in view["manifest"])
    queue = spark.read.format("rocketstore").option("tags", "TagB").load(path)
    assert _rows(queue, "topic", "queueId", "queueOffset", "commitLogOffset") == sorted(
        (line["topic"], line["queueId"], line["cqOffset"], line["commitLogOffset"]) for line in view["messages"]
        if line["tags"] == "TagB")


@pytest.mark.parametrize("name,options", [("lmq", {"includeLmqTopics": "true"}), ("dledger", {}),
                                          ("prop-crc", {"verifyCrc": "true"}), ("batch-cq", {}), ("rocksdb-cq", {})])
def test_streaming_reads_every_queue_offset_once(spark, variant_golden, tmp_path, name, options):
    """AvailableNow in bounded batches to Parquet: every (topic, queue, offset) of the real store's view once,
    LMQ rows with their LMQ offsets (streaming offsets are queue offsets)."""
    from tests.spark.test_stream import available_now

    golden = variant_golden(name)
    view = load_view(golden)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start():
        reader = spark.readStream.format("rocketstore").option("startingOffsets", "earliest") \
            .option("maxMessagesPerTrigger", "3000")
        for key, value in options.items():
            reader = reader.option(key, value)
        return (reader.load(str(golden / "store")).select("topic", "queueId", "queueOffset", "commitLogOffset")
                .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
                .trigger(availableNow=True).start())

    progress = available_now(start)
    assert all(p["numInputRows"] <= 3000 for p in progress)
    assert _rows(spark.read.parquet(str(out)), "topic", "queueId", "queueOffset", "commitLogOffset") == sorted(
        o for line in view["messages"] for o in _offsets(line))


def test_batch_cq_reads_one_row_per_inner_message(spark, variant_golden):
    """Batch consume queues: one row per message (inner batches unwrapped), tags on the inner messages, and
    offsets that start and end inside a batch."""
    golden = variant_golden("batch-cq")
    view = load_view(golden)
    path = str(golden / "store")
    want = sorted(o for line in view["messages"] for o in _offsets(line))
    got = _rows(spark.read.format("rocketstore").load(path), "topic", "queueId", "queueOffset", "commitLogOffset")
    assert got == want and len(want) == 7029
    inner = [(line["queueId"], m["queueOffset"], m["uniqKey"], m["tags"]) for line in view["messages"]
             if line["topic"] == "BatchTopic" for m in line.get("innerMessages") or []]
    tagged = spark.read.format("rocketstore").option("topics", "BatchTopic").option("tags", "TagA").load(path)
    got = _rows(tagged, "queueId", "queueOffset", "uniqKey", "tags")
    assert set(r for r in inner if r[3] == "TagA") <= set(got) and all(r[3] == "TagA" for r in got)
    line = next(line for line in view["messages"] if line["topic"] == "BatchTopic" and line["batchNum"] >= 8)
    q, base = str(line["queueId"]), line["cqOffset"]
    cut = (spark.read.format("rocketstore").option("topics", "BatchTopic")
           .option("startingOffsets", f'{{"BatchTopic": {{"{q}": {base + 2}}}}}')
           .option("endingOffsets", f'{{"BatchTopic": {{"{q}": {base + 5}}}}}').load(path))
    assert _rows(cut.where(f"queueId = {q}"), "queueOffset", "uniqKey") == [
        (m["queueOffset"], m["uniqKey"]) for m in line["innerMessages"][2:5]]


def test_rocksdb_cq_queue_reads_and_time_bounds(spark, variant_golden):
    """Queues from the RocksDB database (each executor opens it read-only), a tag filter, and
    ``startingTimestamp`` resolved by the RocksDB time search."""
    golden = variant_golden("rocksdb-cq")
    view = load_view(golden)
    path = str(golden / "store")
    every = spark.read.format("rocketstore").load(path)
    assert _rows(every, "topic", "queueId", "queueOffset", "commitLogOffset", "msgId") == sorted(
        (line["topic"], line["queueId"], line["cqOffset"], line["commitLogOffset"], line["msgId"])
        for line in view["messages"])
    tagged = spark.read.format("rocketstore").option("tags", "TagB").load(path)
    assert _rows(tagged, "topic", "queueId", "queueOffset") == sorted(
        (line["topic"], line["queueId"], line["cqOffset"]) for line in view["messages"] if line["tags"] == "TagB")
    times = sorted(line["storeTimestamp"] for line in view["messages"])
    middle = times[len(times) // 2]
    later = spark.read.format("rocketstore").option("startingTimestamp", str(middle)).load(path)
    got = later.select("storeTimestamp").collect()
    assert got and len(got) < len(times) and min(round(r[0].timestamp() * 1000) for r in got) >= middle


def test_broker_settings_as_read_options(spark, variant_golden, tmp_path):
    """A batch-cq store that lost ``batchconsumequeue/`` in a crash, read with batchTopics and
    batchConsumeQueueFileSize (its store.args' --batch-topics / --bcq-size): every message, as the real store
    rebuilds them; a one-node DLedger group's options; bad values refused at load()."""
    from tests.store.read.test_variant_batch_cq_recovery import lose_batch_queues

    golden = variant_golden("batch-cq")
    view = load_view(golden)
    store = tmp_path / "store"
    shutil.copytree(golden / "store", store)
    lose_batch_queues(store, view["manifest"][0]["storeTimestamp"])
    read = spark.read.format("rocketstore").option("batchTopics", "BatchTopic")
    got = _rows(read.option("batchConsumeQueueFileSize", "4600").load(str(store)), "topic", "queueId",
                "queueOffset", "commitLogOffset")
    assert got == sorted(o for line in view["messages"] for o in _offsets(line))
    assert not (store / "batchconsumequeue").exists()
    dledger = str(variant_golden("dledger") / "store")
    df = (spark.read.format("rocketstore").option("dledgerSelfId", "n0").option("dledgerPeers", "n0-127.0.0.1:1")
          .option("forceVerifyPropCrc", "false").load(dledger))
    assert df.count() == 4468
    for name, value, message in (("batchConsumeQueueFileSize", "100", "multiple of 46"),
                                 ("forceVerifyPropCrc", "maybe", "must be true or false"),
                                 ("dledgerSelfId", "n7", "no DLedger log for self id")):
        with pytest.raises(Exception, match=message):
            spark.read.format("rocketstore").option(name, value).load(dledger)
