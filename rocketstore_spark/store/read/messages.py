"""Consumer-style paging and point lookups (``getMessage``, ``queryMessage``, by offset, msgId and time).

A :class:`MessageLookups` answers them from the opened store's commit log and index files and its queue set,
reading pages of queues with the queue reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InvalidArgumentError
from ..files.index_file import IndexFile, index_key, list_index_files, read_index_header
from ..format import layout as L
from ..format.codec import decode_msg_id
from ..format.columns import arrow_schema, normalize_columns
from ..format.inner_batch import BCQ_STORE_UNIT_SIZE
from ..format.subscription import Subscription
from .opened_store import OpenedStore
from .queue_reads import QueueReader
from .queue_set import QueueSet
from .records import CommitLogReads
from .recovery import MODE_ABNORMAL, index_keys_after
from .time_search import LOWER, UPPER, offset_in_queue_by_time
from .variant_reads import VariantReads

JAVA_LONG_MAX = (1 << 63) - 1
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: cap of queryMessage results
MAX_TRANSFER_BYTES_IN_MEMORY = 256 * 1024  # maxTransferBytesOnMessageInMemory
MAX_TRANSFER_COUNT_IN_MEMORY = 32  # maxTransferCountOnMessageInMemory
MAX_TRANSFER_BYTES_ON_DISK = 64 * 1024  # maxTransferBytesOnMessageInDisk
MAX_TRANSFER_COUNT_ON_DISK = 8  # maxTransferCountOnMessageInDisk
MAX_FILTER_MESSAGE_SIZE = 16000  # maxFilterMessageSize: bytes of units examined per call (at least)

# GetMessageStatus names
FOUND = "FOUND"
NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"


@dataclass
class GetMessageResult:
    """What ``getMessage`` answers: a status, where to continue, the queue's range and the messages."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: pa.Table


