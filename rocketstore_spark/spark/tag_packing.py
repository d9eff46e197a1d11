"""A tag-filtered plan: the consume-queue units whose tag hash matches are counted (or, past a million units,
estimated from samples) on the driver, and the ranges holding matches are packed into partitions of about
``maxMessagesPerPartition`` matching messages."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..store import RocketStore, Subscription
from ..store.format import layout as L
from .planning_types import QueueRangesPartition, StoreHandle


class QueuePiece(NamedTuple):
    """Queue offsets ``[start, end)`` of one consume queue, within one consume-queue file: what a tag plan counts
    matches in (a plain tuple: a store of thousands of queues gives as many pieces per plan)."""

    topic: str
    queue_id: int
    start: int
    end: int


def pack_by_tag_matches(store: RocketStore, handle: StoreHandle, parts: list, sub: Subscription,
                        max_messages: int, min_partitions: Optional[int]) -> list:
    """For a tag-filtered read of the pieces ``parts`` (:class:`QueuePiece`): count the consume-queue units whose
    tag hash matches in each range (the queues' 20-byte units only, never message bytes) and pack ranges into
    partitions of about ``max_messages`` matches, so that a 1%-selective read runs a few tasks instead of one per
    consume-queue file.

    Up to :data:`EXACT_COUNT_UNITS` units in all, the count is exact: ranges without a match are dropped and
    the others trimmed to their first and last match. Past that, counting would be a sequential scan of every
    unit on the driver before the tasks scan them all again in parallel (5M messages: 100 MB, ~15 ms of a
    ~0.25 s query; a month of a busy broker: seconds), so each range's matches are estimated from evenly
    spaced samples (short ranges: from their topic's, see :func:`_sampled_matches`) and the tasks do the only
    full scan.
    """
    total_units = sum(p.end - p.start for p in parts)
    ranges, counts = [], []
    if total_units <= EXACT_COUNT_UNITS:
        # short ranges are counted by the store in one pass over their units, the others queue by queue
        known = store.tag_match_spans([(p.topic, p.queue_id, p.start, p.end) for p in parts], sub)
        for p, span in zip(parts, known):
            count, first, last = span if span is not None else _exact(store, p, sub)
            if count:
                ranges.append((p.topic, p.queue_id, first, last + 1))
                counts.append(count)
    else:
        ranges = [(p.topic, p.queue_id, p.start, p.end) for p in parts]
        counts = _sampled_matches(store, parts, sub)
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


def _exact(store: RocketStore, p, sub: Subscription) -> tuple:
    """(matches, first, last) of one range, counted queue by queue (first and last None without a match)."""
    hits = [offsets[units["size"] != L.CQ_FILLER_SIZE]
            for offsets, units in store.consume_queue(p.topic, p.queue_id).hash_matches(sub, p.start, p.end)]
    hits = [h for h in hits if len(h)]
    return sum(len(h) for h in hits), (int(hits[0][0]) if hits else None), (int(hits[-1][-1]) if hits else None)


def _sampled_matches(store: RocketStore, parts: list, sub: Subscription) -> list:
    """Estimated matches of each range. A range long enough is sampled in blocks (:func:`_estimated_matches`);
    a topic's short ranges are counted exactly until :data:`TOPIC_SAMPLE_UNITS` of its units or
    :data:`TOPIC_SAMPLE_RANGES` of its ranges were seen, and the rest get the topic's match rate (a topic's
    queues share its producers' tags). A store of 20,000 young queues is then planned from a few queues of each
    topic (counted together, in one pass) instead of a read of every queue."""
    seen: dict = {}  # topic -> [units, ranges] chosen for counting
    counted = []
    for i, p in enumerate(parts):
        units = p.end - p.start
        if units > SAMPLE_FRACTION * SAMPLE_BLOCK_UNITS:
            continue
        topic_seen = seen.setdefault(p.topic, [0, 0])
        if topic_seen[0] and (topic_seen[0] >= TOPIC_SAMPLE_UNITS or topic_seen[1] >= TOPIC_SAMPLE_RANGES):
            continue
        topic_seen[0] += units
        topic_seen[1] += 1
        counted.append(i)
    spans = store.tag_match_spans([(parts[i].topic, parts[i].queue_id, parts[i].start, parts[i].end)
                                   for i in counted], sub)
    exact = {i: (span if span is not None else _exact(store, parts[i], sub))[0] for i, span in zip(counted, spans)}
    rate: dict = {}  # topic -> [units counted, matches among them]
    for i, hits in exact.items():
        topic_rate = rate.setdefault(parts[i].topic, [0, 0])
        topic_rate[0] += parts[i].end - parts[i].start
        topic_rate[1] += hits
    out = []
    for i, p in enumerate(parts):
        units = p.end - p.start
        if i in exact:
            out.append(exact[i])
        elif units > SAMPLE_FRACTION * SAMPLE_BLOCK_UNITS:
            out.append(_estimated_matches(store.consume_queue(p.topic, p.queue_id), sub, p.start, p.end))
        else:
            units_seen, hits_seen = rate[p.topic]
            out.append(-(-hits_seen * units // units_seen))
    return out


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
