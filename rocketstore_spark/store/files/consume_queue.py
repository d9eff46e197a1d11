"""Consume queues: ``consumequeue/<topic>/<queueId>/`` as arrays of 20-byte units.

A unit ``(phy_offset, size, tags_code)`` at byte ``i * 20`` of the queue's concatenated files is the message
with queue offset ``i``. Recovery (``ConsumeQueue.recover``) keeps units while ``phy_offset >= 0 and size > 0``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ... import _native
from ...errors import DataLossError, StoreFormatError
from ..format import layout as L
from ..format.subscription import Subscription
from .mapped_file_queue import MappedFileQueue
from .queue_protocol import first_live_offset
from .unit_search import WINDOW_UNITS, file_units_reader, first_at_or_past, valid_prefix, valid_units

UNITS_PER_RECOVERY_FILES = 3  # ConsumeQueue.recover starts from the third-last file
HASH_SCAN_UNITS = 1 << 16  # units tag-tested per step (1.3 MB of queue): measured fastest on 2.5M units


def encode_units(rows: np.ndarray, phy_offsets: np.ndarray, sizes: np.ndarray, tags_codes: np.ndarray) -> np.ndarray:
    """The consume-queue units (``CQ_UNIT_DTYPE``) of records ``rows``, in that order: each record's commit-log
    offset, size and tags code taken from the per-record columns (the native kernel gathers and writes them)."""
    def column(values):
        return np.require(values, dtype=np.int64, requirements=["C", "A"])

    units = np.empty(len(rows), dtype=L.CQ_UNIT_DTYPE)
    problem, k = _native.consume_queue_units(column(rows), column(phy_offsets), column(sizes), column(tags_codes),
                                             units.view(np.uint8))
    if problem != _native.ENCODE_OK:
        raise StoreFormatError(f"unit {k}: expected a record among the {len(phy_offsets)} of the batch, found row "
                               f"{int(rows[k])}")
    return units


class ConsumeQueue:
    """Read-only consume queue of one (topic, queueId).

    Holds metadata only (its file listing and end); units are read on demand, window by window, so a process
    over thousands of queues holds no more than the units it is working on (see :mod:`.unit_search`).
    Implements :class:`~.queue_protocol.ConsumeQueueProtocol`.
    """

    is_batch = False
    unit_times = False  # 20-byte units: a time search reads each record's store time

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int, files=None,
                 hint_from: Optional[int] = None, strays: Optional[list] = None, planned_end: Optional[int] = None):
        self.topic = topic
        self.queue_id = queue_id
        # a copy's last file may be cut short (see sizes.detect_cq_file_size): its units end where its bytes do
        self.files = MappedFileQueue(directory, file_size, files, strays=strays, cut_last=True)
        self.units_per_file = file_size // L.CQ_STORE_UNIT_SIZE
        # (hint_from, end, offsets): the commit-log offsets >= hint_from of a young queue's units, kept from the
        # end search for recovery's first question (phy_offsets_from), then dropped
        self._hints: Optional[tuple] = None
        self._hint_from = hint_from
        # an executor reading a range its planner found complete trusts the planned end instead of searching for
        # it; every unit it reads is then checked (a queue truncated or replaced since is data loss, not zeros)
        self.planned_end = planned_end
        self._max_offset = self._recover_max_offset() if planned_end is None else self._planned_max_offset()
        self._disk_max_offset = self._max_offset
        self._cut_at: Optional[int] = None  # a commit-log valid end to truncate at when the queue is first used
        # (queue offset, commit-log offset) of the first unit recovery's truncation dropped, and the on-disk end
        # before it: units whose records the commit log no longer holds (see dropped_units)
        self._dropped: Optional[tuple[int, int, int]] = None
        # units the real store would write when it opens the store (records past the queue's end)
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)

    @property
    def max_offset(self) -> int:
        """The queue offset after the last unit (virtual units included)."""
        if self._cut_at is not None:
            self._truncate_now()
        return self._max_offset

    @max_offset.setter
    def max_offset(self, value: int) -> None:
        self._max_offset = value

    @property
    def disk_max_offset(self) -> int:
        """The queue offset after the last unit on disk that survives recovery."""
        if self._cut_at is not None:
            self._truncate_now()
        return self._disk_max_offset

    def _recover_max_offset(self) -> int:
        """Queue offset after the last valid unit (``ConsumeQueue.recover``: from the third-last file, on to the
        next file while a file is valid to its end), each file's valid prefix found by binary search. Keeps the
        last unit (and, for a young queue, its last file's largest commit-log offset) as metadata."""
        files = self.files.files
        self._tail = None  # (queue offset, commit-log offset, size) of the last valid unit on disk
        self._last_file_max_phy = None
        if not files:
            return 0
        index = max(len(files) - UNITS_PER_RECOVERY_FILES, 0)
        while True:
            with self.files.open_file(index) as handle:
                # a cut last file holds fewer (whole) units than the size
                prefix = valid_prefix(handle, min(self.units_per_file, files[index].length // L.CQ_STORE_UNIT_SIZE))
            end = files[index].from_offset // L.CQ_STORE_UNIT_SIZE + prefix.count
            if prefix.last is not None:
                self._tail = (end - 1,) + prefix.last
            if prefix.count < self.units_per_file or index + 1 >= len(files):
                if prefix.count:  # the last file the queue ends in: what truncation would scan
                    self._last_file_max_phy = prefix.max_phy
                if self._hint_from is not None and prefix.phy is not None and \
                        (index == 0 or not prefix.count or prefix.phy[0] < self._hint_from):
                    # every unit at or past hint_from is in this file: no earlier file's unit can be (units
                    # point forward)
                    self._hints = (self._hint_from, end, prefix.phy[prefix.phy >= self._hint_from])
                return end
            index += 1

    def _planned_max_offset(self) -> int:
        self._tail = self._last_file_max_phy = None
        files = self.files.files
        on_disk = (files[-1].from_offset + self.files.file_size) // L.CQ_STORE_UNIT_SIZE if files else 0
        if self.planned_end > on_disk:
            raise DataLossError(f"{self.topic}/{self.queue_id}: offsets up to {self.planned_end} were planned but "
                                f"the consume queue in {self.files.directory} now holds files up to offset {on_disk} "
                                "(truncated or replaced since planning)")
        return self.planned_end

    def _disk_units(self, start: int, end: int) -> np.ndarray:
        """Units of queue offsets ``[start, end)`` inside one file, read from disk (no clamping)."""
        index = self.files.index_of(start * L.CQ_STORE_UNIT_SIZE)
        if index < 0:
            raise DataLossError(f"{self.topic}/{self.queue_id}: offsets {start}..{end} were planned but no "
                                f"consume-queue file in {self.files.directory} holds them any more")
        base = self.files.files[index].from_offset // L.CQ_STORE_UNIT_SIZE
        with self.files.open_file(index) as handle:
            units = file_units_reader(handle)(start - base, end - base)
        if len(units) != end - start:
            raise StoreFormatError(f"consume-queue file {handle.path} is shorter than its queue's file size",
                                   handle.path)
        if self.planned_end is not None:
            bad = np.flatnonzero(~valid_units(units))
            if len(bad):
                at = start + int(bad[0])
                raise DataLossError(
                    f"{self.topic}/{self.queue_id}: offsets up to {self.planned_end} were planned but unit {at} in "
                    f"{handle.path} (byte {(at - base) * L.CQ_STORE_UNIT_SIZE}) is no longer valid: the consume "
                    "queue was truncated or replaced since planning")
        return units

    def first_at_or_past(self, phy_offset: int, lo: int = None, hi: int = None) -> int:
        """The first queue offset in ``[lo, hi)`` (default: the whole queue) whose unit points at or past
        commit-log ``phy_offset``; ``hi`` when none does. Units point forward through the commit log, so this is
        a binary search of a few probes."""
        lo = self.first_offset if lo is None else max(lo, self.first_offset)
        hi = self.max_offset if hi is None else min(hi, self.max_offset)
        return first_at_or_past(self.units, lo, hi, phy_offset) if lo < hi else hi

    @property
    def first_offset(self) -> int:
        """Queue offset of the first unit of the first file on disk."""
        return self.files.min_offset // L.CQ_STORE_UNIT_SIZE

    def file_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """Split queue offsets ``[start, end)`` at consume-queue file boundaries."""
        out = []
        per = self.units_per_file
        while start < end:
            stop = min(end, (start // per + 1) * per)
            out.append((start, stop))
            start = stop
        return out

    def units(self, start: int, end: int) -> np.ndarray:
        """Units of queue offsets ``[start, end)`` (clamped to what is on disk)."""
        start = max(start, self.first_offset)
        end = min(end, self.max_offset)
        parts = []
        if end > self.disk_max_offset:
            tail = self.virtual[max(start - self.disk_max_offset, 0):end - self.disk_max_offset]
            end = max(min(end, self.disk_max_offset), start)
        else:
            tail = None
        for lo, hi in self.file_ranges(start, end):
            parts.append(self._disk_units(lo, hi))
        if tail is not None:
            parts.append(tail)
        if not parts:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        # dtype= keeps the file's big-endian layout (np.concatenate would otherwise hand back native order)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, dtype=L.CQ_UNIT_DTYPE)

    def hash_matches(self, sub: Subscription, start: int, end: int):
        """(queue offsets, units) of the units in ``[start, end)`` whose tag hash ``sub`` accepts, chunk by
        chunk: steps of :data:`HASH_SCAN_UNITS` inside one file keep the arrays in cache and bound what is held."""
        for lo, hi in self.file_ranges(max(start, self.first_offset), min(end, self.max_offset)):
            while lo < hi:
                stop = min(hi, lo + HASH_SCAN_UNITS)
                units = self.units(lo, stop)
                keep = np.flatnonzero(sub.matches_units(units, self.topic))
                if len(keep):
                    yield lo + keep, units[keep]
                lo = stop

    def append_virtual(self, phy_offset: int, size: int, tags_code: int, store_time: int = 0) -> None:
        """Add a unit past the on-disk end, as re-dispatch on opening would (``putMessagePositionInfo``); a
        20-byte unit has no store time (lookups read it from the record)."""
        unit = np.array([(phy_offset, size, tags_code)], dtype=L.CQ_UNIT_DTYPE)
        self.virtual = np.concatenate([self.virtual, unit], dtype=L.CQ_UNIT_DTYPE)
        self.max_offset += 1

    def min_live_offset(self, min_phy_offset: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""
        return first_live_offset(self, min_phy_offset)

    def lacks(self, queue_offsets: np.ndarray, phy_offsets: np.ndarray) -> np.ndarray:
        """Per recovered record, whether re-dispatch adds its unit: at or past the queue's end
        (``putMessagePositionInfo``'s check)."""
        return queue_offsets >= self.max_offset

    def dispatch_recovered(self, queue_offset: int, phy_offset: int, size: int, tags_code: int, store_time: int,
                           properties: dict) -> None:
        """Re-dispatch's unit for a recovered record, appended when it is the queue's next offset."""
        if queue_offset == self.max_offset:
            self.append_virtual(phy_offset, size, tags_code)

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """(file, byte offset) of the unit with ``queue_offset``, for error messages."""
        byte = queue_offset * L.CQ_STORE_UNIT_SIZE
        index = self.files.index_of(byte)
        if index < 0:
            return self.files.directory, byte
        return self.files.files[index].path, byte - self.files.files[index].from_offset

    def last_unit(self) -> Optional[tuple[int, int]]:
        """(commit-log offset, size) of the last unit (None when the queue is empty); kept from the end search."""
        hi = self.max_offset
        if hi <= self.first_offset:
            return None
        if self._tail is None or self._tail[0] != hi - 1:
            unit = self.units(hi - 1, hi)[0]
            self._tail = (hi - 1, int(unit["phy_offset"]), int(unit["size"]))
        return self._tail[1:]

    def last_unit_end(self) -> int:
        """``phy_offset + size`` of the last valid unit (0 when empty): the queue's max physical offset."""
        last = self.last_unit()
        return 0 if last is None else last[0] + last[1]

    def truncate_at_phy(self, valid_end: int) -> None:
        """Drop the tail of units that point at or past the commit log's valid end, as
        ``ConsumeQueue.truncateDirtyLogicFiles`` does. Deferred until the queue is used, because it reads the
        valid units of the queue's last file: a read of a few queues of thousands pays for those few."""
        self._cut_at = valid_end if self._cut_at is None else min(self._cut_at, valid_end)

    def _truncate_now(self) -> None:
        """``truncateDirtyLogicFiles``: scan the last file forward (window by window), cut at the first unit at or
        past the valid end, and go back a file when even its first unit is past it."""
        valid_end, self._cut_at = self._cut_at, None
        lo, hi = self.first_offset, self._max_offset
        if self._last_file_max_phy is not None and hi == self._disk_max_offset and self._last_file_max_phy < valid_end:
            return  # the end search read the whole of the last file's units: none points past the valid end
        per = self.units_per_file
        while hi > lo:
            file_lo = max(lo, ((hi - 1) // per) * per)
            cut = None
            for a in range(file_lo, hi, HASH_SCAN_UNITS):
                over = np.flatnonzero(self._disk_units(a, min(hi, a + HASH_SCAN_UNITS))["phy_offset"] >= valid_end)
                if len(over):
                    cut = a + int(over[0])
                    break
            if cut is None:
                break
            hi = cut
            if cut > file_lo:
                break
        if hi < self._max_offset:
            self._dropped = (hi, self._max_offset, int(self._disk_units(hi, hi + 1)["phy_offset"][0]))
        self._max_offset = self._disk_max_offset = hi

    def dropped_units(self, past: int = 0) -> tuple[int, int, int]:
        """``(start, end, phy_offset)``: the queue offsets ``[start, end)`` of units on disk that recovery's
        truncation dropped and re-dispatch did not write back, from the first that points at or past ``past``,
        and the commit-log offset it points at; ``start == end`` when none. (Recovery may cut a queue before
        records the log still holds, as DLedger's abnormal recovery does: ``past`` skips those.)"""
        end = self.max_offset  # runs a deferred truncation
        if self._dropped is None or self._dropped[1] <= end:
            return end, end, -1
        lo, hi, phy = max(end, self._dropped[0]), self._dropped[1], self._dropped[2]
        if phy < past:  # units point forward through the log: bisect for the first at or past ``past``
            top = hi
            while lo < top:
                mid = (lo + top) // 2
                if int(self._disk_units(mid, mid + 1)["phy_offset"][0]) >= past:
                    top = mid
                else:
                    lo = mid + 1
            if lo == hi:
                return end, end, -1
            phy = int(self._disk_units(lo, lo + 1)["phy_offset"][0])
        return lo, hi, phy

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray:
        """Commit-log offsets in [lo, hi) that units point at; only those units are read (two binary searches
        find them)."""
        start = self.first_at_or_past(lo)
        stop = self.first_at_or_past(hi, start)
        return self.units(start, stop)["phy_offset"].astype(np.int64)

    def phy_offsets_from(self, phy_start: int) -> np.ndarray:
        """Commit-log offsets of the units pointing at or after ``phy_start`` (a binary search finds the first;
        units are in commit-log order)."""
        hints, self._hints = self._hints, None
        if hints is not None and phy_start >= hints[0] and self._cut_at is None and self._max_offset == hints[1]:
            return hints[2][int(np.searchsorted(hints[2], phy_start, "left")):]
        lo, hi = self.first_offset, self.max_offset
        if lo >= hi or self.last_unit()[0] < phy_start:
            return np.zeros(0, dtype=np.int64)
        if hi - lo > WINDOW_UNITS:
            lo = self.first_at_or_past(phy_start)
        phy = self.units(lo, hi)["phy_offset"].astype(np.int64)
        return phy[int(np.searchsorted(phy, phy_start, "left")):]
