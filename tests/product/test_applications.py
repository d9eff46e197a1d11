"""Spark applications of their own, as users run them: a driver killed inside the sink's commit, retried and
speculative task attempts, and a streaming query killed while the store it reads keeps growing.

Each test starts one or more Spark applications in child processes (a JVM each), so they run with the product
tests (``make test-product``), after the default suite.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rocketstore_spark.store import RocketStore
from tests.spark.test_sink import write
from tests.spark.test_stream import available_now, seed, stream_to_parquet
from tests.store.write.test_writer import no_job_leftovers, tree_digest

pytestmark = [pytest.mark.product, pytest.mark.spark]

APPENDER = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    from rocketstore_spark.store import RocketStore
    path, bursts, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for b in range(bursts):
        with RocketStore.open_writer(path) as w:
            w.append(pa.table({"topic": ["live"] * size, "queueId": [i % 4 for i in range(size)],
                               "body": [f"m-{b * size + i}".encode() * 20 for i in range(size)]}))
        time.sleep(0.4)
""")

QUERY = textwrap.dedent("""
    import os, sys, time
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    store, out, ckpt = sys.argv[1:4]
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    q = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "300").load(store).select("body", "queueId", "queueOffset")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(processingTime="500 milliseconds").start())
    print("started", flush=True)
    q.awaitTermination()
""")


def test_driver_killed_during_commit_is_all_or_nothing(tmp_path, spark):
    base = spark.createDataFrame([("t", b"old")], "topic string, body binary")
    write(base, tmp_path / "s")
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession, functions as F
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        df = spark.range(0, 300, numPartitions=2).select(F.lit("t").alias("topic"),
                                                         F.col("id").cast("string").cast("binary").alias("body"))
        df.write.format("rocketstore").mode("append").save({str(tmp_path / 's')!r})
    """)
    for step, kept in (("part-1", False), ("after-done", True)):
        before = tree_digest(tmp_path / "s")
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, ROCKETSTORE_FAULT_AT=step, PYSPARK_PYTHON=sys.executable))
        assert result.returncode != 0  # the commit's Python worker was killed: the job failed
        with RocketStore.open(tmp_path / "s") as s:
            s.max_phy_offset()  # readable without error
        RocketStore.open_writer(tmp_path / "s").close()  # recovery
        with RocketStore.open(tmp_path / "s") as s:
            bodies = [b for q in s.queue_ids("t") for batch in s.read_queue("t", q, columns=["body"])
                      for b in batch.column(0).to_pylist()]
        if kept:
            assert sorted(bodies) == sorted([b"old"] + [str(i).encode() for i in range(300)])
        else:
            assert bodies == [b"old"] and tree_digest(tmp_path / "s") == before


RETRY_JOB = textwrap.dedent("""
    import os, random, sys, time
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark import TaskContext
    from pyspark.sql import SparkSession, functions as F
    store = sys.argv[1]
    # up to 4 attempts per task, and speculative copies of slow tasks racing the originals
    spark = (SparkSession.builder.master("local[2,4]").config("spark.ui.enabled", "false")
             .config("spark.speculation", "true").config("spark.speculation.multiplier", "1.1")
             .config("spark.speculation.quantile", "0.1").config("spark.speculation.interval", "100ms")
             .config("spark.speculation.minTaskRuntime", "100ms").getOrCreate())

    @F.udf("binary")
    def body(i):
        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i % 50 == 7:
            raise RuntimeError("flaky task, first attempt")
        if ctx.attemptNumber() == 0 and ctx.partitionId() % 3 == 0 and i % 100 == 0:
            time.sleep(1.5)  # stragglers for the speculative copies to race
        return str(i).encode()

    df = spark.range(0, 2000, numPartitions=8).select(F.lit("t").alias("topic"), body("id").alias("body"))
    df.write.format("rocketstore").mode("append").save(store)
    print("DONE", flush=True)
""")


def test_retried_and_speculative_attempts_write_every_row_once(tmp_path):
    out = subprocess.run([sys.executable, "-c", RETRY_JOB, str(tmp_path / "s")], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert out.returncode == 0 and "DONE" in out.stdout, out.stderr[-3000:]
    assert "flaky task, first attempt" in out.stderr  # a failed attempt really happened
    with RocketStore.open(tmp_path / "s") as s:
        bodies = [b for q in s.queue_ids("t") for batch in s.read_queue("t", q, columns=["body"])
                  for b in batch.column(0).to_pylist()]
    assert sorted(bodies) == sorted(str(i).encode() for i in range(2000))
    assert no_job_leftovers(tmp_path / "s")


def test_growing_store_to_parquet_exactly_once(spark, tmp_path):
    store, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    seed(store)
    bursts, size = 12, 150
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, str(store), str(bursts), str(size)])
    try:
        for _ in range(2):  # stop and restart from the checkpoint while the store grows
            q = stream_to_parquet(spark, store, out, ckpt, processingTime="500 milliseconds")
            time.sleep(4)
            q.stop()
        killed = subprocess.Popen([sys.executable, "-c", QUERY, str(store), str(out), str(ckpt)],
                                  stdout=subprocess.PIPE, text=True)
        assert killed.stdout.readline().strip() == "started"
        time.sleep(6)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert appender.wait(timeout=120) == 0
    finally:
        appender.kill()
    with RocketStore.open(store) as s:
        assert len(s.commitlog.queue.files) > 3  # the appender rolled commit-log files
    progress = available_now(lambda: stream_to_parquet(spark, store, out, ckpt, availableNow=True))
    assert all(p["numInputRows"] <= 300 for p in progress)
    bodies = [r[0] for r in spark.read.parquet(str(out)).select("body").collect()]
    expected = [f"seed-{i}".encode() * 20 for i in range(20)] + \
        [f"m-{i}".encode() * 20 for i in range(bursts * size)]
    assert sorted(bodies) == sorted(expected)
