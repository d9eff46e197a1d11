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
            for qid in history.queue_ids(topic):
                if pushed.queue_ids is not None and qid not in pushed.queue_ids:
                    continue
                ranges = history.ranges(topic, qid)
                lo_min, hi_max = ranges.first, ranges.end
                start = max(_edge(opts.starting_offsets, topic, qid, EARLIEST, lo_min, hi_max), lo_min,
                            pushed.queue_offset[0])
                end = min(_edge(opts.ending_offsets, topic, qid, LATEST, lo_min, hi_max), hi_max,
                          pushed.queue_offset[1])
                step = opts.max_messages_per_partition
                parts.extend(HistoryPartition(handle, topic, qid, lo, min(end, lo + step))
                             for lo in range(start, end, step))
    return parts


__all__ = ["HistoryHandle", "HistoryPartition", "plan_history"]
