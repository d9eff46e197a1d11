"""readStream / writeStream: exactly-once micro-batches over a store that keeps growing."""

import time

import pyarrow as pa
import pytest

from rocketstore_spark.spark.stream_reader import ENGINE_READ_LIMITS
from rocketstore_spark.store import RocketStore

SMALL = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=2000, index_hash_slots=256,
             index_max_entries=2048)


def seed(path, n=20):
    with RocketStore.open_writer(path, **SMALL) as w:
        w.append(pa.table({"topic": ["live"] * n, "queueId": [i % 4 for i in range(n)],
                           "body": [f"seed-{i}".encode() * 20 for i in range(n)]}))


def available_now(start_query):
    """Run ``start_query()`` (an AvailableNow query) to the end; progress of every batch.

    Spark >= 4.2 reads everything available in bounded batches. Spark 4.0/4.1 run AvailableNow as a single
    batch, which ``maxMessagesPerTrigger`` bounds: the query is then run again until a run moves no offset,
    each restart going on from the checkpoint.
    """
    progress = []
    while True:
        q = start_query()
        q.awaitTermination()
        progress += q.recentProgress
        moved = any(src["startOffset"] != src["endOffset"] for p in q.recentProgress for src in p["sources"])
        if ENGINE_READ_LIMITS or not moved:
            return progress


def stream_to_parquet(spark, store, out, ckpt, **trigger):
    q = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "300").load(str(store)).select("body", "queueId", "queueOffset")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(**trigger).start())
    return q


def test_store_to_store_through_the_sink_exactly_once(spark, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    seed(a, 500)

    def run(limit):
        return available_now(lambda: (
            spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(limit)).load(str(a))
            .writeStream.format("rocketstore").option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True).start(str(b))))

    run(200)
    # the driver "died" after the sink published its last batch but before Spark recorded the batch as done:
    # the restart replays it (the sink must publish nothing) and goes on, in this same driver process
    commits = tmp_path / "ck" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    with RocketStore.open_writer(a) as w:
        w.append(pa.table({"topic": ["live"] * 100, "body": [f"late-{i}".encode() for i in range(100)]}))
    progress = run(70)
    assert progress[0]["batchId"] == last and progress[0]["numInputRows"] <= 200  # the replay: its recorded range
    assert all(p["numInputRows"] <= 70 for p in progress[1:])
    with RocketStore.open(b) as s:
        bodies = [x for qid in s.queue_ids("live") for batch in s.read_queue("live", qid, columns=["body"])
                  for x in batch.column(0).to_pylist()]
    assert sorted(bodies) == sorted([f"seed-{i}".encode() * 20 for i in range(500)] +
                                    [f"late-{i}".encode() for i in range(100)])
    assert (b / ".rocketstore" / "sinks").is_dir()


@pytest.mark.parametrize("fail", [True, False])
def test_expired_files_under_a_running_query(spark, tmp_path, fail):
    store = tmp_path / "store"
    seed(store, 2000)
    ckpt = tmp_path / "ck"

    def run():
        q = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", "100").option("failOnDataLoss", str(fail).lower()).load(str(store))
             .writeStream.format("noop").option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        return q

    q = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
         .option("maxMessagesPerTrigger", "100").load(str(store))
         .writeStream.format("noop").option("checkpointLocation", str(ckpt))
         .trigger(processingTime="30 seconds").start())
    deadline = time.time() + 60
    while not q.recentProgress and time.time() < deadline:  # one bounded batch, then stop
        time.sleep(0.2)
    q.stop()
    assert q.recentProgress[0]["numInputRows"] == 100
    for old in sorted((store / "commitlog").iterdir())[:3]:  # the broker's expiry deletes the oldest files
        old.unlink()
    if fail:
        with pytest.raises(Exception, match="lost"):
            run().awaitTermination()
    else:
        read = sum(p["numInputRows"] for p in available_now(run))
        with RocketStore.open(store) as s:
            remaining = sum(s.max_offset("live", x) - s.min_offset("live", x) for x in s.queue_ids("live"))
        assert read == remaining > 0  # the lost offsets skipped, everything after them read once
