"""Publishing a staged write job as one all-or-nothing append (the Spark sink's driver-side commit).

Tasks stage their records in ``.rocketstore/staging/<job>/`` (:mod:`.staging`), laid out at the offsets the
store would give them if nothing else were published first. :func:`publish_staged` is the protocol, step by step:

1. take the store's lock, and finish or roll back whatever an interrupted writer left (:mod:`.journal`);
2. a streaming batch the sink already published (a replay after a restart) publishes nothing;
3. for an overwrite, journal it and set the old store aside (renames only, so rollback can bring it back);
4. close the job's reservation: from here no task attempt (a zombie, a speculative copy) can write;
5. load the committed attempts' staged records in commit-log order;
6. journal the store's state before the job (the commit log's end, the touched queues' ends, the index header),
   then move the new topics' consume-queue skeletons that the tasks made into the store (:mod:`.queue_skeleton`);
7. assign queue offsets (the records keep the store times their reservations gave them);
8. lay the records into the commit log:
   * **in place**, when the store still ends where the job was staged, the committed attempts tile the staged
     commit log without a gap, and every record holds the queue offset assigned now (the tasks encoded them final
     at their reservations, :mod:`.reservation`): rename the staged files into ``commitlog/``
     (:mod:`.staged_commitlog`);
   * **by copy** otherwise: every record is copied to its new place, its physical and queue offsets patched
     (:mod:`.commitlog_writer`);
9. write the consume-queue units and the index entries (:mod:`.consume_queue_writer`, :mod:`.index_writer`), and
   create the new topics' queues;
10. flush every file and write the checkpoint;
11. mark the journal done — **the commit point**; a crash before it is rolled back from the journal by the next
    writer (or ``rocketstore recover``), a crash after it is finished;
12. add the job's topics to the broker's topic table (:mod:`..files.topic_config`; the done journal names them,
    so recovery finishes this too), release the lock and remove the staging, trash and journal.

:func:`~.staging.discard_staged` is the abort: the store is never touched. ``ROCKETSTORE_FAULT_AT=<step>`` kills
the process at a named step; the crash-safety tests use it to prove that every step is recoverable: ``journal``,
``adopted``, ``moved``, ``part-<i>``, ``before-done``, ``after-done``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import DiskFullError, RocketStoreError
from ..files.disk_full import is_disk_full, os_cause, with_advice
from ..files.locking import StoreLock
from ..files.sizes import detect_sizes
from ..files.store_files import fsync_path, is_temporary
from ..files.topic_config import queue_dir_counts, register_topics, topics_path, topics_to_register
from ..files.variant import refuse_variant_writes
from ..format import layout as L
from .appender import StoreWriter
from .encoded_batch import EncodedBatch
from .journal import STATE_DONE, mark_done, snapshot, write_journal
from .placement import place_records
from .queue_skeleton import adopt_skeletons
from .reservation import close_job, staged_commitlog_dir
from .rollback import move_to_trash
from .sink_batches import last_sink_batch, record_sink_batch
from .staged_commitlog import allocate_copies, move_into_store
from .staging import discard_staged
from .store_meta import TRASH_DIR, journal_path, meta_dir, remove_empty_dirs, staging_dir
from .write_recovery import recover_store

log = logging.getLogger("rocketstore_spark")
FAULT_ENV = "ROCKETSTORE_FAULT_AT"


def fault_point(step: str) -> None:
    """Kill this process at ``step`` when the fault-injection variable names it (tests only)."""
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def publish_staged(root, job_id: str, stems: list[str], **options) -> dict:
    """Publish the staged metadata files ``stems`` of job ``job_id`` as one job; see the module docstring and
    :func:`_publish_staged` for the options.

    A full disk (or quota) before the commit point raises :class:`~...errors.DiskFullError` after rolling the
    job back (the store is as before it); if the rollback itself cannot finish, its journal stays and the error
    says to run ``rocketstore recover``. Past the commit point the job is in the store: a full disk while
    finishing it is logged, and recovery finishes it.
    """
    try:
        return _publish_staged(root, job_id, stems, **options)
    except (OSError, DiskFullError) as e:
        error = with_advice(e, _disk_full_advice(Path(root), job_id))
        if error is None:
            raise
        raise error from os_cause(e)


def _disk_full_advice(root: Path, job_id: str) -> str:
    """What the store holds after a full disk stopped job ``job_id``, and what to do."""
    path = journal_path(root, job_id)
    try:
        state = json.loads(path.read_text())["state"] if path.exists() else None
    except (OSError, ValueError, KeyError):
        state = "unreadable"
    if state is None:
        return (f"the job was rolled back: the store {root} is as it was before the job; free space on that "
                "filesystem and run the job again")
    if state == STATE_DONE:
        return (f"the job is committed (its messages are in the store), but finishing it failed; free space, then run "
                f"`rocketstore recover {root}` to finish it (do not run the job again)")
    return (f"the job was stopped before its commit point, and rolling it back needs room too; free space on that "
            f"filesystem, then run `rocketstore recover {root}`, which rolls the job back (journal {path})")


def _publish_staged(root, job_id: str, stems: list[str], *, new_topic_queues: Optional[dict] = None,
                    overwrite: bool = False, store_host: str = "127.0.0.1:10911", sizes: Optional[dict] = None,
                    sink: Optional[tuple] = None, sync_flush: bool = True) -> dict:
    """:func:`publish_staged` without the full-disk advice.

    ``sink=(sink_id, batch_id)`` makes the publication idempotent per streaming batch: a batch id the sink
    already committed (a replay after a restart) publishes nothing; the batch id is recorded atomically with
    the job (inside its journal).
    """
    root = Path(root)
    lock = StoreLock.acquire(root)  # 1.
    try:
        refuse_variant_writes(root)  # before recovery touches anything: only the default layout is written
        detected = detect_sizes(root, **(sizes or {}))
        recover_store(root, detected)
        if sink is not None and last_sink_batch(root, sink[0]) >= sink[1]:  # 2.
            discard_staged(root, job_id)
            lock.release()
            return {"job": job_id, "count": 0, "skipped": True}
        if overwrite:  # 3.
            write_journal(root, snapshot(root, job_id, 0, {}, root / L.INDEX_DIR, 0, kind="overwrite"), sync=sync_flush)
            fault_point("journal")
            move_to_trash(root, job_id)
        # the store's file sizes stay as detected (an overwritten store keeps them unless options say otherwise)
        detected.require_index_sizes()
        writer = StoreWriter.open(root, store_host=store_host, lock=lock, recover=False, sizes=detected)
    except BaseException:
        lock.release()
        raise
    writer.sync_flush = sync_flush
    writer.register_topics_on_close = False  # registered at the commit point (step 12)
    new_topic_queues = dict(new_topic_queues or {})
    try:
        reserved = close_job(staging_dir(root, job_id))  # 4.
        staged = staged_commitlog_dir(staging_dir(root, job_id))
        file_size = reserved[2] if reserved else writer.sizes.commit_log_file_size
        chunks = _in_commitlog_order([EncodedBatch.load(Path(s), staged, file_size) for s in stems])  # 5.
        if not overwrite:  # 6. (an overwrite's journal records the store it set aside)
            write_journal(root, snapshot(root, job_id, writer.next_phy, _touched(writer, chunks, new_topic_queues),
                                         root / L.INDEX_DIR, sum(len(c.entry_rec) for c in chunks),
                                         sink=list(sink) if sink else None), sync=sync_flush)
            fault_point("journal")
        adopted = adopt_skeletons(staging_dir(root, job_id), writer.root / L.CONSUMEQUEUE_DIR,
                                  writer.sizes.consume_queue_file_size, new_topic_queues, _dispatched_queues(chunks))
        writer.consume_queues.adopted(adopted)
        fault_point("adopted")
        # 7. the queue offsets the store gives the records now; their store times are the ones they were staged with
        stamps = [(writer.offsets.assign(c), c.store_ts) for c in chunks]
        in_place = _staged_in_place(writer, reserved, chunks, stamps)  # 8. and 9.
        if in_place:
            _publish_in_place(writer, staged, reserved, chunks, stamps)
        else:
            _publish_by_copy(writer, chunks, stamps)
        writer.consume_queues.create_queues(new_topic_queues)
        writer.flush()  # 10.
        register = topics_to_register(root, _written_topic_queues(root, chunks, new_topic_queues))
        fault_point("before-done")
        mark_done(root, job_id, register, sync=sync_flush)  # 11.
        fault_point("after-done")
        end = writer.next_phy
    except BaseException as e:
        if journal_path(root, job_id).exists():
            _abandon(writer, e)
        else:  # stopped before the journal (a full disk writing it): nothing but this writer's abort marker changed
            writer.close_after_failure()
            (root / L.ABORT_FILE).unlink(missing_ok=True)
        raise
    try:
        if sink is not None:
            record_sink_batch(root, *sink, sync=sync_flush)  # the done journal names the batch too: recovery does
        registered = _register_topics_after_commit(root, job_id, register, sync_flush)  # 12.
        writer.close()  # releases the lock; the next writer's recovery would also finish a done journal
    except BaseException as e:
        writer.close_after_failure()  # the done journal stays: the next writer or `rocketstore recover` finishes
        if not isinstance(e, DiskFullError) and not is_disk_full(e):
            raise
        # past the commit point a failure must not report the committed job as failed (a rerun would duplicate
        # it): the done journal stays, and recovery finishes the job
        log.warning("job %s is committed (%d messages), but finishing it failed: %s; free space, then run "
                    "`rocketstore recover %s` (or write again) to finish it", job_id, sum(len(c) for c in chunks),
                    e, root)
        return {"job": job_id, "count": sum(len(c) for c in chunks), "end_phy_offset": end, "in_place": in_place,
                "topics_added": sorted(register), "finished": False}
    shutil.rmtree(meta_dir(root) / TRASH_DIR / job_id, ignore_errors=True)
    discard_staged(root, job_id)
    if registered:
        journal_path(root, job_id).unlink(missing_ok=True)
    remove_empty_dirs(meta_dir(root))
    return {"job": job_id, "count": sum(len(c) for c in chunks), "end_phy_offset": end, "in_place": in_place,
            "topics_added": sorted(register)}


def _abandon(writer: StoreWriter, error: BaseException) -> None:
    """Roll back after ``error``; a rollback that fails too (the disk is still full) leaves the journal to
    ``rocketstore recover`` and must not hide ``error``."""
    try:
        writer.abandon()
    except (OSError, RocketStoreError) as e:
        log.warning("rolling back after %s failed: %s; the journal stays for `rocketstore recover %s`",
                    error, e, writer.root)


def _register_topics_after_commit(root: Path, job_id: str, register: dict, sync: bool) -> bool:
    """Past the commit point a failure must not report the committed job as failed: a topic table that cannot
    be written is logged and its journal kept, so that recovery adds the topics."""
    try:
        register_topics(root, register, sync=sync)
        return True
    except (RocketStoreError, OSError) as e:
        log.warning("job %s is committed, but its topics %s could not be added to %s (%s); the journal is "
                    "kept so that `rocketstore recover` (or the next write) adds them", job_id, sorted(register),
                    topics_path(root), e)
        return False


def _written_topic_queues(root: Path, chunks: list[EncodedBatch], new_topic_queues: dict) -> dict:
    """Topic → queues for every topic the job put into a consume queue: the new topics' queue numbers, else
    the queue directories the topic has now."""
    written = set(new_topic_queues)
    for chunk in chunks:  # the dispatched rows' queues, grouped once for offsets and queue writes already
        written.update(topic for topic, _ in chunk.queue_groups()[2])
    dirs = queue_dir_counts(root, written)
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


def _staged_in_place(writer: StoreWriter, reserved, chunks: list[EncodedBatch], stamps) -> bool:
    """True when the staged records are exactly what appending the chunks now would give: the store ends where
    the job was staged, with the same file size, the committed attempts leave no gap and nothing after, and every
    record holds the queue offset the store assigns it now (``stamps``: each chunk's queue offsets, store
    times)."""
    if reserved is None or not chunks:
        return False
    if not all(np.array_equal(c.staged_queue_offset, queue_offset) for c, (queue_offset, _) in zip(chunks, stamps)):
        return False
    start, end, file_size = reserved
    if start != writer.next_phy or file_size != writer.sizes.commit_log_file_size:
        return False
    expected = place_records(start, np.concatenate([c.lengths for c in chunks]), file_size)
    return expected.end == end and np.array_equal(expected.phy, np.concatenate([c.phy for c in chunks]))


def _publish_in_place(writer: StoreWriter, staged: Path, reserved, chunks: list[EncodedBatch], stamps) -> None:
    start, end, file_size = reserved
    # The staged records are final: the files become the store's as they are. The index needs only key hashes,
    # offsets and store times, and touches only index files: a second thread builds it while this one moves the
    # files and writes the consume queues (numpy and the native kernels release the GIL). A crash at any point is
    # rolled back from the journal as a whole either way.
    # the commit log's copies get their room first: a full disk then fails in the commit log, before the index
    allocate_copies(staged, writer.root / L.COMMITLOG_DIR, start, end, file_size, forced=writer.sync_flush)
    index_full = _FirstDiskFull()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketstore-index") as pool:
        indexing = pool.submit(index_full.watch, _index_chunks, writer, chunks, stamps)
        try:
            for path in move_into_store(staged, writer.root / L.COMMITLOG_DIR, start, end, file_size,
                                        forced=writer.sync_flush):
                writer.commitlog.adopt(path)  # flushed with the store's other files
            if writer.sync_flush:  # SYNC_FLUSH: the renames themselves must survive a power loss too
                fsync_path(writer.root / L.COMMITLOG_DIR)
            fault_point("moved")
            for i, (chunk, (queue_offset, store_ts)) in enumerate(zip(chunks, stamps)):
                writer.dispatch(chunk, chunk.phy, queue_offset, store_ts, index=False)
                fault_point(f"part-{i}")
            writer.consume_queues.write_pending()  # while the index is still being built (else part of the flush)
        except DiskFullError as e:
            # both threads may find the disk full; the error names the step that found it first
            index_full.raise_if_before(time.monotonic_ns(), indexing, e)
            raise
    indexing.result()  # re-raises an indexing error


class _FirstDiskFull:
    """When the index thread found the disk full: lets the publisher report that error rather than its own
    when the index's came first (a full disk fails every later step too, and the first names the cause)."""

    def __init__(self) -> None:
        self.at_ns: Optional[int] = None

    def watch(self, fn, *args) -> None:
        try:
            fn(*args)
        except DiskFullError:
            self.at_ns = time.monotonic_ns()
            raise

    def raise_if_before(self, at_ns: int, future, later: DiskFullError) -> None:
        error = future.exception()  # waits for the index thread
        if isinstance(error, DiskFullError) and self.at_ns is not None and self.at_ns <= at_ns:
            error.add_note(f"(the publication then found the disk full too: {later})")
            raise error


