"""Remote reads: a bench store on a local S3 server (SeaweedFS, as the tests use) read through rocketstore, against
the raw GET throughput of the same commit-log bytes with pyarrow and the same read of the local files, in one run
(not a test).

    python bench/remote_read.py [--messages N] [--queues Q] [--workdir DIR]

Prints one JSON line per measurement and finally
``scan_vs_raw_get=<ratio> tag1pct_fetched=<fraction> key_lookup_s=<s> scan_remote_vs_local=<ratio>``:
scan_vs_raw_get is rocketstore's full commit-log scan throughput from S3 over pyarrow's sequential ranged GETs of
the same objects (the limit of this setup; target >= 0.7), tag1pct_fetched the bytes a 1%-tag read of every
queue fetched over the store's bytes (target <= 0.03), key_lookup_s a warm key lookup (target <= 1 s).
"""

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common import emit, message_tables, timed  # noqa: E402

STEP = 32 << 20  # the raw baseline's request size: what rocketstore's walks ask for


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--queues", type=int, default=8, help="queues of the bench topic (production shape: 2000)")
    ap.add_argument("--workdir", default="bench-output/remote")
    args = ap.parse_args()
    from pyarrow import fs as pafs

    from rocketstore_spark.store import RocketStore, counting
    from tests.s3_server import start_s3_server

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    store = work / "store"
    t, _ = timed(lambda: _generate(store, args.messages, args.queues, RocketStore))
    store_bytes = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    emit(step="generate", messages=args.messages, queues=args.queues, seconds=round(t, 2), store_bytes=store_bytes)
    server = start_s3_server(work / "weed")
    try:
        t, uri = timed(lambda: server.upload(store, "bench", "broker-a/store"))
        emit(step="upload", seconds=round(t, 2))
        options = {"endpoint": server.endpoint, "scheme": "http", "anonymous": True, "region": "us-east-1"}
        s3 = server.filesystem()
        logs = sorted(p.name for p in (store / "commitlog").iterdir())

        with RocketStore.open(store) as s:
            valid_end, log_size = s.max_phy_offset(), s.sizes.commit_log_file_size
            cq_size = s.sizes.consume_queue_file_size

        def raw_get():
            """The commit log's valid bytes by sequential ranged GETs: what a scan must fetch at least."""
            total = 0
            for name in logs:
                size = min(log_size, valid_end - int(name))
                with s3.open_input_file(f"bench/broker-a/store/commitlog/{name}") as f:
                    for at in range(0, max(size, 0), STEP):
                        total += len(f.read_at(min(STEP, size - at), at))
            return total

        def scan(location, fs=None):
            """A full scan as an executor runs it: the valid end known from planning (no recovery walk)."""
            with RocketStore.open(location, fs_options=fs, valid_end=valid_end, lazy_queues=True,
                                  consume_queue_file_size=cq_size) as s:
                return valid_end, sum(b.num_rows for b in s.scan_raw(columns=("body",)))

        raw_get()  # warm the server's caches as the local page cache is warm
        t_raw, raw_bytes = timed(raw_get, repeat=2)
        t_remote, (end, rows) = timed(lambda: scan(uri, options), repeat=2)
        t_local, (end_local, rows_local) = timed(lambda: scan(store), repeat=2)
        assert (end, rows) == (end_local, rows_local), ((end, rows), (end_local, rows_local))
        emit(step="raw_get", seconds=round(t_raw, 3), bytes=raw_bytes, mib_s=round(raw_bytes / t_raw / 2**20, 1))
        emit(step="rocketstore_scan_s3", seconds=round(t_remote, 3), valid_bytes=end, rows=rows,
             mib_s=round(end / t_remote / 2**20, 1))
        emit(step="rocketstore_scan_local", seconds=round(t_local, 3), mib_s=round(end / t_local / 2**20, 1))
        scan_vs_raw = (end / t_remote) / (raw_bytes / t_raw)

        with counting() as cost:  # as an executor: opened with the planned valid end, nothing fetched before
            with RocketStore.open(uri, fs_options=options, valid_end=valid_end, lazy_queues=True,
                                  consume_queue_file_size=cq_size) as s:
                t_tag, rare = timed(lambda: sum(b.num_rows for b in s.read_queues(
                    [("bench", q, None, None) for q in range(args.queues)], tags="rare", columns=("body",))))
        emit(step="tag_1pct_s3", seconds=round(t_tag, 3), rows=rare, fetched=cost.remote_bytes,
             requests=cost.remote_requests, fraction=round(cost.remote_bytes / store_bytes, 4))
        with RocketStore.open(uri, fs_options=options) as s:
            key = f"key-{args.messages // 2}"
            s.query_by_key("bench", key)
            t_key, found = timed(lambda: s.query_by_key("bench", key), repeat=3)
            emit(step="key_lookup_s3_warm", seconds=round(t_key, 4), rows=found.num_rows)
        with RocketStore.open(uri, fs_options=options) as s:
            t_cold, found = timed(lambda: s.query_by_key("bench", key))
            emit(step="key_lookup_s3_cold_open", seconds=round(t_cold, 4), rows=found.num_rows)
        t_spark, t_spark_local = _spark_scans(uri, store, options)
        emit(step="spark_full_scan_s3", seconds=round(t_spark, 3), mib_s=round(end / t_spark / 2**20, 1),
             vs_raw_get=round((end / t_spark) / (raw_bytes / t_raw), 2))
        emit(step="spark_full_scan_local", seconds=round(t_spark_local, 3))
        print(f"spark_scan_vs_raw_get={(end / t_spark) / (raw_bytes / t_raw):.2f} "
              f"scan_vs_raw_get={scan_vs_raw:.2f} tag1pct_fetched={cost.remote_bytes / store_bytes:.4f} "
              f"key_lookup_s={t_key:.3f} scan_remote_vs_local={t_local / t_remote:.2f}")
    finally:
        server.stop()
        del pafs


def _spark_scans(uri, store, options):
    """``sum(length(body))`` through Spark from S3 and from the local files (best of three after a warm-up)."""
    from common import spark_session
    from pyspark.sql import functions as F

    spark = spark_session("bench-remote")
    fs = {f"fs.{k}": str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}

    def total(path, opts):
        df = spark.read.format("rocketstore").schema("body binary").options(**opts).load(str(path))
        return df.agg(F.sum(F.length("body"))).first()[0]

    total(uri, fs)
    t_remote, n_remote = timed(lambda: total(uri, fs), repeat=3)
    total(store, {})
    t_local, n_local = timed(lambda: total(store, {}), repeat=3)
    assert n_remote == n_local, (n_remote, n_local)
    spark.stop()
    return t_remote, t_local


def _generate(store, n, queues, RocketStore):
    with RocketStore.open_writer(store) as writer:
        for table in message_tables(n, queues=queues):
            writer.append(table)


if __name__ == "__main__":
    t0 = time.time()
    main()
    emit(step="total", seconds=round(time.time() - t0, 1))
