"""A queue's whole history: the broker's tiered storage (``TieredQueues``) alone, or together with its local
store (``StoreHistory``), one queue-ordered run of rows per (topic, queue) with no queue offset twice.

Where both hold a queue offset, the row comes from the local store (its record as the broker wrote it, with the
broker's commit-log offset and msgId); the tiered storage supplies the offsets the local store no longer (or not
yet) holds. A tiered row's ``commitLogOffset`` is the record's offset in its queue's own tiered commit log, and its
``msgId`` (the offset msgId) is built from that offset and the store host, as the broker hands both to a client
reading the tiered storage; ``uniqKey``, the queue offset, the body and every other column are the local
store's. :meth:`StoreHistory.ranges` says which offsets lie where.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError, InvalidArgumentError
from ..files.tiered_queue import TieredQueue
from ..files.tiered_segments import COMMIT_LOG, queue_dirs
from ..format.codec import PROBLEM_DESCRIPTIONS, parse_records
from ..format.columns import build_batch, fixed_fields_for, normalize_columns
from .queue_reads import DEFAULT_BATCH_ROWS

LOCAL = "local"
TIERED = "tiered"


class TieredQueues:
    """The queues of a broker's tiered storage directory (``tieredStoreFilePath``)."""

    def __init__(self, root, cluster: Optional[str] = None, broker: Optional[str] = None):
        self.root = root
        dirs = queue_dirs(root, cluster, broker)
        self.cluster = dirs[0].cluster if dirs else cluster
        self.broker = dirs[0].broker if dirs else broker
        self.queues = {(d.topic, d.queue_id): TieredQueue(d) for d in dirs}

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queues})

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in self.queues if t == topic)

    def queue(self, topic: str, queue_id: int) -> Optional[TieredQueue]:
        return self.queues.get((topic, int(queue_id)))

    def edges(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(first, end) of the queue offsets the tiered storage serves; (0, 0) for a queue it does not hold."""
        q = self.queue(topic, queue_id)
        return (q.first_offset, q.max_offset) if q is not None else (0, 0)

    def read_queue(self, topic: str, queue_id: int, start: Optional[int] = None, end: Optional[int] = None,
                   columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The rows of queue offsets ``[start, end)`` (clamped to what the tiered storage serves)."""
        columns = normalize_columns(columns)
        q = self.queue(topic, queue_id)
        if q is None:
            return
        lo = q.first_offset if start is None else max(int(start), q.first_offset)
        hi = q.max_offset if end is None else min(int(end), q.max_offset)
        fixed = tuple(sorted(set(fixed_fields_for(columns)) | {"queue_offset", "phy_offset"}))
        for first in range(lo, hi, batch_rows):
            units = q.units(first, min(hi, first + batch_rows))
            data, base = q.records(units)
            buf = np.frombuffer(data, dtype=np.uint8)
            positions = units["phy_offset"].astype(np.int64) - base
            fields = parse_records(buf, positions, fixed)
            self._check(q, fields, units, first, base)
            yield build_batch(buf, fields, columns, str(q.segment_at(base).path))

    @staticmethod
    def _check(q: TieredQueue, fields, units, first: int, base: int) -> None:
        bad = np.flatnonzero(~fields.valid)
        expected = np.arange(first, first + len(units))
        if len(bad) == 0:
            bad = np.flatnonzero((fields.queue_offset != expected) | (fields.phy_offset != units["phy_offset"])
                                 | (fields.total_size != units["size"]))
            if len(bad) == 0:
                return
            i = int(bad[0])
            problem = (f"expected the record of queue offset {int(expected[i])} (tiered offset "
                       f"{int(units['phy_offset'][i])}, {int(units['size'][i])} bytes, as its consume-queue unit "
                       f"says), found QUEUEOFFSET {int(fields.queue_offset[i])}, PHYSICALOFFSET "
                       f"{int(fields.phy_offset[i])}, TOTALSIZE {int(fields.total_size[i])}")
        else:
            i = int(bad[0])
            problem = PROBLEM_DESCRIPTIONS.get(int(fields.problem[i]), "record check failed")
        offset = int(units["phy_offset"][i])
        seg = q.segment_at(offset, COMMIT_LOG)
        raise CorruptRecordError(f"tiered commit log of {q.topic}/{q.queue_id}: {problem}; the segment is damaged "
                                 f"(copy it again from the tiered storage)", seg.path, offset - seg.base_offset)


@dataclass(frozen=True)
class QueueRanges:
    """Where a queue's offsets lie: ``local`` and ``tiered`` are (first, end) ranges (empty when first == end)."""

    topic: str
    queue_id: int
    local: tuple[int, int]
    tiered: tuple[int, int]

    @property
    def first(self) -> int:
        spans = [r for r in (self.local, self.tiered) if r[1] > r[0]]
        return min(r[0] for r in spans) if spans else 0

    @property
    def end(self) -> int:
        return max(self.local[1], self.tiered[1])

    def pieces(self, start: int, end: int) -> list[tuple[str, int, int]]:
        """``[start, end)`` cut into (source, first, end) pieces in queue order: the local store's offsets from the
        local store, the others from the tiered storage."""
        out = []
        local_lo, local_hi = self.local if self.local[1] > self.local[0] else (end, end)
        for source, lo, hi in ((TIERED, start, min(end, local_lo)), (LOCAL, max(start, local_lo), min(end, local_hi)),
                               (TIERED, max(start, local_hi), end)):
            if source == TIERED:
                lo, hi = max(lo, self.tiered[0]), min(hi, self.tiered[1])
            if hi > lo:
                out.append((source, lo, hi))
        return out


class StoreHistory:
    """A local store (a :class:`~.store_reader.StoreReader`, or None) and its broker's tiered storage (a
    :class:`TieredQueues`, or None) read as one history."""

    def __init__(self, local=None, tiered: Optional[TieredQueues] = None):
        if local is None and tiered is None:
            raise InvalidArgumentError("a history needs a local store, a tiered storage directory, or both")
        self.local, self.tiered = local, tiered

    def close(self) -> None:
        if self.local is not None:
            self.local.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def topics(self) -> list[str]:
        return sorted(set(self.local.topics() if self.local else ()) | set(self.tiered.topics() if self.tiered else ()))

    def queue_ids(self, topic: str) -> list[int]:
        local = self.local.queue_ids(topic) if self.local is not None and topic in self.local.topics() else ()
        return sorted(set(local) | set(self.tiered.queue_ids(topic) if self.tiered else ()))

    def ranges(self, topic: str, queue_id: int) -> QueueRanges:
        local = (0, 0)
        if self.local is not None and self.local.has_queue(topic, queue_id):
            local = self.local.queue_edges(topic, queue_id)
        tiered = self.tiered.edges(topic, queue_id) if self.tiered is not None else (0, 0)
        return QueueRanges(topic, int(queue_id), local, tiered)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.ranges(topic, queue_id).first

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.ranges(topic, queue_id).end

    def read_queue(self, topic: str, queue_id: int, start: Optional[int] = None, end: Optional[int] = None,
                   columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The rows of queue offsets ``[start, end)`` in queue order, each offset once (see the module)."""
        ranges = self.ranges(topic, queue_id)
        lo = ranges.first if start is None else max(int(start), ranges.first)
        hi = ranges.end if end is None else min(int(end), ranges.end)
        for source, first, last in ranges.pieces(lo, hi):
            if source == LOCAL:
                yield from self.local.read_queue(topic, queue_id, first, last, columns=columns, batch_rows=batch_rows)
            else:
                yield from self.tiered.read_queue(topic, queue_id, first, last, columns, batch_rows=batch_rows)


__all__ = ["TieredQueues", "StoreHistory", "QueueRanges", "LOCAL", "TIERED"]
