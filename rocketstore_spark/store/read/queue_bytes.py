"""How many bytes a run of queue offsets holds: the stored record sizes its consume-queue units carry.

Byte-bounded reads (a stream's ``maxBytesPerTrigger``) and byte lag need them without touching the commit log. The
units are read in chunks that start at :data:`FIRST_CHUNK_UNITS` and double up to :data:`CHUNK_UNITS`, so a long
run never loads all of its units at once and a count with a cap reads little past where it reaches the cap.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..files.queue_protocol import ConsumeQueueProtocol

#: the most units read at a time (20 bytes each in a plain consume queue: 20 MiB), and the first chunk's units
CHUNK_UNITS = 1 << 20
FIRST_CHUNK_UNITS = 1 << 12


def _chunks(start: int, end: int):
    step = FIRST_CHUNK_UNITS
    while start < end:
        stop = min(end, start + step)
        yield start, stop
        start, step = stop, min(step * 2, CHUNK_UNITS)


def bytes_between(cq: ConsumeQueueProtocol, start: int, end: int, cap: Optional[int] = None) -> int:
    """The bytes of the messages at queue offsets ``[start, end)``; with ``cap``, counting stops at the first
    chunk of units that reaches it (the result is then at least ``cap``)."""
    total = 0
    for lo, hi in _chunks(start, end):
        if cap is not None and total >= cap:
            break
        total += int(cq.units(lo, hi)["size"].sum(dtype=np.int64))
    return total


def offset_within_bytes(cq: ConsumeQueueProtocol, start: int, end: int, max_bytes: int) -> int:
    """The end of the longest run from ``start`` (before ``end``) whose messages hold at most ``max_bytes``; at
    least ``start + 1`` when ``start < end``, so a message larger than the bound is still read."""
    if start >= end:
        return start
    used = 0
    for lo, hi in _chunks(start, end):
        sizes = np.cumsum(cq.units(lo, hi)["size"], dtype=np.int64) + used
        fits = int(np.searchsorted(sizes, max_bytes, side="right"))
        if fits < len(sizes):
            return max(lo + fits, start + 1)
        used = int(sizes[-1])
    return end


__all__ = ["CHUNK_UNITS", "FIRST_CHUNK_UNITS", "bytes_between", "offset_within_bytes"]
