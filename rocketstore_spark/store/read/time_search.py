"""``getOffsetInQueueByTime``: queue offset of a store timestamp, as RocketMQ 5.3.3 answers it.

Two steps, both reproduced with their quirks:

1. ``MappedFileQueue.getConsumeQueueMappedFileByTime`` picks a consume-queue file from the store times of each
   file's first and last units. For ``upper`` it takes, newest first, the first file whose first unit is not
   later than the timestamp; when every file starts later, the missing ``break`` falls through to the default
   branch and no file is chosen, so the answer is 0 (then clamped to the queue's min offset).
2. ``binarySearchInQueueByTime`` searches inside that one file only: ``lower`` gives the first unit whose time
   is >= the timestamp, ``upper`` the last unit whose time is <= it; out-of-range timestamps give the edges
   described in :func:`search_in_file`.
"""

from __future__ import annotations

from typing import Callable

from ...errors import InvalidArgumentError
from ..files.consume_queue import ConsumeQueue

LOWER = "lower"
UPPER = "upper"


def _unit_time(cq: ConsumeQueue, store_time: Callable[[int, int], int], queue_offset: int) -> int:
    """Store time of the record a unit points at; -1 when it cannot be read (``pickupStoreTimestamp``)."""
    if queue_offset < cq.first_offset or queue_offset >= cq.max_offset:
        return -1
    unit = cq.units(queue_offset, queue_offset + 1)[0]
    return store_time(int(unit["phy_offset"]), int(unit["size"]))


def choose_file(cq: ConsumeQueue, store_time, timestamp: int, boundary: str):
    """(first, end) queue offsets of the file ``getConsumeQueueMappedFileByTime`` selects, or None."""
    per = cq.units_per_file
    first_file = cq.first_offset // per
    last_file = (cq.max_offset - 1) // per
    if cq.max_offset <= cq.first_offset:
        return None
    files = list(range(first_file, last_file + 1))
    if boundary == LOWER:
        for f in files:
            if f == last_file:
                return f
            stop = _unit_time(cq, store_time, (f + 1) * per - 1)
            if stop >= timestamp:
                return f
        return last_file
    for f in reversed(files):
        start = _unit_time(cq, store_time, max(f * per, cq.first_offset))
        if start <= timestamp:
            return f
    return None  # the upstream fall-through: "Unknown boundary type", lookup answers 0


def search_in_file(cq: ConsumeQueue, store_time, file_no: int, timestamp: int, boundary: str,
                   min_phy_offset: int) -> int:
    """``binarySearchInQueueByTime`` within consume-queue file ``file_no``."""
    per = cq.units_per_file
    base = file_no * per
    low = max(cq.first_offset, base)
    end = min(cq.max_offset, base + per)
    if end <= low:
        return 0
    units = {}  # the few units the search probes, read one by one (never the whole file)
    times = {}

    def unit_at(i: int):
        if i not in units:
            units[i] = cq.units(i, i + 1)[0]
        return units[i]

    def time_at(i: int) -> int:
        if i not in times:
            unit = unit_at(i)
            phy = int(unit["phy_offset"])
            times[i] = -1 if phy < min_phy_offset else store_time(phy, int(unit["size"]))
        return times[i]

    floor, ceiling = low, end - 1
    if time_at(ceiling) < timestamp:
        return ceiling + 1 if boundary == LOWER else ceiling
    if time_at(floor) > timestamp:
        return base if boundary == LOWER else 0
    lo, hi = floor, ceiling
    left = right = -1
    target = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        t = time_at(mid)
        if t < 0 and int(unit_at(mid)["phy_offset"]) >= min_phy_offset:
            return 0
        if t == timestamp:
            target = mid
            break
        if t > timestamp:
            hi, right = mid - 1, mid
        else:
            lo, left = mid + 1, mid
    if target >= 0:
        if boundary == LOWER:
            while target - 1 >= floor and time_at(target - 1) == timestamp:
                target -= 1
        else:
            while target + 1 <= ceiling and time_at(target + 1) == timestamp:
                target += 1
        return target
    return right if boundary == LOWER else left


def offset_in_queue_by_time(cq: ConsumeQueue, store_time, timestamp: int, boundary: str,
                            min_phy_offset: int) -> int:
    """The queue offset RocketMQ's ``getOffsetInQueueByTime`` returns, clamped to [min, max]."""
    boundary = str(boundary).lower()
    if boundary not in (LOWER, UPPER):
        raise InvalidArgumentError(f"boundary must be 'lower' or 'upper', found {boundary!r}")
    file_no = choose_file(cq, store_time, timestamp, boundary)
    result = 0 if file_no is None else search_in_file(cq, store_time, file_no, timestamp, boundary,
                                                      min_phy_offset)
    return min(max(result, cq.first_offset), cq.max_offset)

