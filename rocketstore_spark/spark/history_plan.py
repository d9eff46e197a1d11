"""Batch reads with ``tieredStorePath``: a broker's tiered storage (file backend), alone or with its local store,
read as one queue-ordered history per queue (see ``docs/tiered.md``).

One partition per queue range of at most ``maxMessagesPerPartition`` offsets; each opens the history through the
facade (``RocketStore.open_history``) and reads its range, the local store's rows where it holds them and the
tiered storage's elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ..store import RocketStore
from .options import EARLIEST, LATEST, ReadOptions


@dataclass(frozen=True)
class HistoryHandle:
    """What an executor needs to open the history: the local store (None: the tiered storage alone) and the
    tiered directory, with the options the local store opens with."""

    path: Optional[str]
    broker: str
    tiered_path: str
    sizes: tuple = ()  # RocketStore.open size keywords, as sorted items
    variant: Optional[str] = None
    settings: tuple = ()
    fs_options: tuple = ()
    valid_end: Optional[int] = None  # the local store's valid end the planner found: executors skip recovery

    def open(self):
        options = {**dict(self.sizes), **dict(self.settings)}
        if self.path is not None:
            options.update(variant=self.variant, fs_options=dict(self.fs_options), valid_end=self.valid_end)
        return RocketStore.open_history(self.path, tiered_path=self.tiered_path, **options)


@dataclass(frozen=True)
class HistoryPartition(InputPartition):
    """Queue offsets [start, end) of one queue's history."""

    handle: HistoryHandle
    topic: str
    queue_id: int
    start: int
    end: int

    def read(self, request) -> Iterator[pa.RecordBatch]:
        def batches():
            with self.handle.open() as history:
                yield from history.read_queue(self.topic, self.queue_id, self.start, self.end,
                                              columns=request.with_filter_columns())

        return request.filtered(batches())


def _edge(spec, topic: str, qid: int, default: str, lo: int, hi: int) -> int:
    value = spec if isinstance(spec, str) else spec.get(topic, {}).get(str(qid), default)
    if value in (EARLIEST, -2):
        return lo
    if value in (LATEST, -1):
        return hi
    return int(value)


def plan_history(opts: ReadOptions, pushed) -> list:
    """The partitions of a read with ``tieredStorePath``."""
    ref = opts.stores[0]
    handle = HistoryHandle(ref.path or None, ref.broker, opts.tiered_path, tuple(sorted(opts.sizes.items())),
                           opts.variant, tuple(sorted(opts.settings.items())), ref.fs_options)
    parts: list = []
    if pushed.empty:
        return parts
    with handle.open() as history:
        if history.local is not None and not history.local.abort_present:
            handle = replace(handle, valid_end=history.local.max_phy_offset())
        for topic in history.topics():
            if not opts.wants_topic(topic) or (pushed.topics is not None and topic not in pushed.topics):
                continue
            hits = None if pushed.uniq_keys is None else _key_hits(history, topic, pushed.uniq_keys)
            for qid in history.queue_ids(topic):
                if pushed.queue_ids is not None and qid not in pushed.queue_ids:
                    continue
                ranges = history.ranges(topic, qid)
                lo_min, hi_max = ranges.first, ranges.end
                start = _edge(opts.starting_offsets, topic, qid, EARLIEST, lo_min, hi_max)
                end = _edge(opts.ending_offsets, topic, qid, LATEST, lo_min, hi_max)
                start, end = _times(history, opts, pushed, topic, qid, start, end)
                start = max(start, lo_min, pushed.queue_offset[0])
                end = min(end, hi_max, pushed.queue_offset[1])
                if hits is not None:  # a uniqKey filter: the offsets the indexes find, nothing else
                    parts.extend(HistoryPartition(handle, topic, qid, o, o + 1)
                                 for q, o in sorted(hits) if q == qid and start <= o < end)
                    continue
                step = opts.max_messages_per_partition
                parts.extend(HistoryPartition(handle, topic, qid, lo, min(end, lo + step))
                             for lo in range(start, end, step))
    return parts


def _times(history, opts: ReadOptions, pushed, topic: str, qid: int, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` narrowed by the time options (``startingTimestamp``, ``endingTimestamp``,
    ``startingOffsetsByTimestamp``, ``endingOffsetsByTimestamp``) and a pushed ``storeTimestamp`` range, each
    time turned into a queue offset as the broker's getOffsetInQueueByTime answers with tiered storage
    (``StoreHistory.offset_by_time``)."""
    def at(spec) -> Optional[int]:
        return None if spec is None else spec.get(topic, {}).get(str(qid))

    for time, is_start in ((opts.starting_timestamp, True), (at(opts.starting_timestamps), True),
                           (opts.ending_timestamp, False), (at(opts.ending_timestamps), False)):
        if time is not None:
            offset = history.offset_by_time(topic, qid, int(time), "lower")
            start, end = (offset, end) if is_start else (start, offset)
    lo_t, hi_t = pushed.store_time
    if lo_t is not None and start < end:
        start = max(start, history.offset_by_time(topic, qid, int(lo_t), "lower"))
    if hi_t is not None and start < end:
        end = min(end, history.offset_by_time(topic, qid, int(hi_t), "lower"))
    return start, end


def _key_hits(history, topic: str, uniq_keys) -> set:
    """The (queue id, queue offset) of ``topic``'s messages whose UNIQ_KEY is one of ``uniq_keys``, found through
    the local and the tiered index (``StoreHistory.query_by_key``, as the broker's queryMessage)."""
    hits = set()
    for key in uniq_keys:
        table = history.query_by_key(topic, key, columns=("queueId", "queueOffset", "uniqKey"))
        columns = (table.column(c).to_pylist() for c in ("queueId", "queueOffset", "uniqKey"))
        hits.update((q, o) for q, o, u in zip(*columns) if u == key)
    return hits


__all__ = ["HistoryHandle", "HistoryPartition", "plan_history"]
