"""RocksDB consume queues (``storeType=defaultRocksDB``, 5.2+): key and value layouts, declared once.

``consumequeue/`` is a RocksDB database (``S/queue/RocksDBConsumeQueueTable.java``,
``RocksDBConsumeQueueOffsetTable.java``). All integers big-endian; ``CTRL_1`` is the byte 0x01.

Column family ``default``, one entry per consume-queue unit. Key::

    offset  bytes  field
    0       4      TOPICLEN             UTF-8 bytes of the topic
    4       1      CTRL_1
    5       n      TOPIC
    5+n     1      CTRL_1
    6+n     4      QUEUEID
    10+n    1      CTRL_1
    11+n    8      CQOFFSET             the unit's queue offset

Value, 28 bytes (``CQ_UNIT_SIZE``)::

    0       8      PHYOFFSET            commit-log offset of the record
    8       4      SIZE
    12      8      TAGSCODE
    20      8      STORETIME            the record's STORETIMESTAMP (MSG_STORE_TIME_SIZE_OFFSET)

Column family ``offset``, per queue its first (``min``) and last (``max``) unit. Key::

    0       4      TOPICLEN
    4       1      CTRL_1
    5       n      TOPIC
    5+n     1      CTRL_1
    6+n     3      "max" | "min"
    9+n     1      CTRL_1
    10+n    4      QUEUEID

Value, 16 bytes: PHYOFFSET (8) and CQOFFSET (8) of that unit (``max``: the LAST unit, so the queue's max offset
is CQOFFSET + 1). The ``max`` key of the system topic ``CHECKPOINT_TOPIC`` (queue 0) holds only an 8-byte
commit-log offset: how far dispatch had reached.
"""

from __future__ import annotations

import struct

import numpy as np

CTRL_1 = b"\x01"  # AbstractRocksDBStorage.CTRL_1
OFFSET_CF = "offset"  # ConsumeQueueRocksDBStorage offset column family
DEFAULT_CF = "default"
MAX_BYTES = b"max"  # RocksDBConsumeQueueOffsetTable.MAX_BYTES
MIN_BYTES = b"min"  # RocksDBConsumeQueueOffsetTable.MIN_BYTES
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"  # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC

TOPIC_LEN = struct.Struct(">i")
QUEUE_ID = struct.Struct(">i")
CQ_OFFSET = struct.Struct(">q")
#: Value of a ``default`` entry (RocksDBConsumeQueueTable.CQ_UNIT_SIZE = 28).
ROCKSDB_CQ_VALUE_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                                   ("store_time", ">i8")])
ROCKSDB_CQ_VALUE_SIZE = ROCKSDB_CQ_VALUE_DTYPE.itemsize
#: Value of an ``offset`` entry (OFFSET_PHY_OFFSET = 0, OFFSET_CQ_OFFSET = 8).
ROCKSDB_OFFSET_VALUE = struct.Struct(">qq")
CHECKPOINT_VALUE = struct.Struct(">q")


def queue_prefix(topic: str, queue_id: int) -> bytes:
    """The ``default`` key up to (not including) CQOFFSET: every unit of one queue starts with it."""
    raw = topic.encode("utf-8")
    return TOPIC_LEN.pack(len(raw)) + CTRL_1 + raw + CTRL_1 + QUEUE_ID.pack(queue_id) + CTRL_1


def cq_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    return queue_prefix(topic, queue_id) + CQ_OFFSET.pack(cq_offset)


def offset_key(topic: str, queue_id: int, which: bytes) -> bytes:
    raw = topic.encode("utf-8")
    return TOPIC_LEN.pack(len(raw)) + CTRL_1 + raw + CTRL_1 + which + CTRL_1 + QUEUE_ID.pack(queue_id)


def parse_offset_key(key: bytes):
    """(topic, ``max``/``min``, queue id) of an ``offset`` key, or None when it does not have that layout."""
    if len(key) < TOPIC_LEN.size:
        return None
    n = TOPIC_LEN.unpack_from(key)[0]
    tail = 4 + 1 + n
    if n < 0 or len(key) != tail + 1 + 3 + 1 + 4 or key[4:5] != CTRL_1 or key[tail:tail + 1] != CTRL_1 \
            or key[tail + 4:tail + 5] != CTRL_1:
        return None
    return key[5:tail].decode("utf-8", "replace"), key[tail + 1:tail + 4], QUEUE_ID.unpack_from(key, tail + 5)[0]


def parse_cq_offset(key: bytes, prefix: bytes):
    """The CQOFFSET of a ``default`` key of the queue whose prefix is ``prefix`` (None for another queue)."""
    if len(key) != len(prefix) + CQ_OFFSET.size or not key.startswith(prefix):
        return None
    return CQ_OFFSET.unpack_from(key, len(prefix))[0]


__all__ = ["ROCKSDB_CQ_VALUE_DTYPE", "ROCKSDB_OFFSET_VALUE", "CHECKPOINT_TOPIC", "OFFSET_CF", "queue_prefix",
           "cq_key", "offset_key", "parse_offset_key", "parse_cq_offset", "MAX_BYTES", "MIN_BYTES"]
