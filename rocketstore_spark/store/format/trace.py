"""Message traces in the client's trace encoding (``TraceDataEncoder`` of rocketmq-client).

A client with message trace on (``enableMsgTrace``) sends what it did to a trace topic (``RMQ_SYS_TRACE_TOPIC``
unless it names another), in batches: the body of one trace message holds several trace records, each ended by
``FIELD_SPLITOR`` (``\\u0002``), their fields separated by ``CONTENT_SPLITOR`` (``\\u0001``); the message keys are
the traced msgIds and keys, so the broker's index finds a message's traces. The records, by their first field:

=============== ==========================================================================================
type            fields after the type
=============== ==========================================================================================
Pub             timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength, costTime,
                msgType, [offsetMsgId,] success[, clientHost]
SubBefore       timeStamp, regionId, groupName, requestId, msgId, retryTimes, keys
SubAfter        requestId, msgId, costTime, success, keys[, contextCode[, timeStamp, groupName]]
EndTransaction  timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, msgType,
                transactionId, transactionState, fromTransactionCheck
Recall          timeStamp, regionId, groupName, topic, msgId, success
=============== ==========================================================================================

``msgType`` is the ordinal of ``MessageType``; ``contextCode`` that of ``ConsumeReturnType``. Records of another
type are skipped, as the client's decoder skips them.
"""

from __future__ import annotations

RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
CONTENT_SPLITOR = "\u0001"  # TraceConstants.CONTENT_SPLITOR
FIELD_SPLITOR = "\u0002"  # TraceConstants.FIELD_SPLITOR
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")  # MessageType
CONSUME_RETURN_TYPES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")  # ConsumeReturnType
TRACE_TYPES = ("Pub", "Recall", "SubBefore", "SubAfter", "EndTransaction")  # TraceType

#: the fields of a decoded trace record, in order (None where its type has no such field)
TRACE_RECORD_FIELDS = ("traceType", "timestamp", "regionId", "groupName", "requestId", "topic", "msgId", "tags",
                       "keys", "storeHost", "bodyLength", "costTime", "msgType", "offsetMsgId", "success",
                       "clientHost", "retryTimes", "consumeResult", "transactionId", "transactionState",
                       "fromTransactionCheck")


class TraceDecodeError(ValueError):
    """A trace record the client's decoder could not read either (the reader adds the file and offset)."""


def java_split(text: str, sep: str) -> list[str]:
    """``String.split`` of one character: trailing empty strings dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError as e:
        raise TraceDecodeError(f"{what} is not a number: {text!r}") from e


def _message_type(text: str) -> str:
    n = _int(text, "msgType")
    if not 0 <= n < len(MESSAGE_TYPES):
        raise TraceDecodeError(f"msgType {n} is not a MessageType ordinal (0..{len(MESSAGE_TYPES) - 1})")
    return MESSAGE_TYPES[n]


def _pub(f: list[str]) -> dict:
    rec = {"timestamp": _int(f[1], "timeStamp"), "regionId": f[2], "groupName": f[3], "topic": f[4],
           "msgId": f[5], "tags": f[6], "keys": f[7], "storeHost": f[8], "bodyLength": _int(f[9], "bodyLength"),
           "costTime": _int(f[10], "costTime"), "msgType": _message_type(f[11])}
    if len(f) == 13:
        rec["success"] = _bool(f[12])
    elif len(f) >= 14:
        rec["offsetMsgId"], rec["success"] = f[12], _bool(f[13])
        if len(f) >= 15:
            rec["clientHost"] = f[14]
    return rec


def _sub_before(f: list[str]) -> dict:
    return {"timestamp": _int(f[1], "timeStamp"), "regionId": f[2], "groupName": f[3], "requestId": f[4],
            "msgId": f[5], "retryTimes": _int(f[6], "retryTimes"), "keys": f[7]}


def _sub_after(f: list[str]) -> dict:
    rec = {"requestId": f[1], "msgId": f[2], "costTime": _int(f[3], "costTime"), "success": _bool(f[4]),
           "keys": f[5]}
    if len(f) >= 7:
        code = _int(f[6], "contextCode")
        rec["consumeResult"] = CONSUME_RETURN_TYPES[code] if 0 <= code < len(CONSUME_RETURN_TYPES) else str(code)
    if len(f) >= 9:
        rec["timestamp"], rec["groupName"] = _int(f[7], "timeStamp"), f[8]
    return rec


def _end_transaction(f: list[str]) -> dict:
    return {"timestamp": _int(f[1], "timeStamp"), "regionId": f[2], "groupName": f[3], "topic": f[4],
            "msgId": f[5], "tags": f[6], "keys": f[7], "storeHost": f[8], "msgType": _message_type(f[9]),
            "transactionId": f[10], "transactionState": f[11], "fromTransactionCheck": _bool(f[12])}


def _recall(f: list[str]) -> dict:
    return {"timestamp": _int(f[1], "timeStamp"), "regionId": f[2], "groupName": f[3], "topic": f[4],
            "msgId": f[5], "success": _bool(f[6])}


_DECODERS = {"Pub": _pub, "SubBefore": _sub_before, "SubAfter": _sub_after, "EndTransaction": _end_transaction,
             "Recall": _recall}


def decode_trace_data(body) -> list[dict]:
    """The trace records of one trace message's body (``TraceDataEncoder.decoderFromTraceDataString``), each a
    dict of :data:`TRACE_RECORD_FIELDS`. A record too short for its type, or with a field that is not a number
    where one is expected, raises :class:`TraceDecodeError`."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray, memoryview)) else body
    out = []
    for context in java_split(text or "", FIELD_SPLITOR):
        fields = java_split(context, CONTENT_SPLITOR)
        decoder = _DECODERS.get(fields[0] if fields else "")
        if decoder is None:
            continue
        try:
            rec = decoder(fields)
        except IndexError as e:
            raise TraceDecodeError(f"a {fields[0]} trace record has {len(fields)} fields, too few for its "
                                   "type") from e
        out.append({name: rec.get(name) for name in TRACE_RECORD_FIELDS} | {"traceType": fields[0]})
    return out


__all__ = ["RMQ_SYS_TRACE_TOPIC", "CONTENT_SPLITOR", "FIELD_SPLITOR", "MESSAGE_TYPES", "CONSUME_RETURN_TYPES",
           "TRACE_TYPES", "TRACE_RECORD_FIELDS", "TraceDecodeError", "decode_trace_data"]
