"""``TieredQueue``: one queue's history in a broker's tiered storage, its commit-log and consume-queue segments
(``FlatMessageFile``: a ``FlatCommitLogFile`` and a ``FlatConsumeQueueFile``).

The queue's **commit log** is its own: the records of this queue only, one after the other from tiered offset 0
(no BLANK fillers, no other queues), each byte for byte as the broker's local commit log held it except
``PHYSICALOFFSET`` (bytes 28..35), rewritten to the record's offset in this per-queue log
(``CommitLogInputStream``). The **consume queue** has the local queue's 20-byte units (``CQ_UNIT_DTYPE``: the
record's tiered offset, its size, the tags code), unit ``q`` at byte ``q * 20`` of the per-queue consume-queue
file: the first segment's base offset is ``20 * `` the first queue offset uploaded.

The broker serves queue offsets from ``max(first unit, QUEUEOFFSET of the first record still in the commit log)``
(``getConsumeQueueMinOffset``) up to the consume queue's committed end; a unit is read here only when its record
lies wholly in the committed commit-log segments.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import StoreFormatError
from ..format import layout as L
from .tiered_segments import COMMIT_LOG, CONSUME_QUEUE, QueueDir, Segment

QUEUE_OFFSET_POSITION = 20  # MessageFormatUtil.QUEUE_OFFSET_POSITION: QUEUEOFFSET's byte in a record
STORE_TIMESTAMP_POSITION = 56  # MessageFormatUtil.STORE_TIMESTAMP_POSITION (the broker reads it there always)


class TieredQueue:
    """The tiered segments of one (topic, queue id)."""

    def __init__(self, queue_dir: QueueDir):
        self.dir = queue_dir
        self.topic, self.queue_id = queue_dir.topic, queue_dir.queue_id
        self.log_segments = queue_dir.segments(COMMIT_LOG)
        self.unit_segments = queue_dir.segments(CONSUME_QUEUE)
        self._first: Optional[int] = None
        self._end: Optional[int] = None

    @property
    def log_start(self) -> int:
        return self.log_segments[0].base_offset if self.log_segments else 0

    @property
    def log_end(self) -> int:
        return self.log_segments[-1].end if self.log_segments else 0

    @property
    def first_offset(self) -> int:
        """The first queue offset the broker serves from its tiered storage (``getConsumeQueueMinOffset``)."""
        if self._first is None:
            first_unit = self.unit_segments[0].base_offset // L.CQ_STORE_UNIT_SIZE if self.unit_segments else 0
            first = first_unit
            if self.log_end - self.log_start >= QUEUE_OFFSET_POSITION + 8:
                head = self._read(self.log_segments, self.log_start, QUEUE_OFFSET_POSITION + 8)
                first = max(first, int(np.frombuffer(head, ">i8", 1, QUEUE_OFFSET_POSITION)[0]))
            self._first = min(first, self.max_offset)
        return self._first

    @property
    def max_offset(self) -> int:
        """The queue offset after the last one whose unit and record are both committed (exclusive end)."""
        if self._end is None:
            if not self.unit_segments:
                self._end = 0
            else:
                lo = self.unit_segments[0].base_offset // L.CQ_STORE_UNIT_SIZE
                hi = self.unit_segments[-1].end // L.CQ_STORE_UNIT_SIZE
                # units are committed after their records (commitAsync: commit log, then consume queue), so only
                # a tail of units can point past the log's end; look at the last few
                end = hi
                while end > lo:
                    unit = self.units(end - 1, end)[0]
                    if int(unit["phy_offset"]) + int(unit["size"]) <= self.log_end:
                        break
                    end -= 1
                self._end = end
        return self._end

    def units(self, start: int, end: int) -> np.ndarray:
        """The units of queue offsets ``[start, end)`` (within the segments)."""
        if end <= start:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        data = self._read(self.unit_segments, start * L.CQ_STORE_UNIT_SIZE, (end - start) * L.CQ_STORE_UNIT_SIZE)
        return np.frombuffer(data, dtype=L.CQ_UNIT_DTYPE)

    def records(self, units: np.ndarray) -> tuple[bytes, int]:
        """The commit-log bytes holding the records of ``units`` (in queue order) and the tiered offset of their
        first byte."""
        if len(units) == 0:
            return b"", 0
        lo = int(units["phy_offset"][0])
        hi = int((units["phy_offset"].astype(np.int64) + units["size"]).max())
        return self._read(self.log_segments, lo, hi - lo), lo

    def store_time(self, queue_offset: int) -> int:
        """``MessageFormatUtil.getStoreTimeStamp`` of the record of ``queue_offset``."""
        unit = self.units(queue_offset, queue_offset + 1)[0]
        head = self._read(self.log_segments, int(unit["phy_offset"]), STORE_TIMESTAMP_POSITION + 8)
        return int(np.frombuffer(head, ">i8", 1, STORE_TIMESTAMP_POSITION)[0])

    def offset_by_time(self, timestamp: int, upper: bool = False) -> int:
        """``FlatMessageFile.getQueueOffsetByTimeAsync``: the first queue offset stored at or after ``timestamp``
        (with ``upper``, then past the offsets stored at exactly that time); the end when every record is older,
        the first offset when every record is newer. The broker finds the consume-queue segment by the store times
        it recorded for each (the first and last of its records here), then searches that segment."""
        first, last = self.first_offset, self.max_offset - 1
        if last < first:
            return first
        if self.store_time(last) < timestamp:
            return last + 1
        if self.store_time(first) > timestamp:
            return first

        def span(seg: Segment) -> tuple[int, int]:
            lo = max(seg.base_offset // L.CQ_STORE_UNIT_SIZE, first)
            hi = min(seg.end // L.CQ_STORE_UNIT_SIZE - 1, last)
            return lo, hi

        def times(seg: Segment) -> tuple[float, float]:
            lo, hi = span(seg)
            if hi < first:  # expired: older than every record left
                return float("-inf"), float("-inf")
            if lo > last:  # not committed yet: newer than every record
                return float("inf"), float("inf")
            return self.store_time(lo), self.store_time(hi)

        segments = self.unit_segments
        low, high = 0, len(segments) - 1
        mid = low + (high - low) // 2
        while low <= high:
            t_min, t_max = times(segments[mid])
            if t_min <= timestamp <= t_max:
                break
            if timestamp < t_min:
                high = mid - 1
            else:
                low = mid + 1
            mid = low + int((high - low) / 2)  # Java's division: towards zero
        lo, hi = span(segments[min(mid, len(segments) - 1)])
        while lo < hi:  # the lower bound: the first record stored at or after the time
            middle = lo + (hi - lo) // 2
            if self.store_time(middle) < timestamp:
                lo = middle + 1
            else:
                hi = middle
        offset = lo
        if upper:
            while offset + 1 <= last and self.store_time(offset + 1) == timestamp:
                offset += 1
        return offset

    def segment_at(self, offset: int, kind: str = COMMIT_LOG) -> Segment:
        segments = self.log_segments if kind == COMMIT_LOG else self.unit_segments
        for seg in segments:
            if seg.base_offset <= offset < seg.end:
                return seg
        return segments[-1] if segments else None

    def _read(self, segments: list[Segment], offset: int, length: int) -> bytes:
        parts, pos, end = [], offset, offset + length
        for seg in segments:
            if seg.end <= pos or seg.base_offset >= end:
                continue
            with open(seg.path, "rb") as f:
                f.seek(pos - seg.base_offset)
                chunk = f.read(min(end, seg.end) - pos)
            parts.append(chunk)
            pos += len(chunk)
            if pos >= end:
                break
        if pos < end:
            kind = segments[0].path.parent.name if segments else "segments"
            covered = (segments[0].base_offset, segments[-1].end) if segments else (0, 0)
            raise StoreFormatError(f"tiered {kind} of {self.topic}/{self.queue_id}: expected bytes "
                                   f"{offset}..{end} in the segments (covering {covered[0]}..{covered[1]}), found "
                                   f"them ending at {pos}; a segment is missing or shorter than its neighbours say",
                                   self.dir.path / kind, pos)
        return b"".join(parts)


__all__ = ["TieredQueue", "QUEUE_OFFSET_POSITION", "STORE_TIMESTAMP_POSITION"]
