"""Batch consume queues and inner batches (topic attribute ``queue.type=BatchCQ``): byte layouts, declared once.

Batch consume-queue unit (``S/queue/BatchConsumeQueue.java`` ``putBatchMessagePositionInfo``), 46 bytes,
big-endian; unit ``i`` of a queue is at byte ``46 * i`` of its concatenated files (``batchconsumequeue/``)::

    offset  bytes  field
    0       8      PHYOFFSET            commit-log offset of the record
    8       4      SIZE                 the record's TOTALSIZE
    12      8      TAGSCODE             tag hash (0 for an inner batch: its wrapper has no TAGS)
    20      8      STORETIME            the record's STORETIMESTAMP (MSG_STORE_TIME_OFFSET_INDEX)
    28      8      MSGBASEOFFSET        queue offset of the record's first message (MSG_BASE_OFFSET_INDEX)
    36      2      BATCHSIZE            messages in the record (MSG_BATCH_SIZE_INDEX), 1 for a single message
    38      4      COMPACTEDOFFSET      -1 (INVALID_POS)
    42      4      RESERVED             0

Queue offsets count messages, not units: the next unit's MSGBASEOFFSET is this one's plus BATCHSIZE.

Inner batch (``SendMessageProcessor.sendBatchMessage`` for a BatchCQ topic): ONE commit-log record whose sysFlag
has ``INNER_BATCH_FLAG | NEED_UNWRAP_FLAG``, whose QUEUEOFFSET (= property ``INNER_BASE``) is the base offset
and whose body is the client's ``MessageDecoder.encodeMessages`` output, one entry per message::

    offset  bytes  field
    0       4      TOTALSIZE            this entry, this field included
    4       4      MAGICCODE            0 (INNER_MAGIC_CODE)
    8       4      BODYCRC              0 (not computed by the client)
    12      4      FLAG
    16      4      BODYLEN
    20      n      BODY
    20+n    2      PROPERTIESLEN        signed short
    22+n    m      PROPERTIES           UTF-8, as a record's properties

The client (``PullAPIWrapper.processPullResult`` → ``MessageDecoder.decodeMessage``) unwraps the record into
one message per entry: queue offset = record QUEUEOFFSET + index; FLAG, BODY and PROPERTIES its own; topic,
queue id, hosts, timestamps, sysFlag and commit-log offset the record's.
"""

from __future__ import annotations

import numpy as np

from . import layout as L

BCQ_STORE_UNIT_SIZE = 46  # BatchConsumeQueue.CQ_STORE_UNIT_SIZE
BCQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"), ("store_time", ">i8"),
                           ("base_offset", ">i8"), ("batch_size", ">i2"), ("compacted_offset", ">i4"),
                           ("reserved", ">i4")])
assert BCQ_UNIT_DTYPE.itemsize == BCQ_STORE_UNIT_SIZE
BCQ_INVALID_POS = -1  # BatchConsumeQueue.INVALID_POS: COMPACTEDOFFSET of every unit the store writes
#: MessageStoreConfig.mapperFileSizeBatchConsumeQueue's default: 300,000 units a file
DEFAULT_BCQ_FILE_SIZE = 300_000 * BCQ_STORE_UNIT_SIZE
BATCH_CONSUMEQUEUE_DIR = "batchconsumequeue"  # StorePathConfigHelper.getStorePathBatchConsumeQueue

INNER_HEADER_DTYPE = np.dtype([("total_size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("flag", ">i4"),
                               ("body_len", ">i4")])
INNER_HEADER_SIZE = INNER_HEADER_DTYPE.itemsize  # 20
INNER_PROPS_LEN_DTYPE = np.dtype(">i2")
INNER_MAGIC_CODE = 0  # MessageDecoder.encodeMessage writes MAGICCODE 0
INNER_BATCH_UNWRAP = L.INNER_BATCH_FLAG | L.NEED_UNWRAP_FLAG  # both: the client unwraps the record
PROPERTY_INNER_NUM = "INNER_NUM"  # MessageConst.PROPERTY_INNER_NUM
PROPERTY_INNER_BASE = "INNER_BASE"  # MessageConst.PROPERTY_INNER_BASE

#: One inner message: where its fields are in the buffer holding the record (absolute positions).
INNER_MESSAGE_DTYPE = np.dtype([("pos", np.int64), ("body_crc", np.int64), ("flag", np.int64),
                                ("body_pos", np.int64), ("body_len", np.int64), ("props_pos", np.int64),
                                ("props_len", np.int64)])


def is_inner_batch(sysflag) -> np.ndarray:
    """Per record: whether the client unwraps it (``INNER_BATCH_FLAG`` and ``NEED_UNWRAP_FLAG`` both set)."""
    return (np.asarray(sysflag, dtype=np.int64) & INNER_BATCH_UNWRAP) == INNER_BATCH_UNWRAP


def inner_messages(buf: np.ndarray, body_pos: int, body_len: int) -> np.ndarray:
    """The entries of an inner batch's body ``buf[body_pos:body_pos+body_len]`` (``decodeMessages``) as an
    :data:`INNER_MESSAGE_DTYPE` array. A malformed entry raises ``ValueError(reason, absolute position)``."""
    out = []
    at, end = int(body_pos), int(body_pos) + int(body_len)
    while at < end:
        if at + INNER_HEADER_SIZE > end:
            raise ValueError(f"inner message header of {INNER_HEADER_SIZE} bytes runs past the body end {end}", at)
        head = np.frombuffer(buf[at:at + INNER_HEADER_SIZE].tobytes(), dtype=INNER_HEADER_DTYPE)[0]
        total, blen = int(head["total_size"]), int(head["body_len"])
        if int(head["magic"]) != INNER_MAGIC_CODE:
            raise ValueError(f"inner message magic code: expected {INNER_MAGIC_CODE}, found {int(head['magic'])}",
                             at)
        props_at = at + INNER_HEADER_SIZE + blen
        if blen < 0 or props_at + INNER_PROPS_LEN_DTYPE.itemsize > end:
            raise ValueError(f"inner message body length {blen} runs past the body end {end}", at)
        plen = int(np.frombuffer(buf[props_at:props_at + 2].tobytes(), dtype=INNER_PROPS_LEN_DTYPE)[0])
        stop = props_at + INNER_PROPS_LEN_DTYPE.itemsize + plen
        if plen < 0 or stop > end or stop - at != total:
            raise ValueError(f"inner message TOTALSIZE {total} does not match its fields ({stop - at} bytes, "
                             f"properties length {plen}) within the body end {end}", at)
        out.append((at, int(head["body_crc"]), int(head["flag"]), at + INNER_HEADER_SIZE, blen,
                    props_at + INNER_PROPS_LEN_DTYPE.itemsize, plen))
        at = stop
    return np.array(out, dtype=INNER_MESSAGE_DTYPE)


__all__ = ["BCQ_STORE_UNIT_SIZE", "BCQ_UNIT_DTYPE", "BATCH_CONSUMEQUEUE_DIR", "INNER_BATCH_UNWRAP",
           "PROPERTY_INNER_NUM", "PROPERTY_INNER_BASE", "is_inner_batch", "inner_messages"]
