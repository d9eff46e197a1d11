"""Dispatching records into consume queues (``ConsumeQueue.putMessagePositionInfo``): queue offsets and units.

:class:`QueueOffsets` hands out consecutive offsets per queue from each queue's end, as the broker's
``CommitLog.topicQueueTable`` does; :class:`ConsumeQueueWriter` writes the 20-byte units of records now in the
commit log, one ``pwrite`` per queue and consume-queue file.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ...errors import MessageValidationError
from ..files.consume_queue import encode_units
from ..files.disk_full import disk_full
from ..files.store_files import create_full_size
from ..format import layout as L
from .encoded_batch import EncodedBatch, consecutive_offsets
from .open_files import OpenFiles


class QueueOffsets:
    """The next queue offset of every queue of a store opened for appending."""

    def __init__(self, next_offsets: dict):
        self._next = dict(next_offsets)  # (topic, queue id) → the offset its next message gets
        self.written_topics: set[str] = set()

    def next_offset(self, topic: str, queue_id: int) -> int:
        return self._next.get((topic, int(queue_id)), 0)

    def as_dict(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) → the offset its next message gets, for every queue this writer knows (a copy)."""
        return dict(self._next)

    def keys(self) -> list[tuple[str, int]]:
        """(topic, queue id) of every queue known (on disk when opened, or written since)."""
        return list(self._next)

    def assign(self, batch: EncodedBatch) -> np.ndarray:
        """Consecutive offsets per queue for ``batch``'s dispatched records (0 for PREPARED/ROLLBACK halves,
        which no queue references); a ``queueOffset`` the input gave must be the one assigned."""
        groups = batch.queue_groups()
        rows, bounds, queues = groups
        base = np.array([self._next.get(q, 0) for q in queues], dtype=np.int64)
        out = consecutive_offsets(len(batch), groups, base)
        if not len(rows):
            return out
        counts = np.diff(bounds)
        assigned = out[rows]
        given = batch.queue_offset_given[rows]
        wrong = np.flatnonzero((given >= 0) & (given != assigned))
        if len(wrong):
            i = int(wrong[np.argmin(rows[wrong])])  # the first such row of the batch
            topic, qid = queues[int(np.searchsorted(bounds, i, side="right")) - 1]
            raise MessageValidationError(
                f"row {int(rows[i])}: queueOffset {int(given[i])} given for {topic}/{qid}, but that queue's next "
                f"offset is {int(assigned[i])}; drop the queueOffset column to have offsets assigned")
        for q, b, c in zip(queues, base.tolist(), counts.tolist()):
            self._next[q] = b + c
        self.written_topics.update(q[0] for q in queues)
        return out


_UNIT_BYTES = np.dtype(f"V{L.CQ_STORE_UNIT_SIZE}")  # a unit as its bytes (see write_pending)

#: units held before they are written (20 bytes each): a job's units are gathered per queue, so a job spread over
#: thousands of queues writes each queue's units with one ``pwrite`` per consume-queue file instead of one per
#: queue per batch (the broker's dispatch, too, appends a queue's units to its mapped file, not per producer batch)
PENDING_UNITS = 4_000_000


