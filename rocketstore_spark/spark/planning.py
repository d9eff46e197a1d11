"""Planning a batch read on the driver: which queue-offset ranges (or commit-log stretches) each partition reads.

Plans come from consume-queue files and the recovered valid end only; partitions are small picklable
dataclasses (paths and offsets, :mod:`.planning_types`). Per store the read is either a consume-queue plan (queue
ranges that never cross a consume-queue file, packed into partitions by size; :mod:`.tag_packing` for tag
filters) or a commit-log-ordered one (:mod:`.ordered_plan`, which also makes the choice); pushed msgId / uniqKey
filters become lookups, and ``scanMode=raw`` scans every record of the commit log.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Optional

import numpy as np
from pyspark.sql.datasource import InputPartition

from ..errors import DataLossError
from ..store import (
    RocketStore,
    Subscription,
    decode_msg_id,
    is_remote,
    store_path,
)
from ..store.format import layout as L
from .history_plan import plan_history
from .option_spec import check_selection
from .options import EARLIEST, LATEST, SCAN_COMMITLOG, SCAN_RAW, ReadOptions, StoreRef, partition_bytes
from .ordered_plan import QueueRange, Spans, choose, commitlog_unsupported, plan_slices
from .plan_memo import PLANS, memo_key
from .planning_types import (  # noqa: F401 - re-exported: the partition kinds are planning's vocabulary
    CommitLogSlicePartition,
    LookupPartition,
    Pushed,
    QueuePartition,
    QueueRangesPartition,
    RawScanPartition,
    StoreHandle,
    handle_for,
    handle_settings,
    handle_sizes,
)
from .store_cache import open_cached
from .store_snapshot import files_stamp
from .tag_packing import QueuePiece, pack_by_tag_matches
from .worker_gc import settle_in_worker

log = logging.getLogger("rocketstore_spark")


def plan_key(path: str) -> tuple:
    """The key of the store a planner opened from ``path`` in :data:`~.store_cache.OPEN_STORES`."""
    return ("plan", path)


def open_store(ref: StoreRef, opts: ReadOptions) -> RocketStore:
    """The store, recovered; a store whose files did not change since the last plan is not recovered again.

    The worker's cache (:func:`.store_cache.open_cached`) owns the store and keeps its consume-queue maps open
    between plans (a tag-filtered plan reads every unit; re-mapping would fault every page in again); a store
    that changed is closed and replaced. Unchanged means: opened with the same options, and for a local store
    every stat of :class:`.StoreSnapshot` as it was, for a remote one the same listing
    (:class:`.ListingFingerprint`).
    """
    options = (tuple(sorted(opts.sizes.items())), opts.variant, tuple(sorted(opts.settings.items())))
    if is_remote(ref.path):
        store_path(ref.path, dict(ref.fs_options))  # the listings below go through the store's filesystem

    def recovered() -> RocketStore:
        # a store rocketstore wrote last opens from its writer's record of the end when that still holds (the
        # CRC-checked walk of the last commit-log file is most of a cold plan's open)
        store = RocketStore.open(ref.path, variant=opts.variant, fs_options=dict(ref.fs_options), **opts.sizes,
                                 **opts.settings, trust_recorded_end=True)
        store.max_phy_offset()  # recover now, so the cached object carries the result
        return store

    return open_cached(plan_key(ref.path), options, recovered,
                       lambda store, opened_at: files_stamp(store, ref.path, opened_at))


def _offset_for(spec, ref: StoreRef, topic: str, qid: int, multi: bool, default: str):
    """The requested offset for a queue from earliest/latest/JSON (None = the default edge)."""
    if isinstance(spec, str):
        return spec
    node = spec.get(ref.broker, {}) if multi else spec
    value = node.get(topic, {}).get(str(qid))
    if value is None:
        return default
    return EARLIEST if value == -2 else LATEST if value == -1 else int(value)


def _time_for(spec: Optional[dict], ref: StoreRef, topic: str, qid: int, multi: bool) -> Optional[int]:
    """The time (epoch ms) ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` give a queue, if any."""
    if spec is None:
        return None
    node = spec.get(ref.broker, {}) if multi else spec
    return node.get(topic, {}).get(str(qid))


def queue_range(store: RocketStore, ref: StoreRef, opts: ReadOptions, pushed: Pushed, topic: str, qid: int,
                multi: bool) -> tuple[int, int]:
    """[start, end) queue offsets to read for one queue after options and pushdown."""
    r = queue_bounds(store, ref, opts, pushed, topic, qid, multi)
    return r.lo, r.hi


def queue_bounds(store: RocketStore, ref: StoreRef, opts: ReadOptions, pushed: Pushed, topic: str, qid: int,
                 multi: bool, lost: Optional[list] = None) -> QueueRange:
    """The queue offsets to read for one queue after options and pushdown, with the queue's own range.
    ``lost``: collects the queue's lost messages (:meth:`RocketStore.lost_ranges_of`) the read asks for: units
    pointing into missing commit-log files inside the range read, units past the log's end when it reads to them."""
    lo_min, hi_max = store.queue_edges(topic, qid)
    start = _offset_for(opts.starting_offsets, ref, topic, qid, multi, EARLIEST)
    end = _offset_for(opts.ending_offsets, ref, topic, qid, multi, LATEST)
    start_time = _time_for(opts.starting_timestamps, ref, topic, qid, multi)
    end_time = _time_for(opts.ending_timestamps, ref, topic, qid, multi)
    gone = [] if lost is None else store.lost_ranges_of(store.consume_queue(topic, qid))
    # units past the log's end are asked for by a read to the end (or past it)
    past_end = [r for r in gone if r.gap_end is None and opts.ending_timestamp is None and end_time is None
                and (end == LATEST or isinstance(end, int) and end > hi_max)
                and (not isinstance(start, int) or start < r.end)]
    start = lo_min if start == EARLIEST else hi_max if start == LATEST else start
    end = lo_min if end == EARLIEST else hi_max if end == LATEST else min(end, hi_max)
    if opts.starting_timestamp is not None:
        start = store.offset_by_time(topic, qid, opts.starting_timestamp, "lower")
    if opts.ending_timestamp is not None:
        end = store.offset_by_time(topic, qid, opts.ending_timestamp, "lower")
    if start_time is not None:
        start = store.offset_by_time(topic, qid, start_time, "lower")
    if end_time is not None:
        end = store.offset_by_time(topic, qid, end_time, "lower")
    if start < lo_min:
        if opts.fail_on_data_loss and start < end:
            raise DataLossError(
                f"{ref.broker}/{topic}/{qid}: requested offsets {start}..{lo_min} are gone (their commit-log "
                f"files expired; the queue now starts at {lo_min}). Start from {lo_min} ('earliest') or set "
                "failOnDataLoss=false to skip what was lost")
        log.warning("%s/%s/%s: offsets %s..%s expired, skipping them", ref.broker, topic, qid, start, lo_min)
        start = lo_min
    start = max(start, pushed.queue_offset[0])
    end = min(end, pushed.queue_offset[1])
    if pushed.phy_offset != (0, 1 << 62) and start < end:
        # units point forward through the commit log: two binary searches, not a read of the range
        cq = store.consume_queue(topic, qid)
        start, end = (cq.first_at_or_past(pushed.phy_offset[0], start, end),
                      cq.first_at_or_past(pushed.phy_offset[1], start, end))
    lo_t, hi_t = pushed.store_time
    if lo_t is not None and start < end:
        start = max(start, store.offset_by_time(topic, qid, lo_t, "lower"))
    if hi_t is not None and start < end:
        end = min(end, store.offset_by_time(topic, qid, hi_t, "lower"))
    # units pointing into missing commit-log files, by a read whose range holds some of them
    if lost is not None:
        lost += [r for r in gone if r.gap_end is not None and r.start < end and start < r.end] + past_end
    return QueueRange(topic, qid, start, max(start, end), lo_min, hi_max)


def report_lost(ref: StoreRef, lost: list, fail_on_data_loss: bool,
                advice: str = "Set endingOffsets before them, or failOnDataLoss=false to read what is left") -> None:
    """Messages a read asks for that the store lost (a cut copy: see ``RocketStore.lost_ranges``): a
    DataLossError naming them and what to do (``advice``), or with ``failOnDataLoss=false`` one warning for the
    plan."""
    if not lost:
        return
    total = sum(r.count for r in lost)
    queues = len({(r.topic, r.queue_id) for r in lost})  # a queue may have lost several ranges
    shown = "; ".join(r.describe() for r in lost[:5]) + (f"; and {len(lost) - 5} more ranges" if len(lost) > 5 else "")
    what = f"{ref.broker}: {total} messages of {queues} queues are lost: {shown}"
    if fail_on_data_loss:
        raise DataLossError(f"{what}. {advice}")
    log.warning("%s; reading what is left (failOnDataLoss=false)", what)


def split_range(start: int, end: int, per_file: int, max_messages: int) -> list[tuple[int, int]]:
    """Split at consume-queue file boundaries, then into pieces of at most ``max_messages``."""
    out = []
    while start < end:
        stop = min(end, (start // per_file + 1) * per_file, start + max_messages)
        out.append((start, stop))
        start = stop
    return out


def plan(opts: ReadOptions, pushed: Pushed) -> list[InputPartition]:
    """Every partition of a batch read: per store a consume-queue plan or a commit-log-ordered one (see
    :func:`~.ordered_plan.choose`), a lookup plan for pushed msgId / uniqKey filters, or with ``scanMode=raw``
    every record of the commit log. A store unchanged since it was planned with the same options and filters
    gets the same partitions again (:mod:`.plan_memo`)."""
    parts: list[InputPartition] = []
    if opts.tiered_path is not None:
        return plan_history(opts, pushed)
    if pushed.empty:
        return parts
    multi = len(opts.stores) > 1
    for ref in opts.stores:
        store = open_store(ref, opts)
        settle_in_worker(store)  # the planning worker keeps it: the collection after each plan skips it
        key = memo_key(ref, opts, pushed)
        planned = PLANS.get(key, store)
        if planned is None:
            planned, reported = _plan_store(store, ref, opts, pushed, multi)
            if not reported:  # a plan that reported lost messages reports them again next time
                PLANS.put(key, store, planned)
        parts.extend(planned)
    return _ensure_min_partitions(parts, opts.min_partitions)


def _plan_store(store: RocketStore, ref: StoreRef, opts: ReadOptions, pushed: Pushed,
                multi: bool) -> tuple[list, bool]:
    """One store's partitions (see :func:`plan`), and whether planning them reported lost messages."""
    check_selection(opts, ref, store.topics(), store.queue_ids)
    handle = handle_for(store, ref)
    if opts.scan_mode == SCAN_RAW:
        lost = store.lost_ranges()
        report_lost(ref, lost, opts.fail_on_data_loss)
        return _plan_raw(store, handle, pushed), bool(lost)
    topics = [t for t in store.topics() if opts.wants_topic(t)
              and (pushed.topics is None or t in pushed.topics)]
    if pushed.msg_ids is not None or pushed.uniq_keys is not None:
        return _plan_lookups(store, handle, topics, pushed), False
    tags = effective_tags(opts, pushed)
    if tags is not None and not tags:
        return [], False  # contradictory tag filters: nothing matches
    lost: list = []
    ranges = [queue_bounds(store, ref, opts, pushed, topic, qid, multi, lost) for topic in topics
              for qid in store.queue_ids(topic) if pushed.queue_ids is None or qid in pushed.queue_ids]
    report_lost(ref, lost, opts.fail_on_data_loss)
    spans = None if tags is not None or commitlog_unsupported(store, ranges) else Spans(store, ranges)
    choice = choose(store, opts, ranges, tags, spans)
    if choice.mode == SCAN_COMMITLOG:
        planned = plan_slices(store, handle, spans if spans is not None else Spans(store, ranges), opts)
    else:
        planned = _plan_queues(store, handle, ranges, opts, tags, choice.avg_size)
    log.info("rocketstore %s: %s plan, %d partitions (%s)", ref.broker,
             "commit-log-ordered" if choice.mode == SCAN_COMMITLOG else "consume-queue", len(planned),
             choice.reason)
    return planned, bool(lost)


def _plan_queues(store: RocketStore, handle: StoreHandle, ranges: list, opts: ReadOptions, tags,
                 avg_size: Optional[float]) -> list:
    """The consume-queue plan: ranges split at consume-queue files, then packed into partitions of about
    ``maxMessagesPerPartition`` messages and ``maxBytesPerPartition`` bytes (estimated from the average message
    size); with a tag filter, packed by their matching units instead."""
    per_file = store.sizes.consume_queue_file_size // L.CQ_STORE_UNIT_SIZE
    total = sum(r.hi - r.lo for r in ranges)
    if tags is not None:
        budget = opts.max_messages_per_partition
    else:
        per_message = max(avg_size or 0.0, 1.0)
        budget = max(1, min(opts.max_messages_per_partition,
                            int(partition_bytes(opts, int(total * per_message)) // per_message)))
    if tags is None and opts.min_partitions:
        budget = max(1, min(budget, -(-total // opts.min_partitions)))
    pieces = [(r.topic, r.queue_id, lo, hi) for r in ranges for lo, hi in split_range(r.lo, r.hi, per_file, budget)]
    if tags is None:
        return pack_ranges(handle, pieces, budget)
    return pack_by_tag_matches(store, handle, [QueuePiece(*p) for p in pieces], Subscription.parse(tags),
                               opts.max_messages_per_partition, opts.min_partitions)


def pack_ranges(handle: StoreHandle, ranges: list, max_messages: int) -> list:
    """Queue ranges into partitions of at most ``max_messages`` messages, in order: a range that fills a
    partition alone stays a :class:`QueuePartition`, runs of smaller ones share a :class:`QueueRangesPartition`."""
    parts, current, filled = [], [], 0
    for rng in ranges + [None]:
        size = 0 if rng is None else rng[3] - rng[2]
        if current and (rng is None or filled + size > max_messages):
            parts.append(QueuePartition(handle, *current[0]) if len(current) == 1
                         else QueueRangesPartition(handle, tuple(current)))
            current, filled = [], 0
        if rng is not None:
            current.append(rng)
            filled += size
    return parts


def effective_tags(opts: ReadOptions, pushed: Pushed):
    """The subscription to read with: the ``tags`` option, narrowed by pushed ``tags`` filters."""
    sub = Subscription.parse(opts.tags) if opts.tags else None
    option_tags = None if sub is None or sub.is_all else set(sub.tags)  # "*": every tag, as no option
    tags = pushed.tags if option_tags is None else (option_tags if pushed.tags is None else option_tags & pushed.tags)
    return None if tags is None else sorted(tags)


def _plan_raw(store: RocketStore, handle: StoreHandle, pushed: Pushed) -> list[InputPartition]:
    lo = max(store.min_phy_offset(), pushed.phy_offset[0])
    hi = min(handle.valid_end, pushed.phy_offset[1])
    size = store.sizes.commit_log_file_size
    out = []
    pos = lo
    while pos < hi:
        stop = min(hi, (pos // size + 1) * size)
        out.append(RawScanPartition(handle, pos, stop))
        pos = stop
    return out


def _plan_lookups(store: RocketStore, handle: StoreHandle, topics, pushed: Pushed) -> list[InputPartition]:
    offsets = set()
    for msg_id in pushed.msg_ids or ():
        try:
            offsets.add(decode_msg_id(msg_id)[2])
        except ValueError:
            continue  # not an offsetMsgId: matches no row
    for key in pushed.uniq_keys or ():
        for topic in topics:
            table = store.query_by_key(topic, key, columns=("commitLogOffset", "uniqKey"))
            offsets.update(o for o, u in zip(table.column(0).to_pylist(), table.column(1).to_pylist()) if u == key)
    valid = tuple(sorted(o for o in offsets if store.min_phy_offset() <= o < handle.valid_end))
    return [LookupPartition(handle, valid)] if valid else []


def _ensure_min_partitions(parts: list, min_partitions: Optional[int]) -> list:
    """Split the largest queue partitions until there are at least ``min_partitions``."""
    if not min_partitions:
        return parts
    while len(parts) < min_partitions:
        sizes = [p.end - p.start if isinstance(p, QueuePartition) else 0 for p in parts]
        if not sizes or max(sizes) < 2:
            break
        i = int(np.argmax(sizes))
        p = parts[i]
        mid = p.start + (p.end - p.start) // 2
        parts[i:i + 1] = [replace(p, end=mid), replace(p, start=mid)]
    return parts
