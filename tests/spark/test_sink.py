"""df.write.format("rocketstore"): round trip, failures, validation, locking and disk use."""

import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from rocketstore_spark.store import RocketStore
from tests.conftest import GOLDEN_SIZES, copy_sparse
from tests.store.write.test_writer import no_job_leftovers, tree_digest

SIZE_OPTIONS = {"commitLogFileSize": "1048576", "consumeQueueFileSize": "6000", "indexHashSlots": "5000",
                "indexMaxEntries": "20000"}
DERIVED = ("queueOffset", "commitLogOffset", "msgId", "storeSize", "brokerName")


def write(df, path, mode="append", **options):
    w = df.write.format("rocketstore").mode(mode)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(str(path))


def disk_bytes(root) -> int:
    """The disk space the files under ``root`` take (holes take none)."""
    return sum(os.stat(p).st_blocks * 512 for p in Path(root).rglob("*") if p.is_file())


def read(spark, path, **options):
    r = spark.read.format("rocketstore").option("includeSystemTopics", "true")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path))


def comparable(df):
    cols = [c for c in df.columns if c not in DERIVED and c != "properties"]
    return df.select(*cols, F.to_json(F.array_sort(F.map_entries("properties"))).alias("properties"))


def test_golden_round_trip(spark, golden_store_path, tmp_path):
    original = read(spark, golden_store_path)
    write(original, tmp_path / "copy", **SIZE_OPTIONS)
    back = read(spark, tmp_path / "copy")
    assert_df_equality(comparable(back), comparable(original), ignore_row_order=True)
    offsets = back.groupBy("topic", "queueId").agg(F.min("queueOffset").alias("lo"), F.max("queueOffset").alias("hi"),
                                                    F.count("*").alias("n")).collect()
    assert all(r["lo"] == 0 and r["hi"] == r["n"] - 1 for r in offsets)
    with RocketStore.open(tmp_path / "copy") as s:
        assert s.sizes.as_options() == GOLDEN_SIZES and s.recovery.mode == "normal"
    assert no_job_leftovers(tmp_path / "copy") and not (tmp_path / "copy" / "abort").exists()


def test_generated_frame_defaults_compression_append_and_overwrite(spark, tmp_path):
    df = spark.range(0, 500, numPartitions=3).select(
        F.concat(F.lit("payload-"), F.col("id").cast("string"), F.expr("repeat('x', 5000)")).alias("body"),
        F.lit("events").alias("topic"), F.array(F.concat(F.lit("id-"), F.col("id").cast("string"))).alias("keys"))
    write(df, tmp_path / "s", compressBody="zstd")
    write(df.limit(10), tmp_path / "s", compressBody="lz4", flushDiskType="SYNC_FLUSH")
    with RocketStore.open(tmp_path / "s") as s:
        assert s.queue_ids("events") == list(range(8))
        assert sum(s.max_offset("events", q) for q in range(8)) == 510
        row = s.query_by_key("events", "id-7", columns=["body", "sysFlag"]).to_pylist()
        assert len(row) == 2 and row[0]["body"].startswith(b"payload-7x") and row[0]["sysFlag"] & 1
    with pytest.raises(Exception, match="overwrite"):
        write(df, tmp_path / "s", mode="overwrite")
    with pytest.raises(Exception, match="ErrorIfExists"):
        df.write.format("rocketstore").save(str(tmp_path / "s"))
    write(df.limit(5).withColumn("topic", F.lit("fresh")), tmp_path / "s", mode="overwrite", overwrite="replace")
    with RocketStore.open(tmp_path / "s") as s:
        assert s.topics() == ["fresh"] and sum(s.max_offset("fresh", q) for q in range(8)) == 5


@pytest.fixture(scope="module")
def two_queue_store(spark, tmp_path_factory):
    """A store the sink wrote: one message of topic ``t`` (2 queues); each test works on its own copy."""
    path = tmp_path_factory.mktemp("bad-input") / "s"
    write(spark.createDataFrame([("t", b"x", 0)], "topic string, body binary, queueId int"), path, queueNums="2")
    return path


