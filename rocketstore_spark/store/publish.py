"""Publishing staged batches as one all-or-nothing job (the Spark sink's driver-side commit).

Tasks encode their messages into ``.rocketstore/staging/<job>/`` (:func:`stage`). The driver then calls
:func:`publish_staged`, which takes the store's lock, records a journal, appends every staged batch in the
order given (offsets and store times assigned here), creates the queues of new topics, flushes, marks the
journal done (the commit point) and cleans up. :func:`discard_staged` is the abort: the store is untouched.

``ROCKETSTORE_FAULT_AT=<step>`` kills the process at a named step; the crash-safety tests use it to prove
that every step is recoverable: ``journal``, ``part-<i>``, ``before-done``, ``after-done``.
"""

from __future__ import annotations

import os
import shutil
import signal
import uuid
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pyarrow as pa

from . import layout as L
from .appender import StoreWriter, encode_table
from .encoded_batch import DATA_SUFFIX, META_SUFFIX, EncodedBatch
from .encoder import UniqKeyFactory
from .journal import (TRASH_DIR, journal_path, last_sink_batch, mark_done, meta_dir, move_to_trash,
                      record_sink_batch, remove_empty_dirs, snapshot, staging_dir, write_journal)
from .locking import StoreLock

FAULT_ENV = "ROCKETSTORE_FAULT_AT"


def fault_point(step: str) -> None:
    """Kill this process at ``step`` when the fault-injection variable names it (tests only)."""
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


STAGE_FILE_ROWS = 200_000  # messages per staging file: bounds the metadata a task holds in memory
# bytes per staging file: publish_staged deletes each file as soon as it is in the commit log, so the page cache
# it frees is reused at once for the next commit-log pages; first-touching fresh memory is what copying costs
STAGE_FILE_BYTES = 64 * 1024 * 1024


def stage(root, job_id: str, name: str, tables: Iterable[pa.Table], *, store_host: str,
          max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, rows_per_file: int = STAGE_FILE_ROWS,
          bytes_per_file: int = STAGE_FILE_BYTES) -> list[str]:
    """Encode ``tables`` into staging files of job ``job_id``; returns the staged stems, in order.

    Each table is encoded on its own (Spark hands over small Arrow batches: encoding them one by one avoids
    concatenating bodies) and appended to the current staging file, which is closed at ``rows_per_file``.
    """
    directory = staging_dir(Path(root), job_id)
    factory = UniqKeyFactory()
    stems: list[str] = []
    current: Optional[_StagingFile] = None
    try:
        for table in tables:
            if table.num_rows == 0:
                continue
            batch = encode_table(table, store_host=store_host, uniq_factory=factory,
                                 max_message_size=max_message_size)
            if current is None:
                directory.mkdir(parents=True, exist_ok=True)
                current = _StagingFile(directory / f"{name}-{len(stems):06d}")
            current.add(batch)
            if current.rows >= rows_per_file or current.bytes >= bytes_per_file:
                stems.append(current.close())
                current = None
        if current is not None:
            stems.append(current.close())
            current = None
    finally:
        if current is not None:  # a failed attempt: its partial file is removed with the staging directory
            current.handle.close()
    return stems


class _StagingFile:
    """One staged ``.rec`` written part by part, and its metadata written when it is closed."""

    def __init__(self, stem: Path):
        self.stem = stem
        self.handle = open(str(stem) + DATA_SUFFIX, "wb")
        self.parts: list[EncodedBatch] = []
        self.rows = 0
        self.bytes = 0

    def add(self, batch: EncodedBatch) -> None:
        self.handle.write(memoryview(batch.data))
        batch.data = np.zeros(0, np.uint8)  # written: keep only the metadata
        self.parts.append(batch)
        self.rows += len(batch)
        self.bytes += int(batch.record_offsets[-1])

    def close(self) -> str:
        # no fsync: staged files are read back by this job's driver only, through the same page cache, and are
        # worthless after a machine crash (the job is rolled back); durability starts at the commit log's flush
        # in publish_staged. Deleted before write-back, most staged bytes never reach the disk at all.
        self.handle.close()
        EncodedBatch.concat_meta(self.parts).save_meta(self.stem)
        return str(self.stem)


def discard_staged(root, job_id: str) -> None:
    """Abort: remove the job's staging directory; the store itself was never touched."""
    shutil.rmtree(staging_dir(Path(root), job_id), ignore_errors=True)


