"""Consume-queue skeletons: the directories and first files of a job's new topics, made by its tasks.

A job that brings new topics needs a directory per queue and a consume-queue file per queue it writes to
before any unit can be written. Made by the driver inside the commit, thousands of them are thousands of
filesystem metadata operations in a row, each waiting on the filesystem journal while the tasks' freshly
staged commit log is being written back (0.2-0.7 ms each on an ext4 VM). Queue offsets are known only at the
commit, but the skeleton is not: each task makes, beside its staged commit log and in a thread of its own while
it encodes, ``<job>/consumequeue-<file size>/<topic>/<queue id>/`` for every queue of each new topic it writes
and the queue's first file (sparse, full size, no units) for every queue it puts a record into. The tasks of a
job share one skeleton, one topic each: the attempt that makes a topic's directory first makes that topic's
skeleton, the others leave it alone (two tasks creating files in the same directories at once spend most of
their time waiting on each other's directory locks: 1.7 s of CPU per task over 2,110 queues). Retried and
speculative attempts need no coordination: the skeleton holds no data, so it does not matter which attempt made
what, and what a failed attempt left unmade is made by the commit. An attempt still running once the job is
closed (a speculative copy) makes no more files.

At the commit, under the store lock and after the journal has recorded those topics as absent,
:func:`adopt_skeletons` renames each new topic's skeleton into ``consumequeue/`` (one rename per topic) and the
units are then written into files that exist. What a skeleton lacks is made by the driver as before; a rollback
removes adopted topics like any other new queue directory.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from ..format import layout as L
from .encoded_batch import EncodedBatch
from .reservation import reservation_closed
from .store_meta import SKELETON_PREFIX


def skeleton_dir(job_dir: Path, cq_file_size: int) -> Path:
    return Path(job_dir) / f"{SKELETON_PREFIX}{int(cq_file_size)}"


class SkeletonBuilder:
    """Makes one task's part of its job's skeleton in a background thread (``add`` per encoded batch, ``close``
    waits and re-raises the first error)."""

    def __init__(self, job_dir: Path, cq_file_size: Callable[[], int]):
        self._job_dir = Path(job_dir)
        self._cq_file_size = cq_file_size  # looked up on first use: a job without new topics never asks
        self._root: Optional[str] = None
        self._size = 0
        self._queue_counts: dict = {}  # topic → the queues 0..n-1 whose directories this task has asked for
        self._files: set = set()
        self._owned: dict = {}  # topic → whether this task makes its skeleton (only the worker thread uses it)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: list[Future] = []

    def __enter__(self) -> "SkeletonBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, batch: EncodedBatch, new_topic_queues: dict) -> None:
        """Queue the directories of every queue of ``new_topic_queues`` (topic → its number of queues) and the
        first files of the new topics' queues that ``batch`` writes to."""
        if not new_topic_queues:
            return
        dirs = []  # per topic, not per queue: a batch of a job over thousands of queues asks this again and again
        for t, n in new_topic_queues.items():
            made = self._queue_counts.get(t, 0)
            if int(n) > made:
                dirs.extend((t, q) for q in range(made, int(n)))
                self._queue_counts[t] = int(n)
        # the batch's queues, grouped once for this and for publishing (EncodedBatch.queue_groups)
        files = sorted((t, q) for t, q in set(batch.queue_groups()[2]) - self._files if t in new_topic_queues)
        if not dirs and not files:
            return
        self._files.update(files)
        if self._pool is None:
            self._size = int(self._cq_file_size())
            self._root = str(skeleton_dir(self._job_dir, self._size))
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketstore-skeleton")
        self._pending.append(self._pool.submit(self._make, dirs, files))

    def _owns(self, topic: str) -> bool:
        """Whether this task makes ``topic``'s skeleton: it does if it made the topic's directory."""
        owned = self._owned.get(topic)
        if owned is None:
            os.makedirs(self._root, exist_ok=True)
            try:
                os.mkdir(f"{self._root}/{topic}")
                owned = True
            except FileExistsError:  # another attempt makes it (or made it and failed: the commit fills in)
                owned = False
            self._owned[topic] = owned
        return owned

    def _make(self, dirs: list, files: list) -> None:
        root, first = self._root, L.offset_to_file_name(0)
        for topic, qid in dirs:
            if self._owns(topic):
                try:
                    os.mkdir(f"{root}/{topic}/{qid}")
                except FileExistsError:
                    pass
        for topic, qid in files:
            if not self._owns(topic):
                continue
            if reservation_closed(self._job_dir):  # committed or aborted: a late attempt adds nothing
                return
            fd = os.open(f"{root}/{topic}/{qid}/{first}", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size != self._size:  # another attempt's file is left alone (a no-op)
                    os.ftruncate(fd, self._size)
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._pool is None:
            return
        try:
            for future in self._pending:
                future.result()
        finally:
            self._pool.shutdown(wait=True)
            self._pool = None


def adopt_skeletons(job_dir: Path, consumequeue: Path, cq_file_size: int, new_topic_queues: dict,
                    written: dict) -> dict[str, list[int]]:
    """Move the job's skeleton of every topic of ``new_topic_queues`` that the store does not have into
    ``consumequeue``; returns topic → the queue ids whose directories it brought. A skeleton file of a queue the
    job writes nothing to (made by an attempt that was not committed) is removed: the store gets no file that
    holds no unit. ``written``: topic → the queue ids the committed records go to."""
    source = skeleton_dir(job_dir, cq_file_size)
    if not new_topic_queues or not source.is_dir():
        return {}
    consumequeue.mkdir(parents=True, exist_ok=True)
    first = L.offset_to_file_name(0)
    adopted: dict[str, list[int]] = {}
    for topic in sorted(new_topic_queues):
        staged, target = source / topic, consumequeue / topic
        if not staged.is_dir() or os.path.lexists(target):
            continue
        os.rename(staged, target)
        qids = sorted(int(q) for q in os.listdir(target) if q.isdigit())
        for qid in set(qids) - set(written.get(topic, ())):
            try:
                os.unlink(f"{target}/{qid}/{first}")
            except FileNotFoundError:
                pass
        adopted[topic] = qids
    return adopted


__all__ = ["SkeletonBuilder", "adopt_skeletons", "skeleton_dir", "SKELETON_PREFIX"]
