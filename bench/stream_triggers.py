"""Streaming triggers on a production-shaped store, through a running Spark streaming query (not a test).

    python bench/stream_triggers.py STORE [--topics T] [--queues-per-topic Q] [--retry-groups G] [--new N]

Starts ``spark.readStream.format("rocketstore")`` on STORE (from ``latest``, every queue, retry topics included)
into Spark's ``noop`` sink with a one-second processing-time trigger, lets it run idle, then appends N messages
spread over the store's queues (the same skewed layout as the generator's) and waits for the micro-batch that
holds them. The figures come from Spark's own progress reports:

* ``idle_trigger``: ``durationMs.latestOffset`` of the triggers that found nothing new (target <= 100 ms), and
  their whole ``triggerExecution``;
* ``new_messages``: N new rows are appended twice (the first micro-batch with data also starts the Python
  workers: its time is reported as ``first_data_trigger_ms``); for the second, ``triggerExecution`` (from the
  trigger to the batch committed: the messages visible to the query; target <= 1 s for 1,000 messages) and
  its parts.

The store gains N messages (it is the benchmark's own store; production_shape.py runs this last).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import emit, spark_session  # noqa: E402

IDLE_TRIGGERS = 8


def measure(spark, store: str, spec, new_messages: int = 1000) -> dict:
    """Run the query, append ``new_messages`` production-shaped rows, return the figures (see module doc)."""
    from rocketstore_spark.samples import production_tables
    from rocketstore_spark.store import RocketStore

    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # report idle triggers too
    query = (spark.readStream.format("rocketstore").option("includeRetryTopics", "true")
             .option("startingOffsets", "latest").load(store)
             .writeStream.format("noop").trigger(processingTime="1 second").start())
    try:
        idle = _progress(query, lambda ps: sum(1 for p in ps if p["numInputRows"] == 0) >= IDLE_TRIGGERS + 1)
        idle = [p for p in idle if p["numInputRows"] == 0][1:]  # the first trigger also opens the store
        first = []
        for round_ in range(2):  # the first micro-batch with data also starts the Python workers: reported apart
            table = next(production_tables(_small(spec, new_messages, round_)))
            since = len(query.recentProgress)
            with RocketStore.open_writer(store) as writer:
                writer.append(table)
            appended_at = time.time()
            rows = table.num_rows
            batches = _progress(query, lambda ps, rows=rows: sum(p["numInputRows"] for p in ps) >= rows,
                                since=since)
            got = [p for p in batches if p["numInputRows"] > 0]
            first = first or [p["durationMs"]["triggerExecution"] for p in got]
    finally:
        query.stop()
    idle_latest = sorted(p["durationMs"].get("latestOffset", 0) for p in idle)
    out = {"idle_latest_offset_ms_median": idle_latest[len(idle_latest) // 2],
           "idle_latest_offset_ms_max": idle_latest[-1],
           "idle_trigger_ms_median": sorted(p["durationMs"]["triggerExecution"] for p in idle)[len(idle) // 2],
           "new_rows": sum(p["numInputRows"] for p in got), "new_batches": len(got),
           "new_trigger_ms": [p["durationMs"]["triggerExecution"] for p in got],
           "first_data_trigger_ms": first,
           "new_parts_ms": [{k: v for k, v in p["durationMs"].items() if k != "triggerExecution"} for p in got],
           "seen_after_append_s": round(time.time() - appended_at, 2)}
    emit(step="stream_triggers", **out)
    return out


def _small(spec, messages: int, round_: int):
    """``spec``'s layout with ``messages`` new rows (another seed per round: not the generated rows again)."""
    from dataclasses import replace

    return replace(spec, messages=messages, seed=spec.seed + 1 + round_)


def _progress(query, done, since: int = 0, timeout: float = 300.0) -> list:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        progress = query.recentProgress[since:]
        if done(progress):
            return progress
        time.sleep(0.2)
    raise TimeoutError("the streaming query did not report the expected progress in time")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--topics", type=int, default=250)
    ap.add_argument("--queues-per-topic", type=int, default=8)
    ap.add_argument("--retry-groups", type=int, default=100)
    ap.add_argument("--sizes", default="lognormal:600,0.8")
    ap.add_argument("--new", type=int, default=1000)
    args = ap.parse_args()
    from rocketstore_spark.samples import ProductionSpec, SizeSpec

    spec = ProductionSpec(messages=args.new, topics=args.topics, queues_per_topic=args.queues_per_topic,
                          retry_groups=args.retry_groups, sizes=SizeSpec.parse(args.sizes))
    spark = spark_session("bench-stream")
    measure(spark, args.store, spec, args.new)
    spark.stop()


if __name__ == "__main__":
    main()
