"""``ConsumeQueueProtocol``: what every kind of consume queue answers, whatever its files.

Three kinds implement it: :class:`~.consume_queue.ConsumeQueue` (``consumequeue/`` files of 20-byte units),
:class:`~.batch_consume_queue.BatchConsumeQueue` (``batchconsumequeue/``, 46-byte units covering the messages of
an inner batch) and :class:`~.rocksdb_consume_queue.RocksDBConsumeQueue` (a RocksDB database's keys). The readers
above work on this interface; what differs between the kinds is answered by the queue itself (its min offset,
its time search, the unit re-dispatch adds, which recovered records it lacks), never found by probing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional, Protocol, runtime_checkable

import numpy as np

from ..format.subscription import Subscription


@runtime_checkable
class ConsumeQueueProtocol(Protocol):
    """One (topic, queue id)'s units, in queue-offset space: ``units(start, end)`` are 20-byte-style units
    (``phy_offset``, ``size``, ``tags_code``) of the queue offsets ``[start, end)``."""

    topic: str
    queue_id: int
    is_batch: bool  # queue offsets count the inner messages of batch records (rows are unwrapped)
    unit_times: bool  # the units carry store times: the time search reads them (no commit-log read)
    units_per_file: int
    planned_end: Optional[int]  # the end a planner gave (a lazily loaded file queue), None otherwise

    @property
    def first_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    def units(self, start: int, end: int) -> np.ndarray: ...

    def file_ranges(self, start: int, end: int) -> list[tuple[int, int]]: ...

    def first_at_or_past(self, phy_offset: int, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
        """The first queue offset in ``[lo, hi)`` (default and clipped: the queue's ``[first_offset,
        max_offset)``) whose unit points at or past commit-log ``phy_offset``; ``hi`` when none does."""

    def hash_matches(self, sub: Subscription, start: int, end: int) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...

    def unit_location(self, queue_offset: int) -> tuple[Path, int]: ...

    def last_unit_end(self) -> int: ...

    def truncate_at_phy(self, valid_end: int): ...

    def dropped_units(self, past: int = 0) -> tuple[int, int, int]:
        """``(start, end, phy_offset)`` of the units recovery's truncation dropped that point at or past ``past``
        (and re-dispatch did not write back): lost messages when ``past`` is where the log's records end."""

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray: ...

    def phy_offsets_from(self, phy_start: int) -> np.ndarray: ...

    def min_live_offset(self, min_phy_offset: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""

    def lacks(self, queue_offsets: np.ndarray, phy_offsets: np.ndarray) -> np.ndarray:
        """Per recovered record of this queue, whether re-dispatch would add its unit."""

    def dispatch_recovered(self, queue_offset: int, phy_offset: int, size: int, tags_code: int, store_time: int,
                           properties: dict) -> None:
        """Add (in memory) the unit re-dispatch on opening writes for a recovered record."""


def dropped_tail(end: int, dropped: Optional[tuple[int, int, int]]) -> tuple[int, int, int]:
    """:meth:`ConsumeQueueProtocol.dropped_units` of a queue that recovery cut at ``end``, from what its truncation
    recorded (``dropped``: the queue's end before, after, and the commit-log offset of the first unit dropped):
    ``(start, end, phy_offset)``, ``start == end`` when nothing dropped is left unwritten back."""
    if dropped is None or dropped[1] <= end:
        return end, end, -1
    return end, dropped[1], dropped[2]


def first_live_offset(cq, min_phy_offset: int) -> int:
    """:meth:`ConsumeQueueProtocol.min_live_offset` of a queue of files (units in file ranges): the first unit
    whose record is at or after ``min_phy_offset``."""
    oldest = min_phy_offset
    first = cq.first_offset
    if first < cq.max_offset and (oldest <= 0 or int(cq.units(first, first + 1)["phy_offset"][0]) >= oldest):
        return first  # nothing expired (the usual case): one unit read, or none, instead of a search
    for lo, hi in cq.file_ranges(cq.first_offset, cq.max_offset):
        # a file whose last unit is expired is expired as a whole: the broker's cleaner deletes such files
        # shortly after the commit-log files, a copy taken in between still holds them
        if int(cq.units(hi - 1, hi)["phy_offset"][0]) < oldest:
            continue
        # units point forward through the commit log (leading filler units at 0): binary search the first
        # live one, reading a handful of units instead of the whole file
        return cq.first_at_or_past(oldest, lo, hi)
    return cq.max_offset


__all__ = ["ConsumeQueueProtocol", "first_live_offset"]
