"""spark.read.format("rocketstore") against the golden store."""

import shutil

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import rocketstore_spark
from rocketstore_spark.spark.filters import PUSHDOWN_SUPPORTED

BASE = StructType([StructField("topic", StringType()), StructField("queueId", IntegerType()),
                   StructField("queueOffset", LongType()), StructField("commitLogOffset", LongType()),
                   StructField("uniqKey", StringType()), StructField("tags", StringType()),
                   StructField("msgId", StringType()), StructField("bodySha", StringType()),
                   StructField("storeMs", LongType()), StructField("bornHost", StringType())])
SYSTEM = ("RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "rmq_sys_", "%RETRY%", "%DLQ%")


def expected_df(spark, rows):
    data = [(m["topic"], m["queueId"], m["queueOffset"], m["commitLogOffset"], m["uniqKey"],
             m["properties"].get("TAGS"), m["msgId"], m.get("bodyDecompressedSha256") or m["bodySha256"],
             m["storeTimestamp"], m["bornHost"]) for m in rows]
    return spark.createDataFrame(data, BASE)


def actual_df(df):
    return df.select("topic", "queueId", "queueOffset", "commitLogOffset", "uniqKey", "tags", "msgId",
                     F.sha2("body", 256).alias("bodySha"),
                     F.unix_millis("storeTimestamp").alias("storeMs"), "bornHost")


def reader(spark, path, **options):
    r = spark.read.format("rocketstore")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path))


def test_queue_mode_equals_the_manifest(spark, golden_store_path, manifest):
    df = reader(spark, golden_store_path, includeSystemTopics="true")
    expected = expected_df(spark, [m for m in manifest if m["inConsumeQueue"]])
    assert_df_equality(actual_df(df), expected, ignore_row_order=True)
    props = {r["commitLogOffset"]: (dict(r["properties"]), r["keys"], r["brokerName"])
             for r in df.select("commitLogOffset", "properties", "keys", "brokerName").collect()}
    for m in manifest[::50]:
        if m["inConsumeQueue"]:
            assert props[m["commitLogOffset"]] == (m["properties"], [k for k in (m["keys"] or "").split(" ") if k],
                                                   "public-a")


def test_raw_mode_returns_every_record(spark, golden_store_path, manifest):
    df = reader(spark, golden_store_path, scanMode="raw", includeSystemTopics="true")
    assert_df_equality(actual_df(df), expected_df(spark, manifest), ignore_row_order=True)


def test_default_topics_exclude_system_topics(spark, golden_store_path, manifest):
    topics = {r[0] for r in reader(spark, golden_store_path).select("topic").distinct().collect()}
    assert topics == {m["topic"] for m in manifest if m["inConsumeQueue"] and not m["topic"].startswith(SYSTEM)}
    retry = reader(spark, golden_store_path, includeRetryTopics="true").select("topic").distinct().count()
    assert retry == len(topics) + 2


def test_tags_offsets_and_timestamps(spark, golden_store_path, manifest):
    tagged = reader(spark, golden_store_path, topics="TopicTest", tags="TagA || TagB")
    assert tagged.count() == sum(1 for m in manifest if m["inConsumeQueue"] and m["topic"] == "TopicTest"
                                 and m["tags"] in ("TagA", "TagB"))
    sliced = reader(spark, golden_store_path, topics="TopicTest",
                    startingOffsets='{"TopicTest": {"2": 10}}', endingOffsets='{"TopicTest": {"2": 25}}')
    got = sorted(r[0] for r in sliced.where("queueId = 2").select("queueOffset").collect())
    assert got == list(range(10, 25))
    rows = [m for m in manifest if m["inConsumeQueue"] and m["topic"] == "orders_v1-EU"]
    times = sorted(m["storeTimestamp"] for m in rows)
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    window = reader(spark, golden_store_path, topics="orders_v1-EU", startingTimestamp=str(lo),
                    endingTimestamp=str(hi))
    assert window.count() == sum(1 for t in times if lo <= t < hi)


def test_partitioning_options(spark, golden_store_path):
    small = reader(spark, golden_store_path, topics="TopicTest", maxMessagesPerPartition="50")
    whole = reader(spark, golden_store_path, topics="TopicTest")
    assert small.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert small.count() == whole.count()
    assert reader(spark, golden_store_path, topics="TopicTest", minPartitions="40").rdd.getNumPartitions() >= 40


