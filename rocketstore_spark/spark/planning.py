"""Planning a batch read on the driver: which queue-offset ranges (or commit-log ranges) each partition reads.

Plans come from consume-queue files and the recovered valid end only; partitions are small picklable
dataclasses (paths and offsets) and never cross a consume-queue file boundary.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
from pyspark.sql.datasource import InputPartition

from ..errors import DataLossError
from ..store import RocketStore, Subscription, as_path, decode_msg_id, dledger_logs, forget_listings, scandir
from ..store.format import layout as L
from .options import EARLIEST, LATEST, SCAN_COMMITLOG, ReadOptions, StoreRef

log = logging.getLogger("rocketstore_spark")


@dataclass(frozen=True)
class StoreHandle:
    """What an executor needs to open a store without re-running recovery."""

    path: str
    broker: str
    valid_end: int
    sizes: tuple  # commit log, consume queue, index slots, index entries (None: executors detect them)
    # a crashed store (abort present) needs abnormal recovery everywhere: its re-dispatched units exist
    # only in memory, so executors recover it again rather than trusting the valid end alone
    recover: bool = False
    variant: Optional[str] = None  # as the driver found it, so executors read the store the same way
    fs_options: tuple = ()  # a remote store's filesystem settings (see StoreRef)
    settings: tuple = ()  # the broker settings given (BrokerSettings.as_options items), for the same reason

    def open(self, lazy_queues: bool = False) -> RocketStore:
        """The store; ``lazy_queues`` (queue reads) loads only the queues a task names, not all thousands."""
        cl, cq, slots, entries = self.sizes
        return RocketStore.open(self.path, commit_log_file_size=cl, consume_queue_file_size=cq,
                                index_hash_slots=slots, index_max_entries=entries,
                                valid_end=None if self.recover else self.valid_end, variant=self.variant,
                                lazy_queues=lazy_queues and not self.recover, fs_options=dict(self.fs_options),
                                **dict(self.settings))


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    """Queue offsets [start, end) of one consume queue, within one consume-queue file."""

    store: StoreHandle
    topic: str
    queue_id: int
    start: int
    end: int


@dataclass(frozen=True)
class QueueRangesPartition(InputPartition):
    """Several queue ranges read by one task: a selective ``tags`` read packs the ranges whose consume-queue
    units match into partitions of about ``maxMessagesPerPartition`` matching messages. Each range is
    (topic, queue id, start, end) and lies within one consume-queue file, like a :class:`QueuePartition`."""

    store: StoreHandle
    ranges: tuple[tuple[str, int, int, int], ...]


@dataclass(frozen=True)
class CommitLogPartition(InputPartition):
    """Commit-log offsets [start, end) of one commit-log file (scanMode=commitlog)."""

    store: StoreHandle
    start: int
    end: int


@dataclass(frozen=True)
class LookupPartition(InputPartition):
    """Exact records by commit-log offset (from msgId / uniqKey pushdown)."""

    store: StoreHandle
    offsets: tuple[int, ...]


@dataclass
class Pushed:
    """Restrictions taken from pushed-down filters (all optional; None means unrestricted)."""

    topics: Optional[set] = None
    queue_ids: Optional[set] = None
    tags: Optional[set] = None
    queue_offset: tuple = (0, 1 << 62)  # [lo, hi)
    phy_offset: tuple = (0, 1 << 62)
    store_time: tuple = (None, None)  # [lo ms, hi ms)
    uniq_keys: Optional[set] = None
    msg_ids: Optional[set] = None
    empty: bool = False  # contradictory filters: nothing can match
    notes: list = field(default_factory=list)


def handle_sizes(s) -> tuple:
    """The sizes executors open a store with; index sizes the files leave ambiguous are left for them to
    detect again (queue and commit-log reads never need them)."""
    return (s.commit_log_file_size, s.consume_queue_file_size) + \
        ((None, None) if s.index_sizes_problem else (s.index_hash_slots, s.index_max_entries))


def handle_for(store: RocketStore, ref: StoreRef) -> StoreHandle:
    return StoreHandle(ref.path, ref.broker, store.max_phy_offset(), handle_sizes(store.sizes),
                       recover=store.abort_present, variant=store.variant.name, fs_options=ref.fs_options,
                       settings=handle_settings(store))


def handle_settings(store: RocketStore) -> tuple:
    """The broker settings a store was opened with, for executors to open it the same way."""
    return tuple(sorted(store.settings.as_options().items()))


# path → (fingerprint, recovered store), most recent last: Spark reuses the planning Python worker
_RECOVERED: "OrderedDict[str, tuple]" = OrderedDict()
_MAX_PLANNED_STORES = 8  # stores whose maps stay open in the planning worker


def fingerprint(path: str) -> tuple:
    """Names, sizes and modification times of every file recovery looks at (a change means recover again)."""
    forget_listings(path)  # a remote store: list it as it is now
    root = as_path(path)
    seen = []
    for sub in [L.COMMITLOG_DIR, L.INDEX_DIR] + [str(p.relative_to(root)) for p in dledger_logs(root)]:
        seen.extend((sub, e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in scandir(root / sub))
    base = root / L.CONSUMEQUEUE_DIR
    for topic in scandir(base):
        for queue in (scandir(topic.path) if topic.is_dir() else []):
            if queue.is_dir():
                seen.extend((topic.name, queue.name, e.name, e.stat().st_mtime_ns) for e in scandir(queue.path))
    for name in (L.ABORT_FILE, L.CHECKPOINT_FILE):
        if (root / name).exists():
            seen.append((name, (root / name).stat().st_mtime_ns))
    return tuple(sorted(seen, key=repr))


def open_store(ref: StoreRef, opts: ReadOptions) -> RocketStore:
    """The store, recovered; a store whose files did not change since the last plan is not recovered again.

    The cache owns the store and keeps its consume-queue maps open between plans (a tag-filtered plan reads
    every unit; re-mapping would fault every page in again); a store that changed is closed and replaced.
    """
    key = (fingerprint(ref.path), tuple(sorted(opts.sizes.items())), opts.variant, tuple(sorted(opts.settings.items())))
    cached = _RECOVERED.get(ref.path)
    if cached is not None and cached[0] == key:
        _RECOVERED.move_to_end(ref.path)
        return cached[1]
    store = RocketStore.open(ref.path, variant=opts.variant, fs_options=dict(ref.fs_options), **opts.sizes,
                             **opts.settings)
    store.max_phy_offset()  # recover now, so the cached object carries the result
    if cached is not None:
        _RECOVERED.pop(ref.path)[1].close()
    _RECOVERED[ref.path] = (key, store)
    while len(_RECOVERED) > _MAX_PLANNED_STORES:
        _RECOVERED.popitem(last=False)[1][1].close()
    return store


def _offset_for(spec, ref: StoreRef, topic: str, qid: int, multi: bool, default: str):
    """The requested offset for a queue from earliest/latest/JSON (None = the default edge)."""
    if isinstance(spec, str):
        return spec
    node = spec.get(ref.broker, {}) if multi else spec
    value = node.get(topic, {}).get(str(qid))
    if value is None:
        return default
    return EARLIEST if value == -2 else LATEST if value == -1 else int(value)


def queue_range(store: RocketStore, ref: StoreRef, opts: ReadOptions, pushed: Pushed, topic: str, qid: int,
                multi: bool) -> tuple[int, int]:
    """[start, end) queue offsets to read for one queue after options and pushdown."""
    lo_min, hi_max = store.min_offset(topic, qid), store.max_offset(topic, qid)
    start = _offset_for(opts.starting_offsets, ref, topic, qid, multi, EARLIEST)
    end = _offset_for(opts.ending_offsets, ref, topic, qid, multi, LATEST)
    start = lo_min if start == EARLIEST else hi_max if start == LATEST else start
    end = lo_min if end == EARLIEST else hi_max if end == LATEST else min(end, hi_max)
    if opts.starting_timestamp is not None:
        start = store.offset_by_time(topic, qid, opts.starting_timestamp, "lower")
    if opts.ending_timestamp is not None:
        end = store.offset_by_time(topic, qid, opts.ending_timestamp, "lower")
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
    cq = store.consume_queue(topic, qid)
    if pushed.phy_offset != (0, 1 << 62) and start < end:
        # units point forward through the commit log: two binary searches, not a read of the range
        start, end = (cq.first_at_or_past(pushed.phy_offset[0], start, end),
                      cq.first_at_or_past(pushed.phy_offset[1], start, end))
    lo_t, hi_t = pushed.store_time
    if lo_t is not None and start < end:
        start = max(start, store.offset_by_time(topic, qid, lo_t, "lower"))
    if hi_t is not None and start < end:
        end = min(end, store.offset_by_time(topic, qid, hi_t, "lower"))
    return start, max(start, end)


def split_range(start: int, end: int, per_file: int, max_messages: int) -> list[tuple[int, int]]:
    """Split at consume-queue file boundaries, then into pieces of at most ``max_messages``."""
    out = []
    while start < end:
        stop = min(end, (start // per_file + 1) * per_file, start + max_messages)
        out.append((start, stop))
        start = stop
    return out


def plan(opts: ReadOptions, pushed: Pushed) -> list[InputPartition]:
    """Every partition of a batch read."""
    parts: list[InputPartition] = []
    if pushed.empty:
        return parts
    multi = len(opts.stores) > 1
    for ref in opts.stores:
        store = open_store(ref, opts)
        handle = handle_for(store, ref)
        if opts.scan_mode == SCAN_COMMITLOG:
            parts.extend(_plan_commitlog(store, handle, pushed))
            continue
        topics = [t for t in store.topics() if opts.wants_topic(t)
                  and (pushed.topics is None or t in pushed.topics)]
        if pushed.msg_ids is not None or pushed.uniq_keys is not None:
            parts.extend(_plan_lookups(store, handle, topics, pushed))
            continue
        per_file = store.sizes.consume_queue_file_size // L.CQ_STORE_UNIT_SIZE
        queue_parts = []
        for topic in topics:
            for qid in store.queue_ids(topic):
                if pushed.queue_ids is not None and qid not in pushed.queue_ids:
                    continue
                start, end = queue_range(store, ref, opts, pushed, topic, qid, multi)
                for lo, hi in split_range(start, end, per_file, opts.max_messages_per_partition):
                    queue_parts.append(QueuePartition(handle, topic, qid, lo, hi))
        tags = effective_tags(opts, pushed)
        if tags is not None and tags:
            queue_parts = pack_by_tag_matches(store, handle, queue_parts, Subscription.parse(tags),
                                              opts.max_messages_per_partition, opts.min_partitions)
        parts.extend(queue_parts)
    return _ensure_min_partitions(parts, opts.min_partitions)


def effective_tags(opts: ReadOptions, pushed: Pushed):
    """The subscription to read with: the ``tags`` option, narrowed by pushed ``tags`` filters."""
    option_tags = set(Subscription.parse(opts.tags).tags) if opts.tags else None
    tags = pushed.tags if option_tags is None else (option_tags if pushed.tags is None else option_tags & pushed.tags)
    return None if tags is None else sorted(tags)


def pack_by_tag_matches(store: RocketStore, handle: StoreHandle, parts: list, sub: Subscription,
                        max_messages: int, min_partitions: Optional[int]) -> list:
    """For a tag-filtered read: count the consume-queue units whose tag hash matches in each range (the
    queues' 20-byte units only, never message bytes) and pack ranges into partitions of about ``max_messages``
    matches, so that a 1%-selective read runs a few tasks instead of one per consume-queue file.

    Up to :data:`EXACT_COUNT_UNITS` units in all, the count is exact: ranges without a match are dropped and
    the others trimmed to their first and last match. Past that, counting would be a sequential scan of every
    unit on the driver before the tasks scan them all again in parallel (5M messages: 100 MB, ~15 ms of a
    ~0.25 s query; a month of a busy broker: seconds), so each range's matches are estimated from evenly
    spaced samples and the tasks do the only full scan.
    """
    total_units = sum(p.end - p.start for p in parts)
    ranges, counts = [], []
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
            counts.append(_estimated_matches(cq, sub, p.start, p.end))
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
SCAN_UNITS_PER_PARTITION = 2_500_000  # consume-queue units (50 MB) one task of a tag-filtered read examines


def _plan_commitlog(store: RocketStore, handle: StoreHandle, pushed: Pushed) -> list[InputPartition]:
    lo = max(store.min_phy_offset(), pushed.phy_offset[0])
    hi = min(handle.valid_end, pushed.phy_offset[1])
    size = store.sizes.commit_log_file_size
    out = []
    pos = lo
    while pos < hi:
        stop = min(hi, (pos // size + 1) * size)
        out.append(CommitLogPartition(handle, pos, stop))
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