class ConsumeQueueWriter:
    """The consume queues of one store opened for appending.

    :meth:`write` gathers units per queue; :meth:`write_pending` writes them (the appender calls it at the end of
    each ``append``, before every flush, and before closing), creating each queue's directory once."""

    def __init__(self, root: Path, file_size: int, files: OpenFiles):
        self.directory = Path(root) / L.CONSUMEQUEUE_DIR
        self.file_size = file_size
        self._files = files
        self._made: set = set()  # (topic, queue id) of the queues whose directories exist
        self._pending: list = []  # (queues, bounds, queue offsets, units) of each write, grouped by queue
        self._pending_units = 0

    def write(self, batch: EncodedBatch, phy: np.ndarray, queue_offset: np.ndarray,
              store_ts: np.ndarray) -> None:
        """The units of ``batch``'s dispatched records, now in the commit log at ``phy``. A delayed message's
        unit carries its delivery time instead of its tags hash (``CommitLog.checkMessageAndReturnSize``)."""
        tags_code = np.where(batch.delay_ms > 0, store_ts + batch.delay_ms, batch.tags_code)
        rows, bounds, queues = batch.queue_groups()
        if not len(rows):
            return
        self._pending.append((queues, bounds, queue_offset[rows], encode_units(rows, phy, batch.lengths, tags_code)))
        self._pending_units += len(rows)
        if self._pending_units >= PENDING_UNITS:
            self.write_pending()

    def write_pending(self) -> None:
        """Write the gathered units: per queue, one ``pwrite`` per consume-queue file and run of offsets. New
        directories and new files (created whole, units included) are made by several threads at once: a job
        spread over thousands of new queues is bound by the filesystem's metadata operations, not by bytes.

        The runs of all queues are found in one vectorised pass (thousands of queues: no array work per queue)."""
        if not self._pending:
            return
        cq_size = self.file_size
        number: dict = {}  # (topic, queue id) → its number, in order of first appearance
        queue_no, offsets, units = [], [], []
        for queues, bounds, queue_offsets, part_units in self._pending:
            numbered = np.fromiter((number.setdefault(q, len(number)) for q in queues), np.int64, len(queues))
            queue_no.append(np.repeat(numbered, np.diff(bounds)))
            offsets.append(queue_offsets)
            # moved as opaque 20-byte items: gathering a structured dtype goes field by field, ten times slower
            units.append(part_units.view(_UNIT_BYTES))
        queue_no, offsets = np.concatenate(queue_no), np.concatenate(offsets)
        units = np.concatenate(units) if len(units) > 1 else units[0]
        if len(self._pending) > 1:  # a queue's units of every write together, in write order
            order = np.argsort(queue_no, kind="stable")
            queue_no, offsets, units = queue_no[order], offsets[order], units[order]
        keys = list(number)
        self._make_dirs(keys)
        byte = offsets * L.CQ_STORE_UNIT_SIZE
        file_no = byte // cq_size
        # a queue's offsets only grow, one by one: its runs break only at file boundaries
        starts = np.flatnonzero(np.concatenate(([True], (np.diff(queue_no) != 0) | (np.diff(file_no) != 0)
                                                | (np.diff(offsets) != 1))))
        ends = np.append(starts[1:], len(units)) * L.CQ_STORE_UNIT_SIZE
        raw = units.view(np.uint8)
        new_files: dict[Path, list] = {}
        existing = []
        for q, f, at, lo, hi in zip(queue_no[starts].tolist(), file_no[starts].tolist(),
                                    (byte[starts] - file_no[starts] * cq_size).tolist(),
                                    (starts * L.CQ_STORE_UNIT_SIZE).tolist(), ends.tolist()):
            topic, queue_id = keys[q]  # one path parsed, not joined part by part (thousands of queues)
            path = Path(f"{self.directory}/{topic}/{int(queue_id)}/{L.offset_to_file_name(f * cq_size)}")
            write = (at, raw[lo:hi])
            if path in new_files or (path not in self._files and not path.exists()):
                new_files.setdefault(path, []).append(write)
            else:
                existing.append((path, write))
        sync = self._files.sync_evicted
        _in_parallel(lambda item: create_full_size(item[0], cq_size, writes=item[1], sync=sync), new_files.items())
        for path, (at, data) in existing:
            with disk_full(path, "a consume queue"):
                os.pwrite(self._files.fd(path, cq_size), data, at)
        self.discard_pending()

    def discard_pending(self) -> None:
        self._pending.clear()
        self._pending_units = 0

    def _make_dirs(self, keys) -> None:
        """The directories of the queues ``keys`` ((topic, queue id) pairs) that this writer has not made yet:
        topics first, then their queues, several at a time."""
        todo = [(t, int(q)) for t, q in keys if (t, int(q)) not in self._made]
        if not todo:
            return
        # an append to a store whose queues exist: one listing per topic instead of a mkdir per queue
        present = {t: _subdirectory_names(f"{self.directory}/{t}") for t in {t for t, _ in todo}}
        self._made.update(k for k in todo if str(k[1]) in present[k[0]])
        todo = [k for k in todo if str(k[1]) not in present[k[0]]]
        with disk_full(self.directory, "the consume queues' directories"):
            self.directory.mkdir(parents=True, exist_ok=True)
            _in_parallel(lambda t: (self.directory / t).mkdir(exist_ok=True),
                         sorted({t for t, _ in todo if not present[t]}))
            _in_parallel(lambda k: (self.directory / k[0] / str(k[1])).mkdir(exist_ok=True), todo)
        self._made.update(todo)

    def adopted(self, queues: dict) -> None:
        """Queue directories that now exist without this writer having made them (topic → queue ids: a job's
        skeleton moved into the store)."""
        for topic, qids in queues.items():
            self._made.update((topic, int(qid)) for qid in qids)

    def create_queues(self, queue_nums: dict) -> None:
        """The consume-queue directories 0..n-1 of every new topic of ``queue_nums`` (topic → n: a new topic's
        queues, empty ones too)."""
        self._make_dirs([(topic, qid) for topic, n in queue_nums.items() for qid in range(n)])


def _subdirectory_names(directory: str) -> set:
    """The names of the directories in ``directory`` (none when it does not exist)."""
    try:
        return {e.name for e in os.scandir(directory) if e.is_dir()}
    except (FileNotFoundError, NotADirectoryError):
        return set()


METADATA_THREADS = 16  # directories and files created at once (each a metadata round trip to the filesystem)


def _in_parallel(fn, items) -> None:
    """``fn`` on every item, :data:`METADATA_THREADS` at a time (the first error surfaces)."""
    items = list(items)
    if len(items) < 4:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(METADATA_THREADS) as pool:
        for _ in pool.map(fn, items):
            pass


__all__ = ["QueueOffsets", "ConsumeQueueWriter", "PENDING_UNITS"]