def test_user_schema_subset(spark, golden_store_path, manifest):
    df = spark.read.format("rocketstore").schema("topic string, queueOffset long").load(str(golden_store_path))
    assert df.columns == ["topic", "queueOffset"]
    assert df.count() == sum(1 for m in manifest if m["inConsumeQueue"] and not m["topic"].startswith(SYSTEM))


def test_two_stores_are_two_brokers(spark, golden_store_path, tmp_path):
    for name in ("broker-a", "broker-b"):
        shutil.copytree(golden_store_path, tmp_path / name / "store")
    listed = reader(spark, f"{tmp_path}/broker-a/store,{tmp_path}/broker-b/store", topics="TopicTest")
    globbed = reader(spark, f"{tmp_path}/broker-*/store", topics="TopicTest")
    counts = dict(listed.groupBy("brokerName").count().collect())
    assert set(counts) == {"broker-a", "broker-b"} and counts["broker-a"] == counts["broker-b"]
    assert globbed.count() == listed.count()
    both = reader(spark, f"{tmp_path}/broker-*/store", topics="TopicTest",
                  startingOffsets='{"broker-a": {"TopicTest": {"0": 5}}}')
    assert both.count() == listed.count() - 5


@pytest.mark.parametrize("options,message", [
    ({"path": "/nonexistent/store"}, "does not exist"),
    ({"bogusOption": "1"}, "unknown option"),
    ({"startingOffsets": "{not json"}, "startingOffsets"),
    ({"tags": "TagA ||"}, "tag expression"),
    ({"scanMode": "sideways"}, "scanMode"),
])
def test_bad_options_fail_at_load(spark, golden_store_path, options, message):
    options = dict(options)
    path = options.pop("path", str(golden_store_path))
    with pytest.raises(Exception, match=message):
        reader(spark, path, **options)


