"""RocksDB consume queues (``storeType=defaultRocksDB``): ``consumequeue/`` as a RocksDB database
(:mod:`..format.rocksdb_cq`), read through the rocksdict binding (RocksDB's C++ library in PyPI wheels).

The database is opened read-only by :mod:`.rocksdb_database` and never modified.

:class:`RocksDBConsumeQueue` answers the same questions as :class:`~.consume_queue.ConsumeQueue` (units of queue
offset ranges, first/max offsets, tag-hash matches) from the ``default`` and ``offset`` column families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import StoreFormatError
from ..format import layout as L
from ..format.rocksdb_cq import ROCKSDB_CQ_VALUE_DTYPE, ROCKSDB_CQ_VALUE_SIZE
from .queue_protocol import dropped_tail
from .rocksdb_database import RocksDBConsumeQueueStore, check_not_locked

SCAN_UNITS = 4096  # units fetched per multi-get


class RocksDBConsumeQueue:
    """Read-only RocksDB consume queue of one (topic, queueId); implements
    :class:`~.queue_protocol.ConsumeQueueProtocol`."""

    is_batch = False
    unit_times = True  # the database's values carry each unit's store time
    planned_end = None  # never loaded from a plan (see QueueSet.expect_queue_ends)

    def __init__(self, store: RocksDBConsumeQueueStore, topic: str, queue_id: int):
        self.store, self.topic, self.queue_id = store, topic, queue_id
        last = store.max_entries.get((topic, queue_id))
        self.max_offset = self.disk_max_offset = (last[1] + 1) if last is not None else 0
        first = store.min_entries.get((topic, queue_id))
        self.first_offset = first[1] if first is not None else self._first_key_offset()
        self.units_per_file = L.DEFAULT_CONSUME_QUEUE_FILE_SIZE // L.CQ_STORE_UNIT_SIZE  # ranges for min_offset
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        self.virtual_times = np.zeros(0, dtype=np.int64)
        self._dropped = None  # (start, end, phy_offset) of units recovery dropped: see dropped_units
        self.files = self  # close() of the reader's queues

    def _first_key_offset(self) -> int:
        """The smallest queue offset with a unit (the first key of the queue's prefix; expired units are gone
        from the front), the max offset when the queue has none."""
        return self.store.first_offset(self.topic, self.queue_id, self.max_offset)

    def close(self) -> None:
        """The database is shared by the store's queues: the reader closes it once."""

    def _values(self, start: int, end: int) -> np.ndarray:
        raw = self.store.values(self.topic, self.queue_id, start, end)
        missing = [i for i, v in enumerate(raw) if v is None or len(v) != ROCKSDB_CQ_VALUE_SIZE]
        if missing:
            i = missing[0]
            found = "no entry" if raw[i] is None else f"a value of {len(raw[i])} bytes"
            raise StoreFormatError(
                f"RocksDB consume queue {self.topic}/{self.queue_id}: expected a {ROCKSDB_CQ_VALUE_SIZE}-byte unit "
                f"for queue offset {start + i} (the queue spans {self.first_offset}..{self.max_offset}), found "
                f"{found}", self.store.directory)
        return np.frombuffer(b"".join(bytes(v) for v in raw), dtype=ROCKSDB_CQ_VALUE_DTYPE)

    def store_times(self, start: int, end: int) -> np.ndarray:
        return self._values(start, end)["store_time"].astype(np.int64)

    def units(self, start: int, end: int) -> np.ndarray:
        """Units of queue offsets ``[start, end)`` (clamped), as 20-byte consume-queue units."""
        start, end = max(int(start), self.first_offset), min(int(end), self.max_offset)
        disk_end = min(end, self.disk_max_offset)
        parts = []
        for lo in range(start, disk_end, SCAN_UNITS):
            values = self._values(lo, min(disk_end, lo + SCAN_UNITS))
            out = np.empty(len(values), dtype=L.CQ_UNIT_DTYPE)
            for name in ("phy_offset", "size", "tags_code"):
                out[name] = values[name]
            parts.append(out)
        if end > self.disk_max_offset:
            parts.append(self.virtual[max(start - self.disk_max_offset, 0):end - self.disk_max_offset])
        if not parts:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, dtype=L.CQ_UNIT_DTYPE)

    def file_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        per = self.units_per_file
        out = []
        while start < end:
            stop = min(end, (start // per + 1) * per)
            out.append((start, stop))
            start = stop
        return out

    def hash_matches(self, sub, start: int, end: int):
        for lo, hi in self.file_ranges(max(start, self.first_offset), min(end, self.max_offset)):
            units = self.units(lo, hi)
            keep = np.flatnonzero(sub.matches_units(units, self.topic))
            if len(keep):
                yield lo + keep, units[keep]

    def append_virtual(self, phy_offset: int, size: int, tags_code: int, store_time: int = 0) -> None:
        """A unit re-dispatch would put (``putMessagePosition``), in memory; its store time for time lookups."""
        unit = np.array([(phy_offset, size, tags_code)], dtype=L.CQ_UNIT_DTYPE)
        self.virtual = np.concatenate([self.virtual, unit], dtype=L.CQ_UNIT_DTYPE)
        self.virtual_times = np.append(self.virtual_times, np.int64(store_time))
        self.max_offset += 1

    def put_dispatched(self, queue_offset: int, phy_offset: int, size: int, tags_code: int, store_time: int) -> None:
        """Re-dispatch's ``putMessagePosition`` for a record at ``queue_offset``: its key is written whatever the
        queue's end, so records a recovery skipped leave holes (``getMessage`` answers OFFSET_FOUND_NULL there),
        kept as filler units the readers skip; keys the queue already has are written again unchanged."""
        if queue_offset < self.max_offset:
            return
        gap = queue_offset - self.max_offset
        if gap:
            last = int(self.units(self.max_offset - 1, self.max_offset)["phy_offset"][0]) \
                if self.max_offset > self.first_offset else 0
            for _ in range(gap):  # a filler keeps the units' commit-log offsets non-decreasing for bisections
                self.append_virtual(last, L.CQ_FILLER_SIZE, 0, -1)
        self.append_virtual(phy_offset, size, tags_code, store_time)

    def lacks(self, queue_offsets: np.ndarray, phy_offsets: np.ndarray) -> np.ndarray:
        """Per recovered record, whether re-dispatch writes its key: at or past the queue's end."""
        return queue_offsets >= self.max_offset

    def dispatch_recovered(self, queue_offset: int, phy_offset: int, size: int, tags_code: int, store_time: int,
                           properties: dict) -> None:
        """Re-dispatch's key for a recovered record (:meth:`put_dispatched`: holes where records were skipped)."""
        self.put_dispatched(queue_offset, phy_offset, size, tags_code, store_time)

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """Where a unit is, for error messages: the database directory (the offset is the queue offset)."""
        return self.store.directory, int(queue_offset)

    def last_unit_end(self) -> int:
        if self.max_offset <= self.first_offset:
            return 0
        unit = self.units(self.max_offset - 1, self.max_offset)[0]
        return int(unit["phy_offset"]) + int(unit["size"])

    def truncate_at_phy(self, valid_end: int) -> int:
        """Drop the tail of units at or past ``valid_end`` (bisection: units point forward in the log)."""
        lo, hi = self.first_offset, self.max_offset
        if hi <= lo or int(self.units(hi - 1, hi)["phy_offset"][0]) < valid_end:
            return self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.units(mid, mid + 1)["phy_offset"][0]) >= valid_end:
                hi = mid
            else:
                lo = mid + 1
        before = self.max_offset
        first_phy = int(self.units(max(lo, self.first_offset), max(lo, self.first_offset) + 1)["phy_offset"][0])
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        self.virtual_times = np.zeros(0, dtype=np.int64)
        self.max_offset = self.disk_max_offset = max(lo, self.first_offset)
        if before > self.max_offset:
            self._dropped = (self.max_offset, before, first_phy)
        return self.max_offset

    def dropped_units(self, past: int = 0) -> tuple[int, int, int]:
        """``(start, end, phy_offset)`` of the units recovery's truncation dropped (see ``dropped_tail``);
        recovery cuts these queues at the log's valid end itself, so all of them are at or past ``past``."""
        return dropped_tail(self.max_offset, self._dropped)

    # --- RocksDBConsumeQueueOffsetTable.getMinCqOffset, RocksDBConsumeQueueTable.binarySearchInCQByTime ------

    def _last(self):
        """(phy offset, cq offset) of the queue's last unit as recovery left it (the offset table's ``max`` key
        while it still is; None when the queue has none)."""
        if self.max_offset <= self.first_offset:
            return None
        known = self.store.max_entries.get((self.topic, self.queue_id))
        if known is not None and known[1] == self.max_offset - 1:
            return known
        return self._at(self.max_offset - 1)[0], self.max_offset - 1

    def _at(self, offset: int):
        """(phy offset, store time) of the unit at ``offset`` (None when it has no entry: ``getCQInKV``); units
        re-dispatch added are read from memory."""
        if self.disk_max_offset <= offset < self.max_offset:
            k = offset - self.disk_max_offset
            filler = int(self.virtual[k]["size"]) == L.CQ_FILLER_SIZE
            return None if filler else (int(self.virtual[k]["phy_offset"]), int(self.virtual_times[k]))
        if offset >= self.max_offset:
            return None
        value = self.store.values(self.topic, self.queue_id, offset, offset + 1)[0]
        if value is None or len(value) != ROCKSDB_CQ_VALUE_SIZE:
            return None
        unit = np.frombuffer(bytes(value), dtype=ROCKSDB_CQ_VALUE_DTYPE)[0]
        return int(unit["phy_offset"]), int(unit["store_time"])

    def min_live_offset(self, min_phy_offset: int) -> int:
        """``getMinCqOffset``: the ``min`` key while its record is still in the commit log, else the first unit
        at or after ``min_phy_offset`` (what ``correctMinCqOffset`` finds and would store)."""
        first = self.store.min_entries.get((self.topic, self.queue_id))
        if first is not None and first[0] >= min_phy_offset:
            return first[1]
        last = self._last()
        if last is None:
            return 0
        if last[0] < min_phy_offset:
            return last[1] + 1
        lo, hi = (first[1] if first is not None else 0), last[1]
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self._at(mid)
            if unit is None or unit[0] < min_phy_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_by_time(self, timestamp: int, lower: bool, min_phy_offset: int) -> int:
        """``RocksDBConsumeQueueStore.getOffsetInQueueByTime`` (unit store times; not clamped, as there)."""
        last = self._last()
        if last is None or last[1] == -1:
            return 0
        low, high = self.min_live_offset(min_phy_offset), last[1]
        ceiling, floor = high, low
        edge = self._at(ceiling)
        if edge is not None and edge[1] < timestamp:
            return ceiling + 1 if lower else ceiling
        edge = self._at(floor)
        if edge is not None and edge[1] > timestamp:
            return floor if lower else 0
        target = left = right = -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            unit = self._at(mid)
            if unit is None:
                low = mid + 1
                continue
            if unit[0] < min_phy_offset:
                low, left = mid + 1, mid
                continue
            if unit[1] < 0:
                return 0
            if unit[1] == timestamp:
                target = mid
                break
            if unit[1] > timestamp:
                high, right = mid - 1, mid
            else:
                low, left = mid + 1, mid
        if target == -1:
            return right if lower else left
        step, bound = (-1, floor) if lower else (1, ceiling)
        while (target + step >= bound) if lower else (target + step <= bound):
            unit = self._at(target + step)
            if unit is None or unit[1] != timestamp:
                break
            target += step
        return target

    def first_at_or_past(self, phy_offset: int, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
        """The first queue offset in ``[lo, hi)`` (default: the whole queue) whose unit points at or past
        ``phy_offset`` (``hi`` when none): units point forward through the commit log, so a bisection of a few
        point reads."""
        lo = self.first_offset if lo is None else max(lo, self.first_offset)
        hi = self.max_offset if hi is None else min(hi, self.max_offset)
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.units(mid, mid + 1)["phy_offset"][0]) < phy_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray:
        """Commit-log offsets in ``[lo, hi)`` that units point at (record starts that guide a walk): two
        bisections find them, only those units are read."""
        first, last = self.first_offset, self.max_offset
        if first >= last:
            return np.zeros(0, dtype=np.int64)
        known = self.store.max_entries.get((self.topic, self.queue_id))
        if known is not None and known[0] < lo and last == self.disk_max_offset:
            return np.zeros(0, dtype=np.int64)  # the offset table's max unit is before lo: nothing to read
        try:
            start = self.first_at_or_past(lo, first, last)
            stop = self.first_at_or_past(hi, start, last)
            return self.units(start, stop)["phy_offset"].astype(np.int64)
        except StoreFormatError:  # a unit missing: hints only speed a walk up, the reads name the damage
            return np.zeros(0, dtype=np.int64)

    def phy_offsets_from(self, phy_start: int) -> np.ndarray:
        """Commit-log offsets of the units pointing at or after ``phy_start``: recovery's walk hints."""
        return self.phy_offsets_between(phy_start, 1 << 62)


__all__ = ["RocksDBConsumeQueueStore", "RocksDBConsumeQueue", "check_not_locked"]
