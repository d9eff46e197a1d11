"""Consume queues: ``consumequeue/<topic>/<queueId>/`` as arrays of 20-byte units.

A unit ``(phy_offset, size, tags_code)`` at byte ``i * 20`` of the queue's concatenated files is the message
with queue offset ``i``. Recovery (``ConsumeQueue.recover``) keeps units while ``phy_offset >= 0 and size > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import InvalidArgumentError
from ..format import layout as L
from ..format.java_hash import java_string_hash
from .mapped_file_queue import MappedFileQueue

UNITS_PER_RECOVERY_FILES = 3  # ConsumeQueue.recover starts from the third-last file
HASH_SCAN_UNITS = 1 << 16  # units tag-tested per step (1.3 MB of queue): measured fastest on 2.5M units
EXT_ADDRESS_MAX = -(1 << 31) - 1  # ConsumeQueueExt.MAX_ADDR: tagsCode at or below is an ext-file address


@dataclass(frozen=True)
class Subscription:
    """A RocketMQ subscription expression: ``*`` or tags joined by ``||``."""

    tags: tuple[str, ...]  # empty for "*"

    @property
    def is_all(self) -> bool:
        return not self.tags

    @property
    def codes(self) -> np.ndarray:
        """Java hash codes of the subscribed tags (what ``SubscriptionData.codeSet`` holds)."""
        return np.array([java_string_hash(t) for t in self.tags], dtype=np.int64)

    @staticmethod
    def parse(expression) -> "Subscription":
        """Parse ``"*"``, ``None`` (all), ``"TagA || TagB"`` or a list of tags; malformed text is an error."""
        if expression is None:
            return Subscription(())
        if isinstance(expression, (list, tuple)):
            parts = [str(t).strip() for t in expression]
        else:
            text = str(expression).strip()
            if text in ("", "*"):
                return Subscription(())
            parts = [t.strip() for t in text.split("||")]
        if any(not t or t == "*" or "|" in t for t in parts):
            raise InvalidArgumentError(
                f"bad tag expression {expression!r}: expected '*' or tags separated by '||', "
                "e.g. 'TagA || TagB' (empty tags, '*' inside a list and single '|' are not allowed)")
        return Subscription(tuple(dict.fromkeys(parts)))

    def matches_codes(self, tags_codes: np.ndarray, topic: str = "") -> np.ndarray:
        """The consume-queue test: ``(int) tagsCode`` in the code set (everything for ``*``).

        Units whose tagsCode is not a tag hash pass, to be decided on the real tag: ConsumeQueueExt addresses
        (<= Integer.MIN_VALUE - 1) and every unit of SCHEDULE_TOPIC_XXXX (its tagsCode is a delivery time).
        """
        codes = np.asarray(tags_codes, dtype=np.int64)
        if self.is_all or topic == L.SCHEDULE_TOPIC:
            return np.ones(len(codes), dtype=bool)
        low = (codes & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        return np.isin(low.astype(np.int64), self.codes) | (codes <= EXT_ADDRESS_MAX)

    def matches_units(self, units: np.ndarray, topic: str = "") -> np.ndarray:
        """:meth:`matches_codes` for consume-queue units, read in place as 32-bit halves of tagsCode (a
        selective read tests every unit of a queue; this touches each once, without int64 temporaries)."""
        if self.is_all or topic == L.SCHEDULE_TOPIC:
            return np.ones(len(units), dtype=bool)
        if units.dtype != L.CQ_UNIT_DTYPE:  # units built elsewhere (e.g. native byte order): the file's layout
            units = units.astype(L.CQ_UNIT_DTYPE)
        words = units.view(L.CQ_TAGS_WORDS_DTYPE)
        # one byte-swapping copy per half, then compares on native contiguous arrays (3x the strided ones)
        low, high = words["tags_low"].astype(np.int32), words["tags_high"].astype(np.int32)
        codes = self.codes.astype(np.int32)
        hit = low == codes[0]
        for code in codes[1:]:
            hit |= low == code
        # tagsCode <= EXT_ADDRESS_MAX (-2^31 - 1) exactly when it is not a sign-extended int and is negative,
        # i.e. when the high half is below the low half's sign extension (low >> 31: 0 or -1)
        np.right_shift(low, 31, out=low)
        hit |= high < low
        return hit


class ConsumeQueue:
    """Read-only consume queue of one (topic, queueId)."""

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int, strays: Optional[list] = None):
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(directory, file_size, strays=strays)
        self.units_per_file = file_size // L.CQ_STORE_UNIT_SIZE
        self.max_offset = self._recover_max_offset()
        self.disk_max_offset = self.max_offset
        # units the real store would write when it opens the store (records past the queue's end)
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)

    def _file_units(self, index: int) -> np.ndarray:
        return np.frombuffer(self.files.buffer(index), dtype=L.CQ_UNIT_DTYPE)

    def _recover_max_offset(self) -> int:
        """Queue offset after the last valid unit (``ConsumeQueue.recover``)."""
        files = self.files.files
        if not files:
            return 0
        index = max(len(files) - UNITS_PER_RECOVERY_FILES, 0)
        while True:
            units = self._file_units(index)
            bad = np.flatnonzero((units["phy_offset"] < 0) | (units["size"] <= 0))
            if len(bad) or index + 1 >= len(files):
                count = int(bad[0]) if len(bad) else len(units)
                return (files[index].from_offset // L.CQ_STORE_UNIT_SIZE) + count
            index += 1

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
            index = self.files.index_of(lo * L.CQ_STORE_UNIT_SIZE)
            base = self.files.files[index].from_offset // L.CQ_STORE_UNIT_SIZE
            parts.append(self._file_units(index)[lo - base:hi - base])
        if tail is not None:
            parts.append(tail)
        if not parts:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        # dtype= keeps the file's big-endian layout (np.concatenate would otherwise hand back native order)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, dtype=L.CQ_UNIT_DTYPE)

    def hash_matches(self, sub: Subscription, start: int, end: int):
        """(queue offsets, units) of the units in ``[start, end)`` whose tag hash ``sub`` accepts, chunk by
        chunk: steps of :data:`HASH_SCAN_UNITS` inside one file keep the arrays in cache and the units are views
        of the mapped file, never copies."""
        for lo, hi in self.file_ranges(max(start, self.first_offset), min(end, self.max_offset)):
            while lo < hi:
                stop = min(hi, lo + HASH_SCAN_UNITS)
                units = self.units(lo, stop)
                keep = np.flatnonzero(sub.matches_units(units, self.topic))
                if len(keep):
                    yield lo + keep, units[keep]
                lo = stop

    def append_virtual(self, phy_offset: int, size: int, tags_code: int) -> None:
        """Add a unit past the on-disk end, as re-dispatch on opening would (``putMessagePositionInfo``)."""
        unit = np.array([(phy_offset, size, tags_code)], dtype=L.CQ_UNIT_DTYPE)
        self.virtual = np.concatenate([self.virtual, unit], dtype=L.CQ_UNIT_DTYPE)
        self.max_offset += 1

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """(file, byte offset) of the unit with ``queue_offset``, for error messages."""
        byte = queue_offset * L.CQ_STORE_UNIT_SIZE
        index = self.files.index_of(byte)
        if index < 0:
            return self.files.directory, byte
        return self.files.files[index].path, byte - self.files.files[index].from_offset

    def last_unit_end(self) -> int:
        """``phy_offset + size`` of the last valid unit (0 when empty): the queue's max physical offset."""
        if self.max_offset <= self.first_offset:
            return 0
        unit = self.units(self.max_offset - 1, self.max_offset)[0]
        return int(unit["phy_offset"]) + int(unit["size"])

    def truncate_at_phy(self, valid_end: int) -> int:
        """Drop the tail of units that point at or past the commit log's valid end, the way
        ``ConsumeQueue.truncateDirtyLogicFiles`` does: scan the last file forward, cut at the first such unit,
        and go back a file when even its first unit is past the end. Returns the new max offset."""
        lo, hi = self.first_offset, self.max_offset
        per = self.units_per_file
        while hi > lo:
            file_lo = max(lo, ((hi - 1) // per) * per)
            over = np.flatnonzero(self.units(file_lo, hi)["phy_offset"] >= valid_end)
            if not len(over):
                break
            hi = file_lo + int(over[0])
            if over[0] > 0:
                break
        self.max_offset = self.disk_max_offset = hi
        return hi

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray:
        """Commit-log offsets in [lo, hi) that units point at; only the consume-queue files whose first and
        last units bracket the range are read in full."""
        parts = []
        per = self.units_per_file
        start = self.first_offset
        while start < self.max_offset:
            stop = min(self.max_offset, (start // per + 1) * per)
            first = int(self.units(start, start + 1)["phy_offset"][0])
            if first >= hi:
                break
            if int(self.units(stop - 1, stop)["phy_offset"][0]) >= lo:
                phy = self.units(start, stop)["phy_offset"].astype(np.int64)
                parts.append(phy[(phy >= lo) & (phy < hi)])
            start = stop
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def phy_offsets_from(self, phy_start: int) -> np.ndarray:
        """Commit-log offsets of the units pointing at or after ``phy_start`` (files are read from the newest
        back only as far as needed: units are in commit-log order)."""
        parts = []
        per = self.units_per_file
        hi = self.max_offset
        while hi > self.first_offset:
            lo = max(self.first_offset, ((hi - 1) // per) * per)
            phy = self.units(lo, hi)["phy_offset"].astype(np.int64)
            cut = int(np.searchsorted(phy, phy_start, side="left"))
            parts.append(phy[cut:])
            if cut > 0:
                break
            hi = lo
        return np.concatenate(parts[::-1]) if parts else np.zeros(0, dtype=np.int64)