def _publish_by_copy(writer: StoreWriter, chunks: list[EncodedBatch], stamps) -> None:
    for i, (chunk, (queue_offset, store_ts)) in enumerate(zip(chunks, stamps)):
        writer.write_assigned(chunk, queue_offset, store_ts)
        fault_point(f"part-{i}")


def _index_chunks(writer: StoreWriter, chunks: list[EncodedBatch], stamps) -> None:
    writer.index_batches(chunks, [chunk.phy for chunk in chunks], [store_ts for _, store_ts in stamps])


def _dispatched_queues(batches) -> dict[str, set]:
    """Topic → the queue ids the batches' records go to."""
    out: dict[str, set] = {}
    for b in batches:
        for topic, qid in b.queue_groups()[2]:  # grouped once, reused by offset assignment and queue writes
            out.setdefault(topic, set()).add(qid)
    return out


def _touched(writer: StoreWriter, batches, new_topic_queues) -> dict:
    """'topic/qid' → [max offset before, the queue's files before (None: no directory)] for every queue the
    job writes or creates."""
    keys = {(t, q) for t, qids in _dispatched_queues(batches).items() for q in qids}
    for topic, n in new_topic_queues.items():
        keys.update((topic, q) for q in range(n))
    cq = str(writer.root / L.CONSUMEQUEUE_DIR)
    present: dict = {}  # topic → its queue directories (listed once per topic: thousands of new queues have none)

    def files(topic, qid):  # plain strings: thousands of queues, no path objects
        if topic not in present:
            try:
                present[topic] = set(os.listdir(f"{cq}/{topic}"))
            except (FileNotFoundError, NotADirectoryError):
                present[topic] = set()
        if str(qid) not in present[topic]:
            return None
        try:
            return sorted(name for name in os.listdir(f"{cq}/{topic}/{qid}") if not is_temporary(name))
        except (FileNotFoundError, NotADirectoryError):
            return None

    return {f"{t}/{q}": [writer.queue_next_offset(t, q), files(t, q)] for t, q in sorted(keys)}


def new_job_id() -> str:
    return uuid.uuid4().hex