def publish_staged(root, job_id: str, stems: list[str], *, new_topic_queues: Optional[dict] = None,
                   overwrite: bool = False, store_host: str = "127.0.0.1:10911", sizes: Optional[dict] = None,
                   now_ms: Optional[int] = None, sink: Optional[tuple] = None, sync_flush: bool = True) -> dict:
    """Append the staged batches ``stems`` (in order) as one job; see the module docstring.

    ``sink=(sink_id, batch_id)`` makes the publication idempotent per streaming batch: a batch id the sink
    already committed (a replay after a restart) publishes nothing; the batch id is recorded atomically with
    the job (inside its journal).
    """
    root = Path(root)
    sizes = sizes or {}
    lock = StoreLock.acquire(root)
    if sink is not None:
        from .journal import recover_store as _recover
        from .sizes import detect_sizes as _detect

        try:
            _recover(root, _detect(root, **sizes))
            if last_sink_batch(root, sink[0]) >= sink[1]:
                discard_staged(root, job_id)
                return {"job": job_id, "count": 0, "skipped": True}
        except BaseException:
            lock.release()
            raise
    if overwrite:
        from .journal import recover_store
        from .sizes import detect_sizes

        try:
            detected = detect_sizes(root, **sizes)
            recover_store(root, detected)
            sizes = detected.as_options()  # the replaced store keeps its file sizes unless options say otherwise
            write_journal(root, snapshot(root, job_id, 0, {}, root / L.INDEX_DIR, 0, kind="overwrite"))
            fault_point("journal")
            move_to_trash(root, job_id)
        except BaseException:
            lock.release()
            raise
    writer = StoreWriter.open(root, store_host=store_host, lock=lock, recover=not overwrite, **sizes)
    writer.sync_flush = sync_flush
    try:
        batches = [EncodedBatch.load(Path(s)) for s in stems]
        new_topic_queues = dict(new_topic_queues or {})
        if not overwrite:
            write_journal(root, snapshot(root, job_id, writer.next_phy, _touched(writer, batches, new_topic_queues),
                                         root / L.INDEX_DIR, sum(len(b.entry_rec) for b in batches),
                                         sink=list(sink) if sink else None))
            fault_point("journal")
        count = 0
        for i, batch in enumerate(batches):
            writer.append_encoded(batch, now_ms=now_ms)
            _drop_staged(stems[i])
            count += len(batch)
            fault_point(f"part-{i}")
        for topic, queue_nums in new_topic_queues.items():
            writer.ensure_queues(topic, queue_nums)
        writer.flush()
        fault_point("before-done")
        mark_done(root, job_id)
        fault_point("after-done")
        if sink is not None:
            record_sink_batch(root, *sink)
        end = writer.next_phy
    except BaseException:
        writer.abandon()
        raise
    writer.close()  # releases the lock; the next writer's recovery would also finish a done journal
    shutil.rmtree(meta_dir(root) / TRASH_DIR / job_id, ignore_errors=True)
    discard_staged(root, job_id)
    journal_path(root, job_id).unlink(missing_ok=True)
    remove_empty_dirs(meta_dir(root))
    return {"job": job_id, "count": count, "end_phy_offset": end}


def _drop_staged(stem: str) -> None:
    """Delete a staged file once its records are in the commit log. Nothing reads it again: a failure after
    this point rolls the job back from its journal (or Spark aborts it), it never republishes from staging."""
    for suffix in (DATA_SUFFIX, META_SUFFIX):
        Path(stem + suffix).unlink(missing_ok=True)


def _touched(writer: StoreWriter, batches, new_topic_queues) -> dict:
    """'topic/qid' → [max offset before, the queue's files before (None: no directory)] for every queue the
    job writes or creates."""
    keys = set()
    for b in batches:
        rows = np.flatnonzero(b.dispatch)
        keys.update((b.topic_names[int(t)], int(q)) for t, q in set(zip(b.topic_idx[rows].tolist(),
                                                                         b.queue_id[rows].tolist())))
    for topic, n in new_topic_queues.items():
        keys.update((topic, q) for q in range(n))
    cq = writer.root / L.CONSUMEQUEUE_DIR

    def files(directory):
        return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else None

    return {f"{t}/{q}": [writer.queue_next_offset(t, q), files(cq / t / str(q))] for t, q in sorted(keys)}


def new_job_id() -> str:
    return uuid.uuid4().hex
