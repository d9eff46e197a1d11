"""The clients' trace encoding decoded as ``TraceDataEncoder.decoderFromTraceDataString`` decodes it."""

import pytest

from rocketstore_spark.store.format.trace import TRACE_RECORD_FIELDS, TraceDecodeError, decode_trace_data

C, F = "\u0001", "\u0002"


def record(*fields) -> str:
    return C.join(map(str, fields)) + F


def test_every_type():
    body = (record("Pub", 1000, "r", "pg", "t", "id1", "tg", "k1 k2", "h:1", 20, 5, 0, "OFF", "true")
            + record("SubBefore", 1001, "r", "cg", "req", "id1", 2, "k1 k2")
            + C.join(["SubAfter", "req", "id1", "7", "false", "k1 k2", "4", "1002", "cg", ""]) + F
            + record("EndTransaction", 1003, "r", "pg", "t", "id2", "", "", "h:1", 1, "tx", "COMMIT_MESSAGE", "true")
            + record("Recall", 1004, "r", "pg", "t", "id3", "true")
            + record("Unknown", 1, 2)).encode()
    recs = decode_trace_data(body)
    assert [r["traceType"] for r in recs] == ["Pub", "SubBefore", "SubAfter", "EndTransaction", "Recall"]
    assert all(tuple(r) == TRACE_RECORD_FIELDS for r in recs)
    pub, before, after, end, recall = recs
    assert (pub["topic"], pub["msgId"], pub["keys"], pub["bodyLength"], pub["costTime"], pub["msgType"],
            pub["offsetMsgId"], pub["success"]) == ("t", "id1", "k1 k2", 20, 5, "Normal_Msg", "OFF", True)
    assert (before["requestId"], before["retryTimes"], before["groupName"]) == ("req", 2, "cg")
    assert (after["costTime"], after["success"], after["consumeResult"], after["timestamp"], after["topic"]) == \
           (7, False, "FAILED", 1002, None)
    assert (end["msgType"], end["transactionId"], end["transactionState"], end["fromTransactionCheck"]) == \
           ("Trans_Msg_Half", "tx", "COMMIT_MESSAGE", True)
    assert (recall["msgId"], recall["success"]) == ("id3", True)


def test_older_layouts():
    old_pub = record("Pub", 1, "r", "g", "t", "id", "tg", "k", "h", 3, 4, 0, "true")  # no offsetMsgId
    old_after = record("SubAfter", "req", "id", 3, "true", "k")  # no context code, time or group
    pub, after = decode_trace_data(old_pub + old_after)
    assert (pub["offsetMsgId"], pub["success"]) == (None, True)
    assert (after["consumeResult"], after["timestamp"], after["groupName"]) == (None, None, None)


@pytest.mark.parametrize("body, message", [
    (record("Pub", "soon", "r"), "timeStamp is not a number: 'soon'"),
    (record("SubBefore", 1, "r"), "SubBefore trace record has 3 fields"),
    (record("Pub", 1, "r", "g", "t", "id", "tg", "k", "h", 3, 4, 9, "true"), "msgType 9 is not a MessageType"),
])
def test_damaged_records(body, message):
    with pytest.raises(TraceDecodeError, match=message):
        decode_trace_data(body.encode())


def test_empty():
    assert decode_trace_data(b"") == [] and decode_trace_data(None) == []
