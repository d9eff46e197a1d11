"""Byte layouts and constants of the RocketMQ 5.3.3 store, declared once.

Everything on disk is big-endian (Java ``ByteBuffer`` default). References are to the RocketMQ sources
(``S`` = ``store/src/main/java/org/apache/rocketmq/store``, ``C`` = ``common/src/main/java/...``).

Commit-log record (``S/MessageExtEncoder.java`` ``encode``; ``S/CommitLog.java`` ``checkMessageAndReturnSize``)::

    offset  bytes  field
    0       4      TOTALSIZE            whole record, this field included
    4       4      MAGICCODE            MESSAGE_MAGIC_CODE (v1) / MESSAGE_MAGIC_CODE_V2
    8       4      BODYCRC              zlib CRC32 of the stored body & 0x7FFFFFFF
    12      4      QUEUEID
    16      4      FLAG
    20      8      QUEUEOFFSET          0 for PREPARED / ROLLBACK records
    28      8      PHYSICALOFFSET       absolute commit-log offset of this record
    36      4      SYSFLAG
    40      8      BORNTIMESTAMP        ms
    48      8|20   BORNHOST             4|16-byte address + 4-byte port (sysflag 0x10 selects 20)
    ..      8      STORETIMESTAMP       ms
    ..      8|20   STOREHOST            (sysflag 0x20 selects 20)
    ..      4      RECONSUMETIMES
    ..      8      PREPAREDTRANSACTIONOFFSET
    ..      4+n    BODYLEN, BODY
    ..      1|2+n  TOPICLEN (v1: signed byte, v2: signed short), TOPIC (UTF-8)
    ..      2+n    PROPERTIESLEN (signed short), PROPERTIES (UTF-8)

BLANK end-of-file marker (``CommitLog.java`` ``doAppend``): TOTALSIZE = bytes left in the file, MAGIC =
BLANK_MAGIC_CODE; the rest of the file is not written.

Consume-queue unit (``S/ConsumeQueue.java``), 20 bytes::

    0  8  commitLogOffset
    8  4  size
    12 8  tagsCode

Index file (``S/index/IndexHeader.java``, ``IndexFile.java``): 40-byte header, ``slots`` 4-byte slots, then
``max_entries`` 20-byte entries (entry 0 is never used)::

    header: 0 beginTimestamp(8) 8 endTimestamp(8) 16 beginPhyOffset(8) 24 endPhyOffset(8)
            32 hashSlotCount(4) 36 indexCount(4)
    slot:   newest entry number of the bucket (0 = empty)
    entry:  0 keyHash(4) 4 phyOffset(8) 12 timeDiff(4, seconds) 16 prevIndex(4)

Checkpoint (``S/StoreCheckpoint.java``): one 4096-byte page, five longs at 0/8/16/24/32:
physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset.
"""

from __future__ import annotations

import re
import struct

import numpy as np

# --- magic codes (C/message/MessageDecoder.java, S/CommitLog.java) -----------------------------------------
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, MessageDecoder.MESSAGE_MAGIC_CODE (v1 records)
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, MessageDecoder.MESSAGE_MAGIC_CODE_V2 (2-byte topic length)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, CommitLog.BLANK_MAGIC_CODE (end-of-file filler)
END_FILE_MIN_BLANK_LENGTH = 8  # 0x8, CommitLog.END_FILE_MIN_BLANK_LENGTH

# --- sysflag bits (C/sysflag/MessageSysFlag.java) ------------------------------------------------------------
COMPRESSED_FLAG = 0x1  # MessageSysFlag.COMPRESSED_FLAG
MULTI_TAGS_FLAG = 0x2  # MessageSysFlag.MULTI_TAGS_FLAG
TRANSACTION_NOT_TYPE = 0x0  # MessageSysFlag.TRANSACTION_NOT_TYPE
TRANSACTION_PREPARED_TYPE = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
TRANSACTION_COMMIT_TYPE = 0x8  # MessageSysFlag.TRANSACTION_COMMIT_TYPE
TRANSACTION_ROLLBACK_TYPE = 0xC  # MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
TRANSACTION_TYPE_MASK = 0xC  # bits of MessageSysFlag.getTransactionValue
BORNHOST_V6_FLAG = 0x10  # MessageSysFlag.BORNHOST_V6_FLAG
STOREHOSTADDRESS_V6_FLAG = 0x20  # MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
NEED_UNWRAP_FLAG = 0x40  # MessageSysFlag.NEED_UNWRAP_FLAG
INNER_BATCH_FLAG = 0x80  # MessageSysFlag.INNER_BATCH_FLAG
COMPRESSION_TYPE_MASK = 0x700  # MessageSysFlag.COMPRESSION_TYPE_COMPARATOR (bits 8-10)
COMPRESSION_TYPE_SHIFT = 8
COMPRESSION_LZ4 = 1  # CompressionType.LZ4 value
COMPRESSION_ZSTD = 2  # CompressionType.ZSTD value
COMPRESSION_ZLIB = 3  # CompressionType.ZLIB value (0 with COMPRESSED_FLAG also means ZLIB)

