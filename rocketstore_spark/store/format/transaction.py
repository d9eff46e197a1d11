"""Transactional messages as the broker keeps them: half messages, op records, and the names that tie them.

A transactional producer's message is first stored as a *half* message (``TransactionalMessageBridge
.parseHalfMessageInner``): topic ``RMQ_SYS_TRANS_HALF_TOPIC``, queue 0, the real topic and queue kept in the
properties ``REAL_TOPIC`` / ``REAL_QID``. When the producer commits or rolls back (or answers a check), the broker
writes an *op* record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id as the half queue): tag ``d``
(``TransactionalMessageUtil.REMOVE_TAG``), the body the half queue offsets it resolves, each followed by ``,``
(``OFFSET_SEPARATOR``; ``TransactionalOpBatchService`` batches several into one body, ``"0,1,3,"``). A commit also
puts the message into its real topic; a rollback writes only the op record.

The broker's check (``TransactionalMessageServiceImpl.check``) walks the half queue from the committed offset of
the group ``CID_RMQ_SYS_TRANS``: a half whose offset an op record names is done; any other is checked with the
producer (``PGROUP``) and, to be checked again later, written anew at the end of the half queue with
``TRANSACTION_CHECK_TIMES`` incremented, the group's offset moving past the old copy. A copy written back during
its check-immunity time carries the offset of the first copy in ``TRAN_PREPARED_QUEUE_OFFSET``, and an op record
naming that offset resolves it too. After ``transactionCheckMax`` checks the half goes to
``TRANS_CHECK_MAX_TIME_TOPIC`` and is dropped.
"""

from __future__ import annotations

import re

RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"  # TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the check's consumer group
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG
OFFSET_SEPARATOR = ","  # TransactionalMessageUtil.OFFSET_SEPARATOR

# MessageConst's property names
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_ID = "__transactionId__"  # TransactionalMessageUtil.TRANSACTION_ID (the client sets it)


_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


def java_long(text) -> int:
    """``TransactionalMessageServiceImpl.getLong``: the number (``Long.parseLong``), or -1 when the text is not
    one."""
    text = str(text)
    return int(text) if _JAVA_LONG.fullmatch(text) else -1


def op_offsets(tags, body) -> list[int]:
    """The half queue offsets one op record resolves: none unless its tag is ``d``; entries that are not numbers
    read as -1 (below every half offset: they resolve nothing), as the broker's ``fillOpRemoveMap`` reads them."""
    if tags != REMOVE_TAG or not body:
        return []
    text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray, memoryview)) else str(body)
    # Java's String.split drops trailing empty strings: "1,2," → ["1", "2"]
    parts = text.split(OFFSET_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return [java_long(p) for p in parts]


def check_times(properties: dict) -> int:
    """How often the broker has checked a half with its producer (``TRANSACTION_CHECK_TIMES``, 0 before the
    first check)."""
    value = properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
    return 0 if value is None else max(java_long(value), 0)


__all__ = ["RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
           "CID_SYS_RMQ_TRANS", "REMOVE_TAG", "OFFSET_SEPARATOR", "PROPERTY_REAL_TOPIC", "PROPERTY_REAL_QUEUE_ID",
           "PROPERTY_PRODUCER_GROUP", "PROPERTY_TRANSACTION_PREPARED", "PROPERTY_TRANSACTION_CHECK_TIMES",
           "PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET", "PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS",
           "PROPERTY_TRANSACTION_ID", "java_long", "op_offsets", "check_times"]
