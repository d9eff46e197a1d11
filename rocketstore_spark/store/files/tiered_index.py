"""The tiered storage's key index (``tieredstore/index``: ``IndexStoreService``, ``IndexStoreFile``), read-only.

The broker builds each index file locally (``storePathRootDir/tiered_index_file/<begin timestamp>``, 32-byte
items chained per hash slot), and once the file is full (or at shutdown) **compacts** it and uploads the result as
one segment of the pseudo-queue ``rmq_sys_INDEX/0``, type ``INDEX`` (``IndexStoreService.doCompactThenUploadFile``
rolls a new segment for every file). A segment's bytes (``IndexStoreFile.compactToNewFile``), all big-endian:

| bytes | field |
| --- | --- |
| 0..3 | magic: ``END_MAGIC_CODE`` (``BEGIN_MAGIC_CODE`` while a file was still open) |
| 4..11 | begin timestamp (ms): when the local file was created; the segment's ``minTimestamp`` |
| 12..19 | end timestamp (ms): the newest store time indexed |
| 20..23 | hash slots in use |
| 24..27 | index items (the count of items) |
| 28 .. 28 + 8 × slots | per hash slot: where its items start in this segment (int, 0: none), their bytes (int) |
| then | the items, 28 bytes each (``COMPACT_INDEX_ITEM_SIZE``), a slot's items together, newest first |

A compact item:

| bytes | field |
| --- | --- |
| 0..3 | hash code: ``abs(String.hashCode("<topic>#<key>"))`` |
| 4..7 | topic id (``topicMetadataTable``) |
| 8..11 | queue id |
| 12..19 | the record's offset in its queue's **tiered** commit log |
| 20..23 | the record's size |
| 24..27 | (store time − begin timestamp) / 1000, whole seconds |

The number of hash slots (``tieredStoreIndexFileMaxHashSlotNum``) is not stored; it follows from the segment's
length: ``28 + 8 × slots + 28 × items``. Every message is indexed under its ``UNIQ_KEY`` and each ``KEYS`` token
(``MessageStoreDispatcherImpl.constructIndexFile0``), never its offset msgId.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import StoreFormatError
from ..format.java_hash import java_string_hash
from .tiered_segments import INDEX, RMQ_SYS_TIERED_STORE_INDEX_TOPIC, QueueDir, Segment

INDEX_HEADER = struct.Struct(">iqqii")  # magic, begin timestamp, end timestamp, slots in use, item count
INDEX_HEADER_SIZE = 28  # IndexStoreFile.INDEX_HEADER_SIZE
HASH_SLOT_SIZE = 8  # IndexStoreFile.HASH_SLOT_SIZE (Long.BYTES): position and length of a slot's items
COMPACT_INDEX_ITEM_SIZE = 28  # IndexItem.COMPACT_INDEX_ITEM_SIZE
COMPACT_ITEM_DTYPE = np.dtype([("hash_code", ">i4"), ("topic_id", ">i4"), ("queue_id", ">i4"), ("offset", ">i8"),
                               ("size", ">i4"), ("time_diff", ">i4")])
INVALID_INDEX = 0  # IndexStoreFile.INVALID_INDEX
MAX_SLOT_ITEMS = 1024  # queryAsyncFromSegmentFile reads at most COMPACT_INDEX_ITEM_SIZE * 1024 bytes of a slot


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


BEGIN_MAGIC_CODE = _int32(0xCCDDEEFF ^ (1880681586 + 4))  # IndexStoreFile.BEGIN_MAGIC_CODE
END_MAGIC_CODE = _int32(0xCCDDEEFF ^ (1880681586 + 8))  # IndexStoreFile.END_MAGIC_CODE


def tiered_key_hash(topic: str, key: str) -> int:
    """``IndexStoreFile.hashCode(buildKey(topic, key))``: ``abs`` of the Java hash of ``<topic>#<key>``
    (Integer.MIN_VALUE stays negative, as Java's ``-`` leaves it)."""
    h = java_string_hash(f"{topic}#{key}")
    return h if h >= 0 or h == -(1 << 31) else -h


@dataclass(frozen=True)
class TieredIndexItem:
    """One index hit: where the record lies in its queue's tiered commit log, and its store time to the second."""

    queue_id: int
    topic_id: int
    offset: int
    size: int
    store_timestamp: int


class TieredIndexSegment:
    """One uploaded (compacted) index file."""

    def __init__(self, segment: Segment):
        self.path = segment.path
        self.size = segment.size
        with open(self.path, "rb") as f:
            head = f.read(INDEX_HEADER_SIZE)
        if len(head) < INDEX_HEADER_SIZE:
            raise StoreFormatError(f"tiered index segment: expected a {INDEX_HEADER_SIZE}-byte header, found "
                                   f"{len(head)} bytes; the segment is damaged (copy it again from the tiered "
                                   f"storage)", self.path, 0)
        magic, self.begin_timestamp, self.end_timestamp, self.slots_used, self.item_count = INDEX_HEADER.unpack(head)
        if magic not in (BEGIN_MAGIC_CODE, END_MAGIC_CODE):
            raise StoreFormatError(f"tiered index segment: expected the magic code {END_MAGIC_CODE} "
                                   f"(IndexStoreFile.END_MAGIC_CODE) or {BEGIN_MAGIC_CODE}, found {magic}; is this an "
                                   f"{RMQ_SYS_TIERED_STORE_INDEX_TOPIC} segment of RocketMQ 5.1 or later?",
                                   self.path, 0)
        rest = self.size - INDEX_HEADER_SIZE - COMPACT_INDEX_ITEM_SIZE * self.item_count
        if self.item_count < 0 or rest <= 0 or rest % HASH_SLOT_SIZE:
            raise StoreFormatError(f"tiered index segment: expected {INDEX_HEADER_SIZE} + 8 x hash slots + "
                                   f"{COMPACT_INDEX_ITEM_SIZE} x {self.item_count} items (the header's count) bytes, "
                                   f"found {self.size}; the segment is damaged or truncated (copy it again)",
                                   self.path, 24)
        self.hash_slots = rest // HASH_SLOT_SIZE
        self.items_start = INDEX_HEADER_SIZE + HASH_SLOT_SIZE * self.hash_slots

    def _read(self, position: int, length: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(position)
            return f.read(length)

    def query(self, key_hash: int, max_count: int, begin: int, end: int) -> list[TieredIndexItem]:
        """``IndexStoreFile.queryAsyncFromSegmentFile``: the items of ``key_hash``'s slot with that hash whose
        store time (to the second) lies in ``[begin, end]``, at most ``max_count``, newest first."""
        if key_hash < 0 or max_count <= 0:  # Integer.MIN_VALUE: the broker's slot position is negative, no answer
            return []
        slot_position = INDEX_HEADER_SIZE + (key_hash % self.hash_slots) * HASH_SLOT_SIZE
        position, length = struct.unpack(">ii", self._read(slot_position, HASH_SLOT_SIZE))
        length = min(length, COMPACT_INDEX_ITEM_SIZE * MAX_SLOT_ITEMS)
        if position <= INVALID_INDEX or length <= 0:
            return []
        if position < self.items_start or length % COMPACT_INDEX_ITEM_SIZE or position + length > self.size:
            raise StoreFormatError(f"tiered index segment: expected hash slot {key_hash % self.hash_slots} to point "
                                   f"at whole {COMPACT_INDEX_ITEM_SIZE}-byte items within {self.items_start}.."
                                   f"{self.size}, found position {position}, length {length}; the segment is "
                                   f"damaged (copy it again from the tiered storage)", self.path, slot_position)
        items = np.frombuffer(self._read(position, length), dtype=COMPACT_ITEM_DTYPE)
        times = items["time_diff"].astype(np.int64) * 1000 + self.begin_timestamp
        hits = np.flatnonzero((items["hash_code"] == key_hash) & (times >= begin) & (times <= end))[:max_count]
        return [TieredIndexItem(int(items["queue_id"][i]), int(items["topic_id"][i]), int(items["offset"][i]),
                                int(items["size"][i]), int(times[i])) for i in hits]


class TieredIndex:
    """The uploaded index segments of one broker's tiered storage (``rmq_sys_INDEX/0/INDEX``)."""

    def __init__(self, index_dir: Optional[QueueDir]):
        self.segments = [TieredIndexSegment(s) for s in (index_dir.segments(INDEX) if index_dir else []) if s.size]

    @staticmethod
    def dir_of(broker_path: Path, cluster: str, broker: str) -> QueueDir:
        return QueueDir(broker_path / RMQ_SYS_TIERED_STORE_INDEX_TOPIC / "0", cluster, broker,
                        RMQ_SYS_TIERED_STORE_INDEX_TOPIC, 0)

    def query(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list[TieredIndexItem]:
        """``IndexStoreService.queryAsync``: the files whose begin timestamp lies in ``[begin, end]``, newest first,
        each answering its items; at most ``max_count`` distinct (queue id, offset) in all."""
        if begin > end or max_count <= 0:
            return []
        key_hash = tiered_key_hash(topic, key)
        found: dict[tuple[int, int], TieredIndexItem] = {}
        for seg in sorted(self.segments, key=lambda s: s.begin_timestamp, reverse=True):
            if not begin <= seg.begin_timestamp <= end:
                continue
            for item in seg.query(key_hash, max_count, begin, end):
                if len(found) < max_count:
                    found.setdefault((item.queue_id, item.offset), item)
        return list(found.values())[:max_count]


__all__ = ["TieredIndex", "TieredIndexSegment", "TieredIndexItem", "tiered_key_hash", "BEGIN_MAGIC_CODE",
           "END_MAGIC_CODE", "COMPACT_INDEX_ITEM_SIZE", "COMPACT_ITEM_DTYPE", "INDEX_HEADER_SIZE", "HASH_SLOT_SIZE"]