# --- record field positions (C/message/MessageDecoder.java) ---------------------------------------------------
TOTALSIZE_POSITION = 0
MAGIC_CODE_POSITION = 4  # MessageDecoder.MESSAGE_MAGIC_CODE_POSITION
BODY_CRC_POSITION = 8
QUEUE_ID_POSITION = 12
FLAG_POSITION = 16  # MessageDecoder.MESSAGE_FLAG_POSITION
QUEUE_OFFSET_POSITION = 20  # MessageDecoder.QUEUE_OFFSET_POSITION
PHYSICAL_OFFSET_POSITION = 28  # MessageDecoder.MESSAGE_PHYSIC_OFFSET_POSITION
SYSFLAG_POSITION = 36  # MessageDecoder.SYSFLAG_POSITION
BORN_TIMESTAMP_POSITION = 40  # MessageDecoder.BORN_TIMESTAMP_POSITION
BORN_HOST_POSITION = 48
IPV4_HOST_LENGTH = 8  # 4-byte address + 4-byte port
IPV6_HOST_LENGTH = 20  # 16-byte address + 4-byte port

MAX_TOPIC_LENGTH_V1 = 127  # Byte.MAX_VALUE: longer topics need v2 records (CommitLog autoMessageVersionOnTopicLen)
MAX_TOPIC_LENGTH = 255  # longest topic the broker lets through (retry topics, HookUtils)
MAX_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE, MessageExtEncoder
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize (4 MiB)

RECORD_FIXED = struct.Struct(">iiiiiqqiq")
"""TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP (48 bytes)."""
BLANK_MARKER = struct.Struct(">ii")
"""TOTALSIZE (bytes left in the file), BLANK_MAGIC_CODE."""


def host_length(sysflag: int, v6_flag: int) -> int:
    """Bytes of a host field for a record whose sysflag has ``v6_flag`` set or not."""
    return IPV6_HOST_LENGTH if sysflag & v6_flag else IPV4_HOST_LENGTH


def topic_length_size(magic: int) -> int:
    """Width of the topic-length field: 1 byte in v1 records, 2 bytes in v2 records."""
    return 2 if magic == MESSAGE_MAGIC_CODE_V2 else 1


def cal_msg_length(magic: int, sysflag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    """RocketMQ's ``MessageExtEncoder.calMsgLength``: the record length the fields imply."""
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + host_length(sysflag, BORNHOST_V6_FLAG)
        + 8
        + host_length(sysflag, STOREHOSTADDRESS_V6_FLAG)
        + 4 + 8
        + 4 + max(body_length, 0)
        + topic_length_size(magic) + topic_length
        + 2 + max(properties_length, 0)
    )


# --- properties (C/message/MessageDecoder.java) --------------------------------------------------------------
NAME_VALUE_SEPARATOR = "\u0001"  # MessageDecoder.NAME_VALUE_SEPARATOR
PROPERTY_SEPARATOR = "\u0002"  # MessageDecoder.PROPERTY_SEPARATOR
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"  # MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_CRC32 = "__CRC32#"  # MessageConst.PROPERTY_CRC32
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
CRC32_RESERVED_LEN = 8 + 1 + 10 + 1  # CommitLog.CRC32_RESERVED_LEN: "__CRC32#" \u0001 10 digits \u0002
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
# topics the broker creates and configures itself (TopicValidator's system topics, TopicConfigManager's
# built-ins), and the per-group retry and dead-letter topics (MixAll.RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
SYSTEM_TOPIC_PATTERN = re.compile(r"^(RMQ_SYS_.*|SCHEDULE_TOPIC_XXXX|rmq_sys_.*|TBW102|BenchmarkTest|"
                                  r"OFFSET_MOVED_EVENT|SELF_TEST_TOPIC|TRANS_CHECK_MAX_TIME_TOPIC|RMQ_.*)$")
