"""Publishing a staged write job as one all-or-nothing append (the Spark sink's driver-side commit).

Tasks stage their records in ``.rocketstore/staging/<job>/`` (:mod:`.staging`), laid out at the offsets the
store would give them if nothing else were published first. :func:`publish_staged` takes the store's lock,
closes the job's reservation (no zombie attempt can write any more), records a journal and then publishes the
committed attempts' records in commit-log order:

* **in place**, when the store still ends where the job was staged and the committed attempts tile the staged
  commit log without a gap (no attempt of the job failed after reserving room): queue offsets and store
  times are patched into the staged files (the tasks wrote the physical offsets), which then become the
  store's commit-log files by rename (only the job's part of a store file that already existed is copied into
  it);
* **by copy** otherwise: every record is copied into the commit log at its new place (what the appender does).

Then the consume queues and the index are written, new topics' queues created, everything flushed, and the
journal marked done (the commit point). A crash before that point is rolled back from the journal by the next
writer (or ``rocketstore recover``); :func:`discard_staged` is the abort: the store is never touched. Right
after the commit point the topics the job wrote join the broker's topic table (:mod:`.topic_config`); the
done journal names them, so recovery finishes that too.

``ROCKETSTORE_FAULT_AT=<step>`` kills the process at a named step; the crash-safety tests use it to prove
that every step is recoverable: ``journal``, ``moved``, ``part-<i>``, ``before-done``, ``after-done``.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import RocketStoreError, StoreFormatError
from ..format import layout as L
from .appender import StoreWriter
from .encoded_batch import EncodedBatch
from .journal import (TRASH_DIR, journal_path, last_sink_batch, mark_done, meta_dir, move_to_trash,
                      record_sink_batch, remove_empty_dirs, snapshot, staging_dir, write_journal)
from ..files.locking import StoreLock
from .placement import patch_longs, place_records
from .reservation import close_job, staged_commitlog_dir
from .staging import discard_staged
from ..files.store_files import is_temporary
from ..files.topic_config import queue_dir_counts, register_topics, topics_path, topics_to_register

log = logging.getLogger("rocketstore_spark")
FAULT_ENV = "ROCKETSTORE_FAULT_AT"
COPY_CHUNK_BYTES = 64 * 1024 * 1024


def fault_point(step: str) -> None:
    """Kill this process at ``step`` when the fault-injection variable names it (tests only)."""
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def publish_staged(root, job_id: str, stems: list[str], *, new_topic_queues: Optional[dict] = None,
                   overwrite: bool = False, store_host: str = "127.0.0.1:10911", sizes: Optional[dict] = None,
                   now_ms: Optional[int] = None, sink: Optional[tuple] = None, sync_flush: bool = True) -> dict:
    """Publish the staged metadata files ``stems`` of job ``job_id`` as one job; see the module docstring.

    ``sink=(sink_id, batch_id)`` makes the publication idempotent per streaming batch: a batch id the sink
    already committed (a replay after a restart) publishes nothing; the batch id is recorded atomically with
    the job (inside its journal).
    """
    root = Path(root)
    sizes = sizes or {}
    lock = StoreLock.acquire(root)
    if sink is not None:
        from .journal import recover_store as _recover
        from ..files.sizes import detect_sizes as _detect

        try:
            _recover(root, _detect(root, **sizes))
            if last_sink_batch(root, sink[0]) >= sink[1]:
                discard_staged(root, job_id)
                lock.release()
                return {"job": job_id, "count": 0, "skipped": True}
        except BaseException:
            lock.release()
            raise
    if overwrite:
        from .journal import recover_store
        from ..files.sizes import detect_sizes

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
    writer.register_topics_on_close = False  # registered below, with the commit point
    try:
        # closed only now: opening the writer removes the staging of closed jobs (see journal.recover_store)
        reserved = close_job(staging_dir(root, job_id))
        file_size = reserved[2] if reserved else writer.sizes.commit_log_file_size
        staged = staged_commitlog_dir(staging_dir(root, job_id))
        chunks = _in_commitlog_order([EncodedBatch.load(Path(s), staged, file_size) for s in stems])
        new_topic_queues = dict(new_topic_queues or {})
        if not overwrite:
            write_journal(root, snapshot(root, job_id, writer.next_phy, _touched(writer, chunks, new_topic_queues),
                                         root / L.INDEX_DIR, sum(len(c.entry_rec) for c in chunks),
                                         sink=list(sink) if sink else None))
            fault_point("journal")
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms  # the job's store time: its commit
        in_place = _staged_in_place(writer, reserved, chunks)
        if in_place:
            _publish_in_place(writer, staged, reserved, chunks, now_ms)
        else:
            for i, chunk in enumerate(chunks):
                writer.append_encoded(chunk, now_ms=now_ms)
                fault_point(f"part-{i}")
        count = sum(len(c) for c in chunks)
        for topic, queue_nums in new_topic_queues.items():
            writer.ensure_queues(topic, queue_nums)
        writer.flush()
        register = topics_to_register(root, _written_topic_queues(root, chunks, new_topic_queues))
        fault_point("before-done")
        mark_done(root, job_id, register)
        fault_point("after-done")
        if sink is not None:
            record_sink_batch(root, *sink)
        end = writer.next_phy
    except BaseException:
        writer.abandon()
        raise
    try:  # past the commit point: a failure here must not report the committed job as failed
        register_topics(root, register)
        registered = True
    except (RocketStoreError, OSError) as e:
        log.warning("job %s is committed, but its topics %s could not be added to %s (%s); the journal is "
                    "kept so that `rocketstore recover` (or the next write) adds them", job_id, sorted(register),
                    topics_path(root), e)
        registered = False
    writer.close()  # releases the lock; the next writer's recovery would also finish a done journal
    shutil.rmtree(meta_dir(root) / TRASH_DIR / job_id, ignore_errors=True)
    discard_staged(root, job_id)
    if registered:
        journal_path(root, job_id).unlink(missing_ok=True)
    remove_empty_dirs(meta_dir(root))
    return {"job": job_id, "count": count, "end_phy_offset": end, "in_place": in_place,
            "topics_added": sorted(register)}


def _written_topic_queues(root: Path, chunks: list[EncodedBatch], new_topic_queues: dict) -> dict:
    """Topic → queues for every topic the job put into a consume queue: the new topics' queue numbers, else
    the queue directories the topic has now."""
    written = set(new_topic_queues)
    for chunk in chunks:
        rows = np.flatnonzero(chunk.dispatch)
        written.update(chunk.topic_names[int(i)] for i in np.unique(chunk.topic_idx[rows]).tolist())
    dirs = queue_dir_counts(root)
    return {t: max(int(new_topic_queues.get(t, 0)), dirs.get(t, 0)) for t in written}


def _in_commitlog_order(batches: list[EncodedBatch]) -> list[EncodedBatch]:
    """The staged reservations of all batches in commit-log order (tasks reserve interleaved), consecutive
    reservations of one batch merged."""
    pieces = sorted((int(b.phy[lo]), i, lo, hi) for i, b in enumerate(batches) for lo, hi in b.chunks())
    merged: list[list[int]] = []
    for _, i, lo, hi in pieces:
        if merged and merged[-1][0] == i and merged[-1][2] == lo:
            merged[-1][2] = hi
        else:
            merged.append([i, lo, hi])
    return [batches[i].slice_rows(lo, hi) for i, lo, hi in merged]


def _staged_in_place(writer: StoreWriter, reserved, chunks: list[EncodedBatch]) -> bool:
    """True when the staged layout is exactly what appending the chunks now would give: the store ends where
    the job was staged, with the same file size, and the committed attempts leave no gap and nothing after."""
    if reserved is None or not chunks:
        return False
    start, end, file_size = reserved
    if start != writer.next_phy or file_size != writer.sizes.commit_log_file_size:
        return False
    expected = place_records(start, np.concatenate([c.lengths for c in chunks]), file_size)
    return expected.end == end and np.array_equal(expected.phy, np.concatenate([c.phy for c in chunks]))


def _publish_in_place(writer: StoreWriter, staged: Path, reserved, chunks: list[EncodedBatch], now_ms: int):
    start, end, file_size = reserved
    stamps = [writer.assign(c, now_ms) for c in chunks]
    # The index needs only key hashes, offsets and store times, and touches only index files: a second
    # thread builds it while this one patches, moves and writes the consume queues (numpy releases the GIL
    # in both). A crash at any point is rolled back from the journal as a whole either way.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketstore-index") as pool:
        indexing = pool.submit(_index_chunks, writer, chunks, stamps)
        _patch_staged(staged, file_size, chunks, stamps)
        for path in _move_into_store(staged, writer.root / L.COMMITLOG_DIR, start, end, file_size):
            writer.track_file(path)  # flushed with the store's other files
        if writer.sync_flush:  # SYNC_FLUSH: the renames themselves must survive a power loss too
            fd = os.open(writer.root / L.COMMITLOG_DIR, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fault_point("moved")
        for i, (chunk, (queue_offset, store_ts)) in enumerate(zip(chunks, stamps)):
            writer.dispatch(chunk, chunk.phy, queue_offset, store_ts, index=False)
            fault_point(f"part-{i}")
    indexing.result()  # re-raises an indexing error


def _index_chunks(writer: StoreWriter, chunks: list[EncodedBatch], stamps) -> None:
    for chunk, (_, store_ts) in zip(chunks, stamps):
        writer.index_batch(chunk, chunk.phy, store_ts)


def _patch_staged(staged: Path, file_size: int, chunks: list[EncodedBatch], stamps) -> None:
    """Fill in queue offset and store time of every staged record, in the staged files (the tasks wrote the
    physical offsets, which are final when the job is published in place)."""
    maps: dict[int, tuple] = {}
    try:
        for chunk, (queue_offset, store_ts) in zip(chunks, stamps):
            file_no = chunk.phy // file_size
            for f in np.unique(file_no).tolist():
                if f not in maps:
                    with open(staged / L.offset_to_file_name(f * file_size), "r+b") as fh:
                        mm = mmap.mmap(fh.fileno(), file_size)
                    maps[f] = (mm, np.frombuffer(mm, dtype=np.uint8))
                rows = np.flatnonzero(file_no == f)
                at = chunk.phy[rows] - f * file_size
                _prefault(maps[f][0], int(at[0]), int(at[-1] + chunk.ts_pos[rows[-1]]) + 8)  # up to the last store time
                patch_longs(maps[f][1], at + L.QUEUE_OFFSET_POSITION, queue_offset[rows])
                patch_longs(maps[f][1], at + chunk.ts_pos[rows], store_ts[rows])
    finally:
        for f in list(maps):
            mm = maps.pop(f)[0]  # the numpy view went with the tuple: the map can close
            mm.close()


MADV_POPULATE_WRITE = 23  # Linux >= 5.14: fault a range in writable with one call (not in Python 3.11's mmap)


def _prefault(mm: mmap.mmap, lo: int, hi: int) -> None:
    """Map the pages of [lo, hi) writable in one system call instead of one page fault per page (the patch
    writes into every record). Only the records' range: the staged file's holes must stay holes."""
    lo -= lo % mmap.PAGESIZE
    hi = min(hi, len(mm))
    try:
        mm.madvise(MADV_POPULATE_WRITE, lo, hi - lo)
    except (OSError, ValueError):  # an older kernel: the patch faults the pages in one by one
        pass


def _move_into_store(staged: Path, commitlog: Path, start: int, end: int, file_size: int) -> list[Path]:
    """Make the staged files the store's: rename each, except that the job's part of a file the store already
    has (the one its end was in) is copied into that file. Returns the store files written."""
    commitlog.mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted(p for p in staged.iterdir() if p.is_file()):
        file_start = int(path.name)
        target = commitlog / path.name
        if target.exists():
            _copy_range(path, target, max(start, file_start) - file_start,
                        min(end, file_start + file_size) - file_start)
            path.unlink()
        else:
            os.replace(path, target)
        out.append(target)
    return out


def _copy_range(source: Path, target: Path, lo: int, hi: int) -> None:
    """Copy bytes [lo, hi) of ``source`` to the same place in ``target`` (in the kernel where it can)."""
    with open(source, "rb") as src, open(target, "r+b") as dst:
        pos = lo
        while pos < hi:
            count = min(hi - pos, COPY_CHUNK_BYTES)
            try:
                done = os.copy_file_range(src.fileno(), dst.fileno(), count, pos, pos)
            except OSError as e:  # no in-kernel copy between these files: copy through memory
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                done = os.pwrite(dst.fileno(), os.pread(src.fileno(), count, pos), pos)
            if done <= 0:
                raise StoreFormatError(f"staged commit log ends early: expected bytes up to {hi}, found {pos}",
                                       str(source), pos)
            pos += done


def _touched(writer: StoreWriter, batches, new_topic_queues) -> dict:
    """'topic/qid' → [max offset before, the queue's files before (None: no directory)] for every queue the
    job writes or creates."""
    keys = set()
    for b in batches:
        rows = np.flatnonzero(b.dispatch)
        pairs = np.unique((b.topic_idx[rows].astype(np.int64) << 32) | b.queue_id[rows].astype(np.int64))
        keys.update((b.topic_names[p >> 32], p & 0xFFFFFFFF) for p in pairs.tolist())
    for topic, n in new_topic_queues.items():
        keys.update((topic, q) for q in range(n))
    cq = writer.root / L.CONSUMEQUEUE_DIR

    def files(directory):
        return sorted(p.name for p in directory.iterdir() if not is_temporary(p)) if directory.is_dir() else None

    return {f"{t}/{q}": [writer.queue_next_offset(t, q), files(cq / t / str(q))] for t, q in sorted(keys)}


def new_job_id() -> str:
    return uuid.uuid4().hex
