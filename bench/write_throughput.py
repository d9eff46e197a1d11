"""Write throughput: rocketstore sink vs Spark's Parquet writer on the same input, in one run (not a test).

    python bench/write_throughput.py [--messages N] [--workdir DIR]

Generates N messages of ~1 KiB as Parquet, then times `df.write.parquet` and `df.write.format("rocketstore")`
from that source, best of three runs each, the two writers taking turns. Prints one JSON line per measurement
and finally ``write_vs_parquet=<ratio>`` (Parquet's time over rocketstore's: above 1.0 rocketstore is faster).
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    emit,
    fresh_output,
    interleaved,
    message_tables,
    register_floor_sink,
    remove_set_aside,
    spark_session,
    timed,
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="bench-output/write")
    args = ap.parse_args()
    import pyarrow.parquet as pq

    source = os.path.join(args.workdir, "source")
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(source)
    for i, table in enumerate(message_tables(args.messages)):
        pq.write_table(table.drop_columns(["storeTimestamp"]), os.path.join(source, f"part-{i:05d}.parquet"))
    spark = spark_session("bench-write")
    df = spark.read.parquet(source).repartition(2)  # same partitioning for both writers
    df.cache().count()

    parquet_out, store_out = os.path.join(args.workdir, "parquet-out"), os.path.join(args.workdir, "store-out")
    parquet_write = lambda: df.write.parquet(parquet_out)  # noqa: E731
    rocketstore_write = lambda: df.write.format("rocketstore").mode("append").save(store_out)  # noqa: E731
    # each write starts on a settled disk, its earlier output moved aside untimed (see fresh_output)
    prepare = {"parquet": fresh_output(parquet_out), "rocketstore": fresh_output(store_out)}
    for name, fn in (("parquet", parquet_write), ("rocketstore", rocketstore_write)):  # warm up JVM and workers
        prepare[name]()
        fn()
    best = interleaved({"parquet": parquet_write, "rocketstore": rocketstore_write}, rounds=3, prepare=prepare)
    t_pq, t_rs = best["parquet"][0], best["rocketstore"][0]
    emit(step="parquet_write", messages=args.messages, seconds=round(t_pq, 3))
    emit(step="rocketstore_write", messages=args.messages, seconds=round(t_rs, 3))
    # the same rows into a Python sink that does nothing with them: the most any Python sink can reach
    register_floor_sink(spark)
    floor = lambda: df.write.format("floorsink").mode("append").save()  # noqa: E731
    floor()
    t_floor, _ = timed(floor, repeat=2)
    emit(step="python_sink_floor", seconds=round(t_floor, 3), floor_vs_parquet=round(t_pq / t_floor, 2),
         rocketstore_vs_floor=round(t_floor / t_rs, 2))
    print(f"write_vs_parquet={t_pq / t_rs:.2f}")
    spark.stop()
    for out in (parquet_out, store_out):
        remove_set_aside(out)


if __name__ == "__main__":
    main()