def test_a_file_and_a_bad_schema(spark, golden_store_path, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(Exception, match="is a file"):
        reader(spark, tmp_path / "file")
    with pytest.raises(Exception, match="nosuchcolumn"):
        spark.read.format("rocketstore").schema("nosuchcolumn string").load(str(golden_store_path)).collect()


def test_pushdown_gives_the_same_rows(pushdown, golden_store_path, manifest):
    spark = pushdown
    df = reader(spark, golden_store_path, includeSystemTopics="true")
    some = next(m for m in manifest if m["inConsumeQueue"] and m["topic"] == "TopicTest" and m["uniqKey"])
    queries = {
        "topic = 'orders_v1-EU'": lambda m: m["topic"] == "orders_v1-EU",
        "topic IN ('TopicTest', 'BenchTopic') AND queueId = 1":
            lambda m: m["topic"] in ("TopicTest", "BenchTopic") and m["queueId"] == 1,
        "tags = 'TagB'": lambda m: m["tags"] == "TagB",
        "queueOffset >= 10 AND queueOffset < 20": lambda m: 10 <= m["cqOffset"] < 20,
        "commitLogOffset >= 1000000 AND commitLogOffset < 3000000":
            lambda m: 1000000 <= m["commitLogOffset"] < 3000000,
        f"uniqKey = '{some['uniqKey']}'": lambda m: m["uniqKey"] == some["uniqKey"],
        f"msgId = '{some['msgId']}'": lambda m: m["msgId"] == some["msgId"],
        f"storeTimestamp >= timestamp_millis({some['storeTimestamp']})":
            lambda m: m["storeTimestamp"] >= some["storeTimestamp"],
    }
    without = []
    for condition, predicate in queries.items():
        got = sorted(r[0] for r in df.where(condition).select("commitLogOffset").collect())
        want = sorted(m["commitLogOffset"] for m in manifest if m["inConsumeQueue"] and predicate(m))
        assert got == want, condition
        without.append((condition, want))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    for condition, want in without[1::3]:  # the same answers when Spark filters after a full scan
        assert sorted(r[0] for r in reader(spark, golden_store_path, includeSystemTopics="true")
                      .where(condition).select("commitLogOffset").collect()) == want, condition
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_reads_that_plan_no_partition_return_no_rows(pushdown, golden_store_path, tmp_path):
    """PySpark replaces an empty plan by one bare InputPartition: such reads must give empty results."""
    spark = pushdown
    assert reader(spark, golden_store_path, tags="NoSuchTag").count() == 0
    df = reader(spark, golden_store_path)
    assert df.where("uniqKey = 'NOSUCHKEY'").count() == 0
    assert df.where("queueId = 1 AND queueId = 2").count() == 0
    assert df.where("tags = 'NoSuchTag'").count() == 0
    from rocketstore_spark.store import RocketStore

    with RocketStore.open_writer(tmp_path / "empty"):
        pass  # a store with no message yet
    assert reader(spark, tmp_path / "empty").count() == 0
    assert reader(spark, tmp_path / "empty", scanMode="commitlog").count() == 0


def test_store_with_ambiguous_index_sizes_reads_and_says_what_to_pass_for_lookups(pushdown, tmp_path):
    from tests.store.write.test_writer import _ambiguous_index_store

    root = _ambiguous_index_store(tmp_path / "s")
    assert [r[0] for r in reader(pushdown, root).select("body").collect()] == [b"x"]
    if not PUSHDOWN_SUPPORTED:  # Spark 4.0: Spark filters the scanned rows, the index is never asked
        assert reader(pushdown, root).where("uniqKey = 'AMBIG50'").count() == 1
        return
    with pytest.raises(Exception, match="indexHashSlots|index_hash_slots"):
        reader(pushdown, root).where("uniqKey = 'AMBIG50'").count()
    assert reader(pushdown, root, indexHashSlots="64", indexMaxEntries="256").where(
        "uniqKey = 'AMBIG50'").count() == 1


def test_registration(spark, golden_store_path):
    before = reader(spark, golden_store_path, topics="TopicTest").count()
    rocketstore_spark.register(spark)
    assert reader(spark, golden_store_path, topics="TopicTest").count() == before > 0


def test_only_the_pushdown_worker_gets_a_reader_with_push_filters(golden_store_path):
    """Spark's planning worker refuses a reader whose pushFilters is not DataSourceReader's own when pushdown is
    off; the pushdown worker (the only caller that pushes filters) gets the reader that has it."""
    from pyspark.sql.datasource import DataSourceReader

    from rocketstore_spark.spark.reader import RocketStorePushdownReader
    from rocketstore_spark.spark.source import RocketStoreDataSource

    source = RocketStoreDataSource({"path": str(golden_store_path)})
    plain = source.reader(None)
    assert getattr(plain.pushFilters, "__func__", None) is DataSourceReader.pushFilters
    worker = {"source": source}
    exec(compile("reader = source.reader(None)", "pyspark/sql/worker/data_source_pushdown_filters.py", "exec"), worker)
    assert isinstance(worker["reader"], RocketStorePushdownReader)
    assert getattr(worker["reader"].pushFilters, "__func__", None) is not DataSourceReader.pushFilters


def test_the_installed_spark_tells_the_reader_no_other_way_which_worker_asks():
    """Why source.called_from_pushdown_worker looks at its caller: both of Spark's workers ask for the reader with
    the same arguments, and the pushdown setting stays in the planning worker (a Spark that passes it on
    fails this test: then the reader can be chosen from what it is given)."""
    import importlib
    import inspect

    plan_worker = inspect.getsource(importlib.import_module("pyspark.sql.worker.plan_data_source_read"))
    try:
        pushdown_worker = importlib.import_module("pyspark.sql.worker.data_source_pushdown_filters")
    except ImportError:  # Spark 4.0: no pushdown, and no check of pushFilters either
        assert "DATA_SOURCE_PUSHDOWN_DISABLED" not in plan_worker
        return
    from rocketstore_spark.spark.source import PUSHDOWN_WORKER

    assert pushdown_worker.__name__.endswith(PUSHDOWN_WORKER)
    calls = [line.strip() for src in (plan_worker, inspect.getsource(pushdown_worker))
             for line in src.splitlines() if "data_source.reader(" in line]
    assert calls == ["reader = data_source.reader(schema=schema)"] * 2
    flag = plan_worker.index("enable_pushdown = read_bool(infile)")
    assert plan_worker.count("enable_pushdown") == 2 and "and not enable_pushdown" in plan_worker[flag + 1:]