@pytest.mark.parametrize("make,message", [
    (lambda df: df.withColumn("body", F.lit(None).cast("binary")), "body is null"),
    (lambda df: df.withColumn("topic", F.lit("../evil")), "invalid topic"),
    (lambda df: df.withColumn("body", F.expr("repeat('x', 5242880)")), "4194304"),
    (lambda df: df.withColumn("properties", F.create_map(F.lit("k"), F.expr("repeat('v', 40000)"))), "32767"),
    (lambda df: df.withColumn("queueId", F.lit(9)), "beyond topic"),
    (lambda df: df.withColumn("queueId", F.lit("zero")), "queueId"),
    (lambda df: df.withColumn("color", F.lit("red")), "ignoreExtraColumns"),
    (lambda df: df.drop("body"), "body"),
])
def test_bad_input_publishes_nothing(spark, tmp_path, two_queue_store, make, message):
    base = spark.createDataFrame([("t", b"x", 0)], "topic string, body binary, queueId int")
    shutil.copytree(two_queue_store, tmp_path / "s", copy_function=copy_sparse)  # full-size files, one message
    before = tree_digest(tmp_path / "s")
    with pytest.raises(Exception, match=message):
        write(make(base.withColumn("queueId", F.lit(1))), tmp_path / "s")
    assert tree_digest(tmp_path / "s") == before
    # a store of one message takes a few pages per file, before and after a job that failed (no 1 GiB
    # commit-log file or 400 MB index file written out in full)
    assert disk_bytes(tmp_path) <= disk_bytes(two_queue_store) + 64 * 4096
    if message == "ignoreExtraColumns":
        write(make(base), tmp_path / "s", ignoreExtraColumns="true")


def test_job_failing_for_good_leaves_the_store_untouched(spark, tmp_path):
    base = spark.createDataFrame([("t", b"x")], "topic string, body binary")
    write(base, tmp_path / "s")
    before = tree_digest(tmp_path / "s")

    @F.udf("binary")
    def boom(value):
        raise RuntimeError("task failure on purpose")

    with pytest.raises(Exception, match="on purpose"):
        write(spark.range(100, numPartitions=4).select(F.lit("t").alias("topic"), boom("id").alias("body")),
              tmp_path / "s")
    assert tree_digest(tmp_path / "s") == before
    assert not list((tmp_path / "s").rglob("*.rec"))


def test_save_to_a_remote_uri_fails_at_save_saying_why(spark):
    df = spark.createDataFrame([("t", b"x")], "topic string, body binary")
    with pytest.raises(Exception, match="POSIX record locks and atomic renames") as err:
        df.write.format("rocketstore").mode("append").save("s3a://bucket/migrated/store")
    assert "then copy" in str(err.value)


def test_a_held_lock_fails_fast(spark, tmp_path):
    base = spark.createDataFrame([("t", b"x")], "topic string, body binary")
    write(base, tmp_path / "s")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(tmp_path / 's' / 'lock')!r}, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
        print('locked', flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(Exception, match="lock"):
            write(base, tmp_path / "s")
    finally:
        holder.kill()
    assert fcntl  # the broker's FileChannel.tryLock is this same POSIX record lock


def test_two_hundred_tasks_share_commitlog_files(spark, tmp_path):
    df = spark.range(0, 20000, numPartitions=200).select(
        F.lit("many").alias("topic"), F.expr("repeat('y', 200)").cast("binary").alias("body"))
    write(df, tmp_path / "s", commitLogFileSize=str(1 << 20))
    with RocketStore.open(tmp_path / "s") as s:
        end = s.max_phy_offset()
        assert sum(s.max_offset("many", q) for q in range(8)) == 20000
        assert len(s.commitlog.queue.files) == end // (1 << 20) + 1
    # the records themselves (headers, topic, properties, bodies), the 20-byte units and the index entries
    content = end + 20000 * 20 + 20000 * 20
    disk = disk_bytes(tmp_path / "s")
    assert disk <= content * 1.15 + 64 * 4096  # a page of slack per file, whatever the number of tasks
