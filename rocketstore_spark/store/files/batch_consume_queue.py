"""Batch consume queues: ``batchconsumequeue/<topic>/<queueId>/`` as arrays of 46-byte units
(:mod:`..format.inner_batch`), seen by the readers in queue-offset (message) space.

A unit covers the queue offsets ``[MSGBASEOFFSET, MSGBASEOFFSET + BATCHSIZE)``. :class:`BatchConsumeQueue` answers
the same questions as :class:`~.consume_queue.ConsumeQueue` with one 20-byte-style unit per queue OFFSET (the
unit of the record holding that message, repeated for every message of an inner batch), so ranges, limits and
streaming offsets count messages as RocketMQ does; :meth:`inner_index` says which message of its record an offset
is. Recovery keeps units while ``phy >= 0 and size > 0 and base >= 0 and batchSize > 0``
(``BatchConsumeQueue.recover``, from the third-last file). Units that re-dispatch on opening would write after an
abnormal exit are kept in memory (:meth:`BatchConsumeQueue.dispatch`), never written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import CorruptRecordError
from ..format import layout as L
from ..format.inner_batch import (
    BCQ_INVALID_POS,
    BCQ_STORE_UNIT_SIZE,
    BCQ_UNIT_DTYPE,
    DEFAULT_BCQ_FILE_SIZE,
    PROPERTY_INNER_BASE,
    PROPERTY_INNER_NUM,
)
from .byte_source import as_path
from .mapped_file_queue import MappedFileQueue, detect_file_size, list_offset_files
from .queue_protocol import dropped_tail, first_live_offset
from .unit_search import first_at_or_past

RECOVERY_FILES = 3  # BatchConsumeQueue.recover starts from the third-last file


class BatchConsumeQueue:
    """Read-only batch consume queue of one (topic, queueId); implements
    :class:`~.queue_protocol.ConsumeQueueProtocol`."""

    is_batch = True
    unit_times = True
    planned_end = None  # never loaded from a plan (see QueueSet.expect_queue_ends)

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: Optional[int] = None):
        self.topic = topic
        self.queue_id = queue_id
        directory = as_path(directory)
        size = detect_file_size(list_offset_files(directory), file_size, f"batch consume-queue ({directory})",
                                "batchConsumeQueueFileSize") or DEFAULT_BCQ_FILE_SIZE
        if size % BCQ_STORE_UNIT_SIZE:
            raise CorruptRecordError(f"batch consume-queue files must hold whole {BCQ_STORE_UNIT_SIZE}-byte units "
                                     f"(mapperFileSizeBatchConsumeQueue), found files of {size} bytes", directory, 0)
        self.files = MappedFileQueue(directory, size)
        self.units_per_file = size // BCQ_STORE_UNIT_SIZE
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        self._dropped: Optional[tuple[int, int, int]] = None  # see dropped_units
        self._load()

    def _load(self) -> None:
        files = self.files.files
        parts, self._file_of_unit = [], []
        for index in range(len(files)):
            self.files.ensure(index, 0, files[index].length)
            units = np.frombuffer(self.files.buffer(index), dtype=BCQ_UNIT_DTYPE)
            if index >= len(files) - RECOVERY_FILES:
                bad = np.flatnonzero((units["phy_offset"] < 0) | (units["size"] <= 0) | (units["base_offset"] < 0)
                                     | (units["batch_size"] <= 0))
                if len(bad):
                    parts.append(units[:int(bad[0])])
                    self._file_of_unit.append(np.full(int(bad[0]), index))
                    break
            parts.append(units)
            self._file_of_unit.append(np.full(len(units), index))
        self.raw = np.concatenate(parts, dtype=BCQ_UNIT_DTYPE) if parts else np.zeros(0, BCQ_UNIT_DTYPE)
        self._file_of_unit = np.concatenate(self._file_of_unit) if parts else np.zeros(0, np.int64)
        self._index()

    def _index(self) -> None:
        self.bases = self.raw["base_offset"].astype(np.int64)
        self.counts = self.raw["batch_size"].astype(np.int64)
        self.first_offset = int(self.bases[0]) if len(self.raw) else 0
        self.max_offset = self.disk_max_offset = int(self.bases[-1] + self.counts[-1]) if len(self.raw) else 0

    # --- message space ----------------------------------------------------------------------------------

    def unit_of(self, offsets) -> np.ndarray:
        """Index of the unit covering each queue offset; an offset no unit covers (a gap) is an error."""
        offsets = np.asarray(offsets, dtype=np.int64)
        unit = np.searchsorted(self.bases, offsets, side="right") - 1
        bad = (unit < 0) | (offsets - self.bases[np.maximum(unit, 0)] >= self.counts[np.maximum(unit, 0)])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            u = max(int(unit[i]), 0)
            path, at = self.unit_file_location(u)
            raise CorruptRecordError(
                f"batch consume queue {self.topic}/{self.queue_id}: expected a unit covering queue offset "
                f"{int(offsets[i])}, found the nearest unit at base {int(self.bases[u])} with batchSize "
                f"{int(self.counts[u])} (units must follow each other without gaps)", path, at)
        return unit

    def units(self, start: int, end: int) -> np.ndarray:
        """One ``(phy_offset, size, tags_code)`` unit per queue offset in ``[start, end)`` (clamped)."""
        start, end = max(int(start), self.first_offset), min(int(end), self.max_offset)
        if end <= start:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        raw = self.raw[self.unit_of(np.arange(start, end))]
        out = np.empty(len(raw), dtype=L.CQ_UNIT_DTYPE)
        for name in ("phy_offset", "size", "tags_code"):
            out[name] = raw[name]
        return out

    def first_at_or_past(self, phy_offset: int, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
        """The first queue offset in ``[lo, hi)`` (default: the whole queue) whose message's record is at or past
        commit-log ``phy_offset`` (``hi`` when none): the same binary search as a file-based consume queue's, over
        message offsets."""
        lo = self.first_offset if lo is None else max(lo, self.first_offset)
        hi = self.max_offset if hi is None else min(hi, self.max_offset)
        return first_at_or_past(self.units, lo, hi, phy_offset) if lo < hi else hi

    def file_of_units(self) -> np.ndarray:
        """Per unit, the index of the batch consume-queue file holding it."""
        return self._file_of_unit

    def inner_index(self, offsets) -> tuple[np.ndarray, np.ndarray]:
        """(position of each offset inside its record's batch, that unit's BATCHSIZE)."""
        unit = self.unit_of(offsets)
        return np.asarray(offsets, dtype=np.int64) - self.bases[unit], self.counts[unit]

    def file_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """Split queue offsets ``[start, end)`` where batch consume-queue files begin."""
        starts = [int(self.bases[u]) for u in np.flatnonzero(np.diff(self._file_of_unit, prepend=-1) != 0)]
        cuts = sorted({start, end, *[s for s in starts if start < s < end]})
        return [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]

    def hash_matches(self, sub, start: int, end: int):
        """(queue offsets, units) whose tag hash ``sub`` accepts; an inner batch's unit has tagsCode 0 (its
        messages carry the tags), so units of batches and of tagless records always pass to the real check."""
        start, end = max(start, self.first_offset), min(end, self.max_offset)
        if end <= start:
            return
        units = self.units(start, end)
        _, sizes = self.inner_index(np.arange(start, end))
        keep = np.flatnonzero(sub.matches_units(units, self.topic) | (sizes > 1) | (units["tags_code"] == 0))
        if len(keep):
            yield start + keep, units[keep]

    # --- units as records (recovery, hints) -----------------------------------------------------------

    def last_unit_end(self) -> int:
        if not len(self.raw):
            return 0
        return int(self.raw["phy_offset"][-1]) + int(self.raw["size"][-1])

    def truncate_at_phy(self, valid_end: int) -> int:
        """Drop the units pointing at or past ``valid_end`` (``truncateDirtyLogicFiles``)."""
        keep = int(np.searchsorted(self.raw["phy_offset"].astype(np.int64), valid_end, side="left"))
        if keep == len(self.raw):
            return self.max_offset
        before, first_phy = self.max_offset, int(self.raw["phy_offset"][keep])
        self.raw, self._file_of_unit = self.raw[:keep], self._file_of_unit[:keep]
        self._index()
        if before > self.max_offset:
            self._dropped = (self.max_offset, before, first_phy)
        return self.max_offset

    def dropped_units(self, past: int = 0) -> tuple[int, int, int]:
        """``(start, end, phy_offset)`` of the units recovery's truncation dropped (see ``dropped_tail``);
        recovery cuts these queues at the log's valid end itself, so all of them are at or past ``past``."""
        return dropped_tail(self.max_offset, self._dropped)

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray:
        phy = self.raw["phy_offset"].astype(np.int64)
        return phy[(phy >= lo) & (phy < hi)]

    def phy_offsets_from(self, phy_start: int) -> np.ndarray:
        phy = self.raw["phy_offset"].astype(np.int64)
        return phy[phy >= phy_start]

    def dispatch(self, phy_offset: int, size: int, tags_code: int, store_time: int, base_offset: int,
                 batch_size: int) -> bool:
        """The unit re-dispatch on opening writes for a recovered record (``putMessagePositionInfoWrapper`` /
        ``putBatchMessagePositionInfo``), kept in memory: none for a negative base or batch size, none for a
        record at or before the last unit's (``maxMsgPhyOffsetInCommitLog``: already dispatched). The unit goes
        where the store would append it, into a new file when the last one is full. Returns whether it was added."""
        if base_offset < 0 or batch_size < 0:
            return False
        if len(self.raw) and phy_offset <= int(self.raw["phy_offset"][-1]):
            return False
        unit = np.array([(phy_offset, size, tags_code, store_time, base_offset, batch_size, BCQ_INVALID_POS, 0)],
                        dtype=BCQ_UNIT_DTYPE)
        if len(self.raw):
            last = int(self._file_of_unit[-1])
            in_last = int(np.count_nonzero(self._file_of_unit == last))
            file_index = last if in_last < self.units_per_file else last + 1
        else:
            file_index = max(len(self.files.files) - 1, 0)
        disk_end = self.disk_max_offset  # the units on disk end where they did: the new one is in memory only
        self.raw = np.concatenate([self.raw, unit], dtype=BCQ_UNIT_DTYPE)
        self._file_of_unit = np.append(self._file_of_unit, file_index)
        self._index()
        self.disk_max_offset = disk_end
        return True

    def min_live_offset(self, min_phy_offset: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""
        return first_live_offset(self, min_phy_offset)

    def lacks(self, queue_offsets: np.ndarray, phy_offsets: np.ndarray) -> np.ndarray:
        """Per recovered record, whether re-dispatch adds its unit: past the last unit's record."""
        return phy_offsets > (int(self.raw["phy_offset"][-1]) if len(self.raw) else -1)

    def dispatch_recovered(self, queue_offset: int, phy_offset: int, size: int, tags_code: int, store_time: int,
                           properties: dict) -> None:
        """A recovered record's unit (``DispatchRequest`` as ``checkMessageAndReturnSize`` builds it): base offset
        and batch size from ``INNER_BASE`` / ``INNER_NUM`` when the record has both (an inner batch), else its
        QUEUEOFFSET and 1 (``setBatchSizeIfNeeded``)."""
        base, count = queue_offset, 1
        if PROPERTY_INNER_NUM in properties and PROPERTY_INNER_BASE in properties:
            try:
                base, count = int(properties[PROPERTY_INNER_BASE]), int(properties[PROPERTY_INNER_NUM])
            except ValueError as e:
                path, at = self.unit_location(self.max_offset)
                raise CorruptRecordError(
                    f"record at commit-log offset {phy_offset} of batch topic {self.topic}: expected "
                    f"integer {PROPERTY_INNER_BASE}/{PROPERTY_INNER_NUM}, found {properties[PROPERTY_INNER_BASE]!r}/"
                    f"{properties[PROPERTY_INNER_NUM]!r}", path, at) from e
        self.dispatch(phy_offset, size, tags_code, store_time, base, count)

    def unit_file_location(self, unit: int) -> tuple[Path, int]:
        if not len(self.raw) or int(self._file_of_unit[unit]) >= len(self.files.files):
            return self.files.directory, 0  # no file yet (a unit re-dispatch would write into a new one)
        info = self.files.files[int(self._file_of_unit[unit])]
        first = int(np.flatnonzero(self._file_of_unit == self._file_of_unit[unit])[0])
        return info.path, (unit - first) * BCQ_STORE_UNIT_SIZE

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """(file, byte offset) of the unit covering ``queue_offset``, for error messages."""
        unit = int(np.searchsorted(self.bases, queue_offset, side="right") - 1)
        return self.unit_file_location(max(unit, 0))

    # --- getOffsetInQueueByTime ------------------------------------------------------------------------

    def offset_by_time(self, timestamp: int, lower: bool, min_phy_offset: int = 0) -> int:
        """``BatchConsumeQueue.getOffsetInQueueByTime`` (unit store times; ``searchBcqByCacheEnable``, the
        default), clamped to [min, max] as ``ConsumeQueueStore`` does; -1 answers become the min offset.
        ``min_phy_offset`` is not used (the search clamps to the queue's own range)."""
        if not len(self.raw):
            return 0
        times = self.raw["store_time"].astype(np.int64)
        file_first = np.flatnonzero(np.diff(self._file_of_unit, prepend=-1) != 0)
        file_last = np.append(file_first[1:] - 1, len(self.raw) - 1)
        if times[file_first[-1]] <= timestamp:
            f = len(file_first) - 1
        else:  # the time cache: the file with the greatest first-unit time <= timestamp, else the first file
            earlier = np.flatnonzero(times[file_first] <= timestamp)
            f = int(earlier[-1]) if len(earlier) else 0
        left, right = int(file_first[f]), int(file_last[f])
        if timestamp >= times[right]:
            found = right
        else:
            found = _binary_search_right(times, left, right, timestamp, lower)
        result = int(self.bases[found]) if found >= 0 else -1
        return min(max(result, self.first_offset), self.max_offset)


def _binary_search_right(times: np.ndarray, left: int, right: int, target: int, lower: bool) -> int:
    """``BatchConsumeQueue.binarySearchRight`` over unit indexes (its quirks kept: -1 when nothing qualifies)."""
    while left <= right:
        mid = (left + right) // 2
        value = int(times[mid])
        if mid == right:
            return mid if value >= target else -1
        if mid == left:
            if value >= target:
                return mid
            left = mid + 1
        elif lower:
            if value < target:
                left = mid + 1
            else:
                right = mid
        elif value <= target:
            left = mid
        else:
            right = mid - 1
    return -1


__all__ = ["BatchConsumeQueue"]
