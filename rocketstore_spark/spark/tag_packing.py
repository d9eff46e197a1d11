"""A tag-filtered plan: the consume-queue units whose tag hash matches are counted (or, past a million units,
estimated from samples) on the driver, and the ranges holding matches are packed into partitions of about
``maxMessagesPerPartition`` matching messages."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..store import RocketStore, Subscription
from ..store.format import layout as L
from .planning_types import QueueRangesPartition, StoreHandle


def pack_by_tag_matches(store: RocketStore, handle: StoreHandle, parts: list, sub: Subscription,
                        max_messages: int, min_partitions: Optional[int]) -> list:
    """For a tag-filtered read: count the consume-queue units whose tag hash matches in each range (the
    queues' 20-byte units only, never message bytes) and pack ranges into partitions of about ``max_messages``
    matches, so that a 1%-selective read runs a few tasks instead of one per consume-queue file.

    Up to :data:`EXACT_COUNT_UNITS` units in all, the count is exact: ranges without a match are dropped and
    the others trimmed to their first and last match. Past that, counting would be a sequential scan of every
    unit on the driver before the tasks scan them all again in parallel (5M messages: 100 MB, ~15 ms of a
    ~0.25 s query; a month of a busy broker: seconds), so each range's matches are estimated from evenly
    spaced samples (short ranges: from their topic's, see :class:`_TopicSamples`) and the tasks do the only
    full scan.
    """
    total_units = sum(p.end - p.start for p in parts)
    ranges, counts = [], []
    sampled = _TopicSamples()
    for p in parts:
        cq = store.consume_queue(p.topic, p.queue_id)
        if total_units <= EXACT_COUNT_UNITS:
            hits = [offsets[units["size"] != L.CQ_FILLER_SIZE]
                    for offsets, units in cq.hash_matches(sub, p.start, p.end)]
            count = sum(len(h) for h in hits)
            if count:
                first = next(int(h[0]) for h in hits if len(h))
                last = next(int(h[-1]) for h in reversed(hits) if len(h))
                ranges.append((p.topic, p.queue_id, first, last + 1))
                counts.append(count)
        else:
            ranges.append((p.topic, p.queue_id, p.start, p.end))
            counts.append(sampled.matches(cq, sub, p.start, p.end))
    if not ranges:
        return []
    total = sum(counts)
    budget = max_messages if not min_partitions else max(1, min(max_messages, -(-total // min_partitions)))
    # the units a task scans cost too: past SCAN_UNITS_PER_PARTITION a second task shares the scan
    packed, current, filled, scanned = [], [], 0, 0
    for rng, count in zip(ranges, counts):
        units = rng[3] - rng[2]
        if current and (filled + count > budget or scanned + units > SCAN_UNITS_PER_PARTITION):
            packed.append(QueueRangesPartition(handle, tuple(current)))
            current, filled, scanned = [], 0, 0
        current.append(rng)
        filled += count
        scanned += units
    packed.append(QueueRangesPartition(handle, tuple(current)))
    return packed


class _TopicSamples:
    """Estimated matches of ranges too short to sample in blocks: a topic's short ranges are counted exactly
    until :data:`TOPIC_SAMPLE_UNITS` of its units or :data:`TOPIC_SAMPLE_RANGES` of its ranges were seen; the
    rest get the topic's match rate (a topic's queues share its producers' tags). A store of 20,000 young
    queues is then planned from a few queues of each topic instead of a read of every queue."""

    def __init__(self):
        self.seen: dict[str, list] = {}  # topic -> [units counted, matches among them, ranges counted]

    def matches(self, cq, sub: Subscription, start: int, end: int) -> int:
        units = end - start
        if units > SAMPLE_FRACTION * SAMPLE_BLOCK_UNITS:
            return _estimated_matches(cq, sub, start, end)
        seen = self.seen.setdefault(cq.topic, [0, 0, 0])
        if seen[0] and (seen[0] >= TOPIC_SAMPLE_UNITS or seen[2] >= TOPIC_SAMPLE_RANGES):
            return -(-seen[1] * units // seen[0])
        hits = sum(int(np.count_nonzero(u["size"] != L.CQ_FILLER_SIZE)) for _, u in cq.hash_matches(sub, start, end))
        seen[0] += units
        seen[1] += hits
        seen[2] += 1
        return hits


def _estimated_matches(cq, sub: Subscription, start: int, end: int) -> int:
    """Matching units in ``[start, end)`` estimated from about 1/:data:`SAMPLE_FRACTION` of them, taken as
    :data:`SAMPLE_BLOCK_UNITS`-unit blocks spread evenly over the range (matches are often clustered in time,
    so one block from the start would not do)."""
    units = end - start
    blocks = max(1, units // (SAMPLE_FRACTION * SAMPLE_BLOCK_UNITS))
    step = units // blocks
    sampled = hits = 0
    for b in range(blocks):
        lo = start + b * step
        hi = min(end, lo + SAMPLE_BLOCK_UNITS)
        sampled += hi - lo
        hits += sum(int(np.count_nonzero(u["size"] != L.CQ_FILLER_SIZE)) for _, u in cq.hash_matches(sub, lo, hi))
    return -(-hits * units // sampled) if sampled else 0


EXACT_COUNT_UNITS = 1_000_000  # consume-queue units (20 MB, ~3 ms) a tag-filtered plan counts exactly
SAMPLE_BLOCK_UNITS = 4096
SAMPLE_FRACTION = 16  # past EXACT_COUNT_UNITS, one unit in about this many is tested on the driver
TOPIC_SAMPLE_UNITS = 1024  # short ranges of a topic counted exactly before its rate stands for the rest
TOPIC_SAMPLE_RANGES = 2  # ... or this many of its ranges
SCAN_UNITS_PER_PARTITION = 2_500_000  # consume-queue units (50 MB) one task of a tag-filtered read examines