class MessageLookups:
    """getMessage / queryMessage / lookMessageByOffset / getOffsetInQueueByTime over ``store`` and its ``queues``."""

    def __init__(self, store: OpenedStore, queues: QueueSet, records: CommitLogReads, reader: QueueReader,
                 variants: VariantReads):
        self.store = store
        self.queues = queues
        self.records = records
        self.reader = reader
        self.variants = variants
        self._index_files: Optional[list] = None

    def get_message(self, topic: str, queue_id: int, offset: int, max_nums: int = 32, tags="*",
                    columns=None, *, in_memory: bool = True) -> GetMessageResult:
        """Page through a queue like a consumer; statuses and ``next_begin_offset`` as RocketMQ's getMessage.

        Tag matching for the status uses consume-queue hashes only, as the broker does; the returned messages
        are then re-checked on the real tag (the client's job in RocketMQ), so collisions never come back.
        """
        columns = normalize_columns(columns)
        sub = Subscription.parse(tags)
        empty = arrow_schema(columns).empty_table()
        if not self.queues.has_queue(topic, queue_id):
            return GetMessageResult(NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, empty)
        cq = self.queues.consume_queue(topic, queue_id)
        lo, hi = self.queues.min_offset(topic, queue_id), cq.max_offset
        if hi == 0:
            return GetMessageResult(NO_MESSAGE_IN_QUEUE, 0, lo, hi, empty)
        if offset < lo:
            return GetMessageResult(OFFSET_TOO_SMALL, lo, lo, hi, empty)
        if offset == hi:
            return GetMessageResult(OFFSET_OVERFLOW_ONE, offset, lo, hi, empty)
        if offset > hi:
            return GetMessageResult(OFFSET_OVERFLOW_BADLY, 0 if lo == 0 else hi, lo, hi, empty)
        if cq.is_batch:  # whole records per batch unit, unwrapped (variant_reads)
            limits = (MAX_FILTER_MESSAGE_SIZE,
                      MAX_TRANSFER_BYTES_IN_MEMORY if in_memory else MAX_TRANSFER_BYTES_ON_DISK,
                      MAX_TRANSFER_COUNT_IN_MEMORY if in_memory else MAX_TRANSFER_COUNT_ON_DISK)
            status, next_offset, table = self._get_batch_message(cq, offset, max_nums, sub, columns, limits)
            return GetMessageResult(status, next_offset, lo, hi, table)
        per = cq.units_per_file
        file_end = min(hi, (offset // per + 1) * per)
        max_filter_bytes = max(MAX_FILTER_MESSAGE_SIZE, max_nums * L.CQ_STORE_UNIT_SIZE)
        # the loop below examines at most max_filter_bytes / 20 + 1 units: read those, not the rest of the file
        units = cq.units(offset, min(file_end, offset + max_filter_bytes // L.CQ_STORE_UNIT_SIZE + 1))
        limit_bytes = MAX_TRANSFER_BYTES_IN_MEMORY if in_memory else MAX_TRANSFER_BYTES_ON_DISK
        limit_count = MAX_TRANSFER_COUNT_IN_MEMORY if in_memory else MAX_TRANSFER_COUNT_ON_DISK
        status, next_offset = NO_MATCHED_MESSAGE, offset
        picked, picked_offsets, total_bytes = [], [], 0
        matches = sub.matches_units(units)
        for i, unit in enumerate(units):
            if i * L.CQ_STORE_UNIT_SIZE > max_filter_bytes:  # 5.x: (unitOffset - offset) * 20 > maxFilterMessageSize
                break
            size = int(unit["size"])
            if picked and (len(picked) >= max_nums or total_bytes + size > limit_bytes
                           or len(picked) > limit_count - 1):
                break
            next_offset = offset + i + 1
            if not matches[i]:
                continue
            phy = int(unit["phy_offset"])
            # a record in a missing commit-log file is skipped like an expired one (no file holds it)
            if phy < self.store.min_phy_offset() or phy + size > self.store.recovery.valid_end or \
                    self.store.commitlog.queue.index_of(phy) < 0:
                if not picked:
                    status = MESSAGE_WAS_REMOVING
                continue
            picked.append(phy)
            picked_offsets.append(offset + i)
            total_bytes += size
            status = FOUND
        table = self.records.read_records_at(picked, columns + (() if "tags" in columns else ("tags",)))
        if self.variants.is_lmq(topic) and table.num_rows:  # rows of a light message queue: see variant_reads
            table = self.variants.lmq_overlay_table(table, cq, picked, picked_offsets)
        if not sub.is_all and table.num_rows:
            table = table.filter(pc.fill_null(pc.is_in(table.column("tags"), value_set=pa.array(sub.tags)), False))
        return GetMessageResult(status, next_offset, lo, hi, table.select(list(columns)))

    def _get_batch_message(self, cq, offset: int, max_nums: int, sub, columns, limits) -> tuple:
        """``getMessage`` over a batch consume queue (``DefaultMessageStore.getMessage`` with a
        ``BatchConsumeQueue``): from the unit holding ``offset`` to the end of its file, whole records, limits
        counted in messages (``isTheBatchFull``), ``nextBeginOffset`` = base + batchSize of the last unit looked
        at; the status from the units' tag hashes as the broker decides it. Returns (status, next offset, rows):
        the rows are the returned records unwrapped as the client does (every message of a batch, also those
        before ``offset``), then checked on their real tags."""
        max_filter_bytes, limit_bytes, limit_count = limits
        max_filter_bytes = max(max_filter_bytes, max_nums * BCQ_STORE_UNIT_SIZE)
        first = int(cq.unit_of([offset])[0])
        stop = int(np.flatnonzero(cq.file_of_units() == cq.file_of_units()[first])[-1]) + 1
        status, next_offset, picked, messages, total_bytes = NO_MATCHED_MESSAGE, offset, [], 0, 0
        for u in range(first, stop):
            unit = cq.raw[u]
            base, count, size, phy = int(unit["base_offset"]), int(unit["batch_size"]), int(unit["size"]), \
                int(unit["phy_offset"])
            if next_offset >= cq.max_offset or (base - offset) * BCQ_STORE_UNIT_SIZE >= max_filter_bytes:
                break
            if messages and (messages + count > max_nums or total_bytes + size > limit_bytes
                             or messages > limit_count - 1):
                break
            next_offset = base + count
            if not (sub.is_all or sub.matches_codes(np.array([int(unit["tags_code"])]), cq.topic)[0]):
                continue
            if phy < self.store.min_phy_offset() or phy + size > self.store.recovery.valid_end or \
                    self.store.commitlog.queue.index_of(phy) < 0:
                if not picked:
                    status = MESSAGE_WAS_REMOVING
                continue
            picked.append((cq.topic, cq.queue_id, base, base + count))
            messages, total_bytes, status = messages + count, total_bytes + size, FOUND
        want = columns if sub.is_all or "tags" in columns else columns + ("tags",)
        batches = list(self.reader.read_queues(picked, None, want)) if picked else []
        table = pa.Table.from_batches(batches, schema=arrow_schema(want))
        if not sub.is_all and table.num_rows:
            table = table.filter(pc.fill_null(pc.is_in(table.column("tags"), value_set=pa.array(sub.tags)), False))
        return status, next_offset, table.select(list(columns))

    # --- index ------------------------------------------------------------------------------------------

    def close(self) -> None:
        for f in self._index_files or []:
            f.close()
        self._index_files = None

    def index_files(self) -> list[IndexFile]:
        """The index files recovery keeps, oldest first (abnormal recovery drops those newer than the
        checkpoint's index timestamp; their keys are then found by scanning, as the broker rebuilds them)."""
        if self._index_files is None:
            paths = list_index_files(self.store.root / L.INDEX_DIR)
            if any(read_index_header(p).index_count > 1 for p in paths):
                self.store.sizes.require_index_sizes()  # files that hold no keys are read without their sizes
            files = []
            try:
                for p in paths:
                    files.append(IndexFile(p, self.store.sizes.index_hash_slots, self.store.sizes.index_max_entries))
            except BaseException:
                for f in files:
                    f.close()
                raise
            if self.store.recovery.mode == MODE_ABNORMAL and self.store.checkpoint is not None:
                limit = self.store.checkpoint.index_msg_timestamp
                files = [f for f in files if f.header.end_timestamp <= limit]
            self._index_files = files
        return self._index_files

    def _unindexed_matches(self, topic: str, key: str) -> list[int]:
        """Offsets, newest first, of records re-dispatch on opening indexes that carry ``key`` in ``topic``."""
        start = self.store.recovery.reindex_from
        if start is None:
            return []
        indexed_end = max((f.header.end_phy_offset for f in self.index_files()), default=-1)
        keys = index_keys_after(self.store.commitlog, self.store.recovery, indexed_end, start)
        found = [phy for t, k, phy, _ts in keys if t == topic and k == key]
        return list(dict.fromkeys(found))[::-1]

    def query_by_key(self, topic: str, key: str, max_num: int = MAX_MSGS_NUM_BATCH, begin: int = 0,
                     end: Optional[int] = None, columns=None) -> pa.Table:
        """``queryMessage``: messages of ``topic`` whose UNIQ_KEY or a KEYS token is ``key``.

        Walks the index newest file first, each bucket chain newest entry first, keeping at most ``max_num``
        offsets, then removes hash collisions by checking the real key. The default is the broker's cap
        (``maxMsgsNumBatch``, 64): a result of that size may be cut short; pass a larger ``max_num``, or a time
        window (``begin``/``end``, store times in ms), to see the rest.
        Rows come back in commit-log order.
        """
        columns = normalize_columns(columns)
        end = JAVA_LONG_MAX if end is None else int(end)
        max_num = int(max_num)
        offsets = self._unindexed_matches(topic, key)[:max_num]
        full_key = index_key(topic, key)
        for f in reversed(self.index_files()):
            if len(offsets) >= max_num:
                break
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(offsets, full_key, max_num, begin, end)
            if f.header.begin_timestamp < begin:
                break
        want = tuple(dict.fromkeys(columns + ("topic", "uniqKey", "keys")))
        table = self.records.read_records_at(sorted(offsets), want)  # an offset twice: indexed twice (re-index)
        is_key = pc.or_(pc.fill_null(pc.equal(table.column("uniqKey"), key), False),
                        has_key(table.column("keys"), key))
        keep = pc.and_(pc.equal(table.column("topic"), topic), is_key)
        return table.filter(keep).select(list(columns))

    # --- point lookups ----------------------------------------------------------------------------------

    def look_message_by_offset(self, phy_offset: int, columns=None) -> Optional[dict]:
        """``lookMessageByOffset``: the message at a commit-log offset as a dict (None outside the log)."""
        batch = self.records.read_record_at(int(phy_offset), columns)
        return None if batch is None else batch.to_pylist()[0]

    def look_message_by_msg_id(self, msg_id: str, columns=None) -> Optional[dict]:
        """``queryMsgById``: decode the physical offset from an offsetMsgId and read that record."""
        try:
            _address, _port, phy = decode_msg_id(msg_id)
        except ValueError as e:
            raise InvalidArgumentError(f"bad msgId {msg_id!r}: {e}") from e
        return self.look_message_by_offset(phy, columns)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int, boundary: str = "lower") -> int:
        """``getOffsetInQueueByTime``: the queue offset at a store timestamp (see :mod:`.time_search`)."""
        cq = self.queues.consume_queue(topic, queue_id)
        if cq.unit_times:  # batch and RocksDB queues search their units' store times (base offsets for batches)
            if str(boundary).lower() not in (LOWER, UPPER):
                raise InvalidArgumentError(f"boundary must be 'lower' or 'upper', found {boundary!r}")
            return cq.offset_by_time(int(timestamp_ms), str(boundary).lower() == LOWER, self.store.min_phy_offset())
        return offset_in_queue_by_time(cq, self.records.store_time_at, int(timestamp_ms), boundary,
                                       self.store.min_phy_offset())


def has_key(keys: pa.ChunkedArray, key: str) -> pa.ChunkedArray:
    """Per row: does the list ``keys`` contain ``key``?"""
    out = []
    for chunk in keys.chunks:
        flat = chunk.flatten()
        hits = np.asarray(pc.fill_null(pc.equal(flat, key), False))
        rows = np.asarray(pc.list_parent_indices(chunk)) if len(flat) else np.zeros(0, dtype=np.int64)
        mask = np.zeros(len(chunk), dtype=bool)
        mask[rows[hits]] = True
        out.append(pa.array(mask))
    return pa.chunked_array(out, type=pa.bool_())
