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
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptRecordError, InvalidArgumentError
from ..files.tiered_index import TieredIndex
from ..files.tiered_queue import TieredQueue
from ..files.tiered_segments import COMMIT_LOG, cluster_dir_name, queue_dirs
from ..format import layout as L
from ..format.codec import PROBLEM_DESCRIPTIONS, parse_records
from ..format.columns import arrow_schema, build_batch, fixed_fields_for, normalize_columns
from .messages import JAVA_LONG_MAX, MAX_MSGS_NUM_BATCH, has_key
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
        self._index: Optional[TieredIndex] = None

    @property
    def index(self) -> TieredIndex:
        """The uploaded key index (``rmq_sys_INDEX``), read on first use."""
        if self._index is None:
            index_dir = None
            if self.cluster is not None and self.broker is not None:
                broker_path = Path(self.root) / cluster_dir_name(self.cluster) / self.broker
                index_dir = TieredIndex.dir_of(broker_path, self.cluster, self.broker)
            self._index = TieredIndex(index_dir)
        return self._index

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
        for first in range(lo, hi, batch_rows):
            units = q.units(first, min(hi, first + batch_rows))
            yield self._batch(q, units, columns, np.arange(first, first + len(units)))

    def query_by_key(self, topic: str, key: str, max_num: int = MAX_MSGS_NUM_BATCH, begin: int = 0,
                     end: Optional[int] = None, columns=None) -> pa.Table:
        """The messages of ``topic`` whose ``UNIQ_KEY`` or a ``KEYS`` token is ``key``, found through the tiered
        index (``MessageStoreFetcherImpl.queryMessageAsync``): the index files created within ``[begin, end]``
        (store times in ms), newest first, at most ``max_num`` items; each item's record read from its queue's
        tiered commit log (items whose record has expired are skipped), then hash collisions removed by checking
        the real topic and key. Rows in store-time order."""
        columns = normalize_columns(columns)
        end = JAVA_LONG_MAX if end is None else int(end)
        want = tuple(dict.fromkeys(columns + ("topic", "uniqKey", "keys", "queueId", "queueOffset",
                                              "storeTimestamp")))
        batches = []
        for item in self.index.query(topic, key, int(max_num), int(begin), end):
            q = self.queue(topic, item.queue_id)
            if q is None or item.offset < q.log_start or item.offset + item.size > q.log_end:
                continue
            unit = np.array([(item.offset, item.size, 0)], dtype=L.CQ_UNIT_DTYPE)
            batches.append(self._batch(q, unit, want, None))
        table = pa.Table.from_batches(batches, schema=arrow_schema(want))
        keep = pc.and_(pc.equal(table.column("topic"), topic),
                       pc.or_(pc.fill_null(pc.equal(table.column("uniqKey"), key), False),
                              has_key(table.column("keys"), key)))
        table = table.filter(keep).sort_by([("storeTimestamp", "ascending"), ("queueId", "ascending"),
                                            ("queueOffset", "ascending")])
        return table.select(list(columns))

    def _batch(self, q: TieredQueue, units: np.ndarray, columns, expected: Optional[np.ndarray]) -> pa.RecordBatch:
        """The rows of the records ``units`` (tiered offset and size, in commit-log order) point at, checked
        against the units (and the queue offsets ``expected``, when known)."""
        fixed = tuple(sorted(set(fixed_fields_for(columns)) | {"queue_offset", "phy_offset"}))
        data, base = q.records(units)
        buf = np.frombuffer(data, dtype=np.uint8)
        positions = units["phy_offset"].astype(np.int64) - base
        fields = parse_records(buf, positions, fixed)
        self._check(q, fields, units, expected)
        return build_batch(buf, fields, columns, str(q.segment_at(base).path))

    @staticmethod
    def _check(q: TieredQueue, fields, units, expected: Optional[np.ndarray]) -> None:
        bad = np.flatnonzero(~fields.valid)
        if len(bad) == 0:
            wrong = (fields.phy_offset != units["phy_offset"]) | (fields.total_size != units["size"])
            if expected is not None:
                wrong |= fields.queue_offset != expected
            bad = np.flatnonzero(wrong)
            if len(bad) == 0:
                return
            i = int(bad[0])
            which = f"queue offset {int(expected[i])} " if expected is not None else ""
            problem = (f"expected the record of {which}(tiered offset {int(units['phy_offset'][i])}, "
                       f"{int(units['size'][i])} bytes, as its consume-queue unit or index item says), found "
                       f"QUEUEOFFSET {int(fields.queue_offset[i])}, PHYSICALOFFSET {int(fields.phy_offset[i])}, "
                       f"TOTALSIZE {int(fields.total_size[i])}")
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

    def earliest_local_time(self) -> Optional[int]:
        """``getEarliestMessageTime`` of the local store: the store time of its first record (None without a
        local store or when it holds none)."""
        if self.local is None:
            return None
        first = self.local.min_phy_offset()
        if first >= self.local.max_phy_offset():
            return None
        t = self.local.store_time_at(first, L.BORN_HOST_POSITION + L.IPV6_HOST_LENGTH + 8)
        return t if t > 0 else None

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int, boundary: str = "lower") -> int:
        """``getOffsetInQueueByTime`` over the history, as ``TieredMessageStore.getOffsetInQueueByTime`` answers it
        (tiered storage level ``NOT_IN_DISK``): a time before the local store's first message is searched in the
        queue's tiered storage (``FlatMessageFile.getQueueOffsetByTimeAsync``), any other time in the local store.
        A queue only one side holds is searched there. ``boundary``: ``lower`` or ``upper``; the broker passes it
        to the tiered search only (it asks its local store with the lower boundary always, and so does this)."""
        boundary = str(boundary).lower()
        if boundary not in ("lower", "upper"):
            raise InvalidArgumentError(f"boundary must be 'lower' or 'upper', found {boundary!r}")
        tiered = self.tiered.queue(topic, queue_id) if self.tiered is not None else None
        local = self.local is not None and self.local.has_queue(topic, queue_id)
        if tiered is not None and not local:
            return tiered.offset_by_time(int(timestamp_ms), boundary == "upper")
        if not local:
            return 0
        earliest = self.earliest_local_time()
        if tiered is not None and earliest is not None and int(timestamp_ms) < earliest:
            return tiered.offset_by_time(int(timestamp_ms), boundary == "upper")
        return self.local.offset_by_time(topic, queue_id, int(timestamp_ms),
                                         "lower" if self.tiered is not None else boundary)

    def query_by_key(self, topic: str, key: str, max_num: int = MAX_MSGS_NUM_BATCH, begin: int = 0,
                     end: Optional[int] = None, columns=None) -> pa.Table:
        """``queryMessage`` over the history, as ``TieredMessageStore.queryMessageAsync`` answers it (tiered
        storage level ``NOT_IN_DISK``, the default): the local store's index answers unless ``end`` lies before
        its earliest message; if it found fewer than ``max_num`` messages and ``begin`` lies before that time,
        the tiered index adds at most the rest over ``[begin, earliest]``. Without a local store (or with an empty
        one) the tiered index answers over ``[begin, end]``. A queue offset both answers hold comes once, the
        local store's row. Rows: the tiered storage's first (store-time order), then the local store's
        (commit-log order). See ``docs/tiered.md``."""
        columns = normalize_columns(columns)
        end = JAVA_LONG_MAX if end is None else int(end)
        begin, max_num = int(begin), int(max_num)
        want = tuple(dict.fromkeys(columns + ("queueId", "queueOffset")))
        earliest = self.earliest_local_time()
        local = arrow_schema(want).empty_table()
        if self.local is not None and (earliest is None or end >= earliest):
            local = self.local.query_by_key(topic, key, max_num, begin, end, want)
        tiered = arrow_schema(want).empty_table()
        if self.tiered is not None and local.num_rows < max_num and (earliest is None or begin < earliest):
            tiered = self.tiered.query_by_key(topic, key, max_num - local.num_rows, begin,
                                              end if earliest is None else earliest, want)
            held = set(zip(local.column("queueId").to_pylist(), local.column("queueOffset").to_pylist()))
            if held:
                mask = [(q, o) not in held for q, o in zip(tiered.column("queueId").to_pylist(),
                                                           tiered.column("queueOffset").to_pylist())]
                tiered = tiered.filter(pa.array(mask, pa.bool_()))
        return pa.concat_tables([tiered, local]).select(list(columns))

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
