"""Shared pieces of the benchmarks: a vectorised message generator and a local Spark session."""

import json
import os
import sys
import time
from typing import Optional

import numpy as np
import pyarrow as pa


def spark_session(app: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]")).appName(app)
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
             .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def message_tables(n: int, body_bytes: int = 1024, rare_fraction: float = 0.01, chunk: int = 200_000,
                   queues: int = 8, seed: int = 7):
    """Tables of ``n`` messages: topic 'bench', ``queues`` queues, ~1% tagged 'rare' (the rest 'common'),
    one unique key each, random bodies of ``body_bytes``."""
    rng = np.random.default_rng(seed)
    base_ts = int(time.time() * 1000) - n
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        seq = np.arange(start, start + m)
        data = rng.integers(0, 256, size=m * body_bytes, dtype=np.uint8)
        offsets = np.arange(0, (m + 1) * body_bytes, body_bytes, dtype=np.int32)
        body = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        rare = rng.random(m) < rare_fraction
        yield pa.table({
            "topic": pa.array(np.full(m, "bench", dtype=object), pa.string()),
            "queueId": pa.array((seq % queues).astype(np.int32)),
            "tags": pa.array(np.where(rare, "rare", "common").astype(object), pa.string()),
            "keys": pa.array([[f"key-{i}"] for i in seq], pa.list_(pa.string())),
            "body": body,
            "storeTimestamp": pa.array(base_ts + seq, pa.int64()),
        })


def timed(fn, repeat: int = 1):
    best = None
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def interleaved(fns: dict, rounds: int = 3, prepare: Optional[dict] = None) -> dict:
    """Best time and last result of each of ``fns`` (name → callable), run in turn, round after round;
    ``prepare`` (name → callable) runs untimed before each run of that name (removing an earlier output).

    A shared machine's speed can drift within minutes; timing one candidate's repeats and then
    the other's would fold that drift into their ratio, interleaving spreads it over both.
    """
    best: dict = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            if prepare and name in prepare:
                prepare[name]()
            elapsed, result = timed(fn)
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, result)
    return best


def emit(**fields):
    print(json.dumps(fields), flush=True)


def spark_python_peaks_mib() -> dict:
    """Peak resident size (VmHWM, MiB) of every live Python process Spark started (its worker daemon, the
    workers it forked, the planning workers), by role: what a read cost in memory, executors and planner alike.
    Resident pages of memory-mapped store files count here too."""
    peaks: dict = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            if "pyspark" not in cmd or "python" not in cmd.split(" ", 1)[0]:
                continue  # not a Python process Spark started (the JVM's command line names pyspark too)
            with open(f"/proc/{pid}/status") as fh:
                hwm = int(fh.read().split("VmHWM:")[1].split()[0]) / 1024
        except (OSError, IndexError, ValueError):
            continue
        role = cmd.split()[-1].rsplit(".", 1)[-1]
        peaks[role] = round(max(peaks.get(role, 0.0), hwm))
    return peaks


def register_floor_source(spark, rows: int, body_bytes: int = 1024, partitions: int = 8, batch_rows: int = 10_000):
    """A Python data source ``floor`` that yields ``rows`` bodies of ``body_bytes`` from memory, doing no work
    of its own: what Spark's Python data source path costs by itself, the ceiling for any Python source."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            share = rows // partitions + (1 if partition.value < rows % partitions else 0)
            data = np.zeros(batch_rows * body_bytes, dtype=np.uint8)
            offsets = np.arange(0, (batch_rows + 1) * body_bytes, body_bytes, dtype=np.int32)
            full = pa.RecordBatch.from_arrays([pa.Array.from_buffers(
                pa.binary(), batch_rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])], names=["body"])
            for start in range(0, share, batch_rows):
                yield full.slice(0, min(batch_rows, share - start))

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "floor"

        def schema(self):
            return "body binary"

        def reader(self, schema):
            return FloorReader()

    spark.dataSource.register(FloorSource)


def register_floor_sink(spark):
    """A Python data source ``floorsink`` whose Arrow writer only receives its batches: what Spark's Python
    write path costs by itself (rows to Arrow in the JVM, the socket, a task and a commit), the ceiling for any
    Python sink."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Received(WriterCommitMessage):
        rows: int

    class FloorWriter(DataSourceArrowWriter):
        def write(self, iterator):
            return Received(sum(batch.num_rows for batch in iterator))

        def commit(self, messages):
            pass

    class FloorSink(DataSource):
        @classmethod
        def name(cls):
            return "floorsink"

        def writer(self, schema, overwrite):
            return FloorWriter()

    spark.dataSource.register(FloorSink)


def fresh_output(path: str):
    """A ``prepare`` step for :func:`interleaved`: move a write's earlier output aside (removed by
    :func:`remove_set_aside` once the measurements are done), let the disk settle (``sync``) and drop the set-aside
    files' pages from the page cache (:func:`drop_cached`), so that neither deleting thousands of files, nor writing
    back the last run's bytes, nor the memory the last runs' outputs hold is timed as part of the next write.

    Removing is deferred because ext4 skips the inode numbers freed in the last minute when it allocates new ones
    (``recently_deleted``: one lookup per freed inode, for every file or directory created): right after the
    2,000 queue directories and files of the last run were deleted, each new one cost 0.5-0.7 ms on the benchmark
    machine, a cost of the benchmark's clean-up rather than of the write."""
    def prepare():
        aside = None
        if os.path.lexists(path):
            aside = f"{path}{SET_ASIDE}{time.time_ns()}"
            os.rename(path, aside)
        os.sync()
        if aside is not None:
            drop_cached(aside)
    return prepare


def drop_cached(path: str) -> None:
    """Drop the (clean: call after ``sync``) page-cache pages of the file ``path``, or of every file under it.

    Runs one after another otherwise fill the page cache with outputs nobody reads again (the production write
    benchmark reached ~19 GB of used and cached memory). On the benchmark VM memory is costly to touch once the
    guest has used a lot of it or has given it back to its host (free page reporting): such pages cost ~10 us per
    4 KiB (a 5 GB/s page-cache write became 0.4 GB/s), so whichever writer ran later paid for the earlier runs'
    outputs. Dropping the pages keeps each write in the same memory state."""
    paths = [path] if os.path.isfile(path) else [os.path.join(d, name) for d, _, names in os.walk(path)
                                                  for name in names]
    for file in paths:
        try:
            fd = os.open(file, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def drop_sealed_commitlog(store: str) -> None:
    """:func:`drop_cached` for the commit-log files of ``store`` before its newest (after ``sync``): a store
    appended to run after run keeps its newest files in the page cache, as a live broker's store does, while its
    growth does not fill the memory (see :func:`drop_cached`)."""
    directory = os.path.join(store, "commitlog")
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in names[:-1]:
        drop_cached(os.path.join(directory, name))


#: the suffix of an output :func:`fresh_output` moved aside
SET_ASIDE = ".set-aside-"


def remove_set_aside(path: str) -> None:
    """Remove the earlier outputs :func:`fresh_output` moved aside from ``path``."""
    import glob
    import shutil

    for old in glob.glob(f"{glob.escape(path)}{SET_ASIDE}*"):
        shutil.rmtree(old, ignore_errors=True)
