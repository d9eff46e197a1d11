"""Tag-hash matches of many short planned consume-queue ranges, read together.

A selective tag read over a store of thousands of queues gives one task thousands of ranges of a few units each
(young queues, a topic's retry queue). Read queue by queue, each range costs a queue object, a file opened
through the byte source, a window read and a generator: ~50 µs, against a few µs for the units themselves. A run
of such ranges is read here in one pass instead: each range's units are read straight from the file its planned
offsets name (:func:`~..files.file_reads.read_spans`), the recovery test and the tag-hash test run once over all
of them, and only ranges with a match become groups for decoding.

The run is the fast path of a read the queue-by-queue path already defines, so anything unusual sends the whole
run back to that path, which reports or skips it as it always does: a file missing or short, a unit that is not
valid (the queue was cut or replaced since planning), a range whose first message expired from the commit log.
Only local stores of the default consume-queue layout take it, for ranges a planner gave (the queue's planned
start and end cover it) inside one consume-queue file, whose queue this reader has not loaded otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..files.byte_source import is_remote
from ..files.file_reads import read_spans
from ..files.unit_search import valid_units
from ..format import layout as L
from ..format.subscription import Subscription
from .opened_store import OpenedStore
from .queue_set import QueueSet

SHORT_RANGE_UNITS = 4096  # a planned range up to this long (80 KiB of units) is read with the others of its run
RUN_UNITS = 1 << 20  # units (20 MiB) read at once, at most


class PlannedQueue:
    """What decoding needs of a queue read through a run (its name, and where a unit lies for error messages)
    without loading the queue."""

    __slots__ = ("topic", "queue_id", "path", "first_unit")
    is_batch = False

    def __init__(self, topic: str, queue_id: int, path: str, first_unit: int):
        self.topic, self.queue_id, self.path, self.first_unit = topic, queue_id, path, first_unit

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """(file, byte offset) of the unit with ``queue_offset``."""
        return Path(self.path), (queue_offset - self.first_unit) * L.CQ_STORE_UNIT_SIZE


class PlannedUnits:
    """The tag-hash matches of planned ranges of ``queues`` (of ``store``), short ranges read in runs."""

    def __init__(self, store: OpenedStore, queues: QueueSet):
        self.store = store
        self.queues = queues

    def tag_groups(self, ranges, sub: Subscription, fail_on_data_loss: bool) -> Iterator[tuple]:
        """(queue, queue offsets, units) of the units of ``ranges`` whose tag hash ``sub`` accepts, range after
        range; runs of short planned ranges are read together."""
        runs = self._runs_allowed()
        run: list = []
        run_units = 0
        for rng in ranges:
            if runs and self._short_planned(*rng):
                run.append(rng)
                run_units += rng[3] - rng[2]
                if run_units >= RUN_UNITS:
                    yield from self._run_groups(run, sub, fail_on_data_loss)
                    run, run_units = [], 0
                continue
            if run:
                yield from self._run_groups(run, sub, fail_on_data_loss)
                run, run_units = [], 0
            yield from self._range_groups(rng, sub, fail_on_data_loss)
        if run:
            yield from self._run_groups(run, sub, fail_on_data_loss)

    def _range_groups(self, rng, sub: Subscription, fail_on_data_loss: bool) -> Iterator[tuple]:
        cq, lo, hi = self.queues.clamped_range(*rng, fail_on_data_loss)
        for offsets, units in cq.hash_matches(sub, lo, hi):
            yield cq, offsets, units

    def _runs_allowed(self) -> bool:
        """Runs need queues named by their plan (lazy queues) and :meth:`_plain_unit_files`."""
        return self.queues.lazy and self._plain_unit_files()

    def _plain_unit_files(self) -> bool:
        """Local consume-queue files of the default unit layout (no RocksDB, batch or LMQ queues: the store's
        behaviour allows planned runs)."""
        return not is_remote(self.store.root) and self.store.behaviour.planned_runs

    def _short_planned(self, topic: str, queue_id: int, start, end) -> bool:
        if start is None or end is None or end - start > SHORT_RANGE_UNITS or start >= end:
            return False
        key = (topic, int(queue_id))
        if self.queues.loaded(*key) is not None or topic == L.SCHEDULE_TOPIC:  # loaded already / its tagsCode is a time
            return False
        per = self.store.sizes.consume_queue_file_size // L.CQ_STORE_UNIT_SIZE
        return start // per == (end - 1) // per and self.queues.planned_covers(key, start, end)

    def _run_groups(self, run: list, sub: Subscription, fail_on_data_loss: bool) -> Iterator[tuple]:
        groups = self._run_matches(run, sub)
        if groups is None:  # something unusual: the queue-by-queue path reads (and reports) the run
            for rng in run:
                yield from self._range_groups(rng, sub, fail_on_data_loss)
            return
        yield from groups

    def _run_matches(self, run: list, sub: Subscription) -> Optional[list]:
        """The groups of a run's hash matches, or None when any range of the run needs the queue-by-queue path."""
        file_size = self.store.sizes.consume_queue_file_size
        per = file_size // L.CQ_STORE_UNIT_SIZE
        base_dir = f"{os.fspath(self.store.root)}/{L.CONSUMEQUEUE_DIR}"
        spans = []
        for topic, queue_id, start, end in run:
            first_unit = start // per * per
            path = f"{base_dir}/{topic}/{queue_id}/{L.offset_to_file_name(first_unit * L.CQ_STORE_UNIT_SIZE)}"
            spans.append((path, (start - first_unit) * L.CQ_STORE_UNIT_SIZE, end - start))
        read = _read_and_test(spans, sub)
        units, firsts = read.units, read.firsts
        if not read.complete.all() or not valid_units(units).all():
            return None
        oldest = self.store.min_phy_offset()
        if oldest > 0 and (units["phy_offset"][firsts] < oldest).any():
            return None  # expired messages: the queue path decides between data loss and skipping them
        groups = []
        for i, rows in read.hits_by_range():
            topic, queue_id, start, _ = run[i]
            queue = PlannedQueue(topic, int(queue_id), spans[i][0], start // per * per)
            groups.append((queue, start + (rows - firsts[i]), units[rows]))
        return groups

    def tag_match_spans(self, ranges, sub: Subscription) -> list:
        """For a planner: ``(matches, first match, last match)`` (queue offsets; None when no match) of each
        ``(topic, queue id, start, end)`` range, counting the units whose tag hash ``sub`` accepts (fillers not
        counted), for the short ranges of loaded local queues of the default layout, read in one pass like a
        run; None for the other ranges (and for any whose units are not all valid): count those queue by
        queue."""
        out: list = [None] * len(ranges)
        if not self._plain_unit_files():
            return out
        spans, picked = [], []
        for i, (topic, queue_id, start, end) in enumerate(ranges):
            cq = self.queues.loaded(topic, int(queue_id))
            if cq is None or topic == L.SCHEDULE_TOPIC or cq.is_batch or start >= end \
                    or end - start > SHORT_RANGE_UNITS or start < cq.first_offset or end > cq.disk_max_offset:
                continue
            index = cq.files.index_of(start * L.CQ_STORE_UNIT_SIZE)
            info = cq.files.files[index] if index >= 0 else None
            if info is None or end * L.CQ_STORE_UNIT_SIZE > info.from_offset + cq.files.file_size:
                continue  # not inside one file
            spans.append((info.location, start * L.CQ_STORE_UNIT_SIZE - info.from_offset, end - start))
            picked.append(i)
        if not spans:
            return out
        read = _read_and_test(spans, sub, skip_fillers=True)
        whole = read.complete & np.logical_and.reduceat(valid_units(read.units), read.firsts)
        for k, i in enumerate(picked):
            if whole[k]:
                out[i] = (0, None, None)
        for k, rows in read.hits_by_range():
            if whole[k]:
                start = ranges[picked[k]][2] - int(read.firsts[k])
                out[picked[k]] = (len(rows), start + int(rows[0]), start + int(rows[-1]))
        return out


class _TestedSpans:
    """Units of short ranges read together (:func:`~..files.file_reads.read_spans`) and the positions of those
    whose tag hash a subscription accepts."""

    def __init__(self, units: np.ndarray, complete: np.ndarray, firsts: np.ndarray, hits: np.ndarray):
        self.units, self.complete, self.firsts, self.hits = units, complete, firsts, hits

    def hits_by_range(self) -> Iterator[tuple[int, np.ndarray]]:
        """(range index, its hits' positions in ``units``) of each range with a hit, in order."""
        if not len(self.hits):
            return
        owner = np.searchsorted(self.firsts, self.hits, side="right") - 1  # hits ascend: a stretch per range
        cuts = np.flatnonzero(np.diff(owner)) + 1
        for a, b in zip(np.concatenate(([0], cuts)).tolist(), np.append(cuts, len(self.hits)).tolist()):
            yield int(owner[a]), self.hits[a:b]


def _read_and_test(spans: list, sub: Subscription, skip_fillers: bool = False) -> _TestedSpans:
    """Read ``spans`` ((path, first byte, unit count) each) into one array and test every unit's tag hash once
    (``skip_fillers``: blank filler units are no hit)."""
    units, complete = read_spans(spans, L.CQ_UNIT_DTYPE)
    counts = np.fromiter((n for _, _, n in spans), dtype=np.int64, count=len(spans))
    hit = sub.matches_units(units)
    if skip_fillers:
        hit &= units["size"] != L.CQ_FILLER_SIZE
    return _TestedSpans(units, complete, np.cumsum(counts) - counts, np.flatnonzero(hit))