RETRY_TOPIC_PATTERN = re.compile(r"^%(RETRY|DLQ)%")
LMQ_PREFIX = "%LMQ%"  # MixAll.LMQ_PREFIX: light message queues (enableLmq), consume queues of other topics' records
DEFAULT_DELAY_LEVELS_MS = (
    1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
    420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000,
)  # MessageStoreConfig.messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# --- consume queue (S/ConsumeQueue.java) ----------------------------------------------------------------------
CQ_STORE_UNIT_SIZE = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE
CQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
"""One consume-queue unit: commitLogOffset(8) size(4) tagsCode(8)."""
_TAGS_AT = CQ_UNIT_DTYPE.fields["tags_code"][1]
CQ_TAGS_WORDS_DTYPE = np.dtype({"names": ["tags_high", "tags_low"], "formats": [">i4", ">i4"],
                                "offsets": [_TAGS_AT, _TAGS_AT + 4], "itemsize": CQ_STORE_UNIT_SIZE})
"""The same unit seen as tagsCode's two 32-bit halves (bytes 12-15 high, 16-19 low): the tag test needs
``(int) tagsCode``, the low half, and reading it in place saves widening every unit to a native int64."""
CQ_FILLER_SIZE = 0x7FFFFFFF  # Integer.MAX_VALUE: size of the blank units that pad a queue starting late


def unit_bytes(units: np.ndarray) -> np.ndarray:
    """Consume-queue units as the native kernels take them: their bytes in the file's layout, one run."""
    if units.dtype != CQ_UNIT_DTYPE:  # units built elsewhere (e.g. native byte order): the file's layout
        units = units.astype(CQ_UNIT_DTYPE)
    return np.ascontiguousarray(units).reshape(-1).view(np.uint8)


# --- index file (S/index/IndexHeader.java, IndexFile.java) ---------------------------------------------------
INDEX_HEADER = struct.Struct(">qqqqii")
"""beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount (40 bytes)."""
INDEX_HEADER_SIZE = 40  # IndexHeader.INDEX_HEADER_SIZE
INDEX_SLOT_SIZE = 4  # IndexFile.hashSlotSize
INDEX_ENTRY_SIZE = 20  # IndexFile.indexSize
INDEX_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])
"""One index entry: keyHash(4) phyOffset(8) timeDiff(4, seconds since beginTimestamp) prevIndex(4)."""
INDEX_INVALID = 0  # IndexFile.invalidIndex: empty slot / end of chain

# --- checkpoint (S/StoreCheckpoint.java) ----------------------------------------------------------------------
CHECKPOINT_FILE_SIZE = 4096  # one OS page, MappedFile.OS_PAGE_SIZE
CHECKPOINT = struct.Struct(">qqqqq")
"""physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset."""
CHECKPOINT_RECOVER_SAFETY_MS = 3000  # StoreCheckpoint.getMinTimestamp subtracts 3 s

# --- default sizes (S/config/MessageStoreConfig.java) ---------------------------------------------------------
DEFAULT_COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024  # mappedFileSizeCommitLog, 1 GiB
DEFAULT_CONSUME_QUEUE_FILE_SIZE = 300000 * CQ_STORE_UNIT_SIZE  # mappedFileSizeConsumeQueue, 6,000,000 bytes
DEFAULT_INDEX_HASH_SLOTS = 5_000_000  # maxHashSlotNum
DEFAULT_INDEX_MAX_ENTRIES = 5_000_000 * 4  # maxIndexNum, 20,000,000

FILE_NAME_DIGITS = 20  # UtilAll.offset2FileName: zero-padded 20 digits

# --- store directory names (S/config/StorePathConfigHelper.java) ---------------------------------------------
COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"
META_DIR = ".rocketstore"  # rocketstore's own bookkeeping beside the store's files (not RocketMQ's)


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the 20-digit zero-padded decimal name of a file starting at ``offset``."""
    return str(offset).zfill(FILE_NAME_DIGITS)


def round_up_cq_file_size(size: int) -> int:
    """``MessageStoreConfig.getMappedFileSizeConsumeQueue``: the configured size rounded up to whole units."""
    return -(-size // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
