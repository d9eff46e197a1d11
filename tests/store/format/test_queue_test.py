"""The queue test of commit-log-ordered reads: selected queues, offset ranges, transaction types."""

import types

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.queue_test import QueueTest

TOPICS = ["orders", "pay", "%RETRY%group", "other"]
TRAN = [L.TRANSACTION_NOT_TYPE, L.TRANSACTION_PREPARED_TYPE, L.TRANSACTION_COMMIT_TYPE,
        L.TRANSACTION_ROLLBACK_TYPE]


def records(rows):
    """(buf, fields) of records ``rows``: (topic index, queue id, queue offset, transaction type index); topic
    index len(TOPICS) is a topic no rule names, and invalid UTF-8 bytes stand for a topic the broker would
    decode with U+FFFD."""
    names = [t.encode() for t in TOPICS] + [b"unknown", b"pay\xff"]
    buf = b"".join(names)
    starts = np.cumsum([0] + [len(n) for n in names[:-1]])
    topic = np.array([r[0] for r in rows], dtype=np.int64)
    fields = types.SimpleNamespace(
        sysflag=np.array([TRAN[r[3]] for r in rows], dtype=np.int32),
        topic_pos=starts[topic].astype(np.int64), topic_len=np.array([len(names[t]) for t in topic], np.int64),
        queue_id=np.array([r[1] for r in rows], dtype=np.int32),
        queue_offset=np.array([r[2] for r in rows], dtype=np.int64))
    return np.frombuffer(buf, np.uint8), fields


def expected(rows, selected, limits):
    out = []
    for t, qid, offset, tran in rows:
        name = (TOPICS + ["unknown", "pay\ufffd"])[t]
        ok = TRAN[tran] in (L.TRANSACTION_NOT_TYPE, L.TRANSACTION_COMMIT_TYPE)
        ok = ok and qid in selected.get(name, ())
        ranges = sorted((lo, hi) for n, q, lo, hi in limits if n == name and q == qid)
        if ranges:
            lo, hi = ranges[0]
            ok = ok and lo <= offset < hi
        out.append(ok)
    return out


ROWS = st.lists(st.tuples(st.integers(0, len(TOPICS) + 1), st.sampled_from([0, 1, 2, 7, 5000, 2**31 - 1]),
                          st.integers(0, 50), st.integers(0, 3)), max_size=40)
RULE_TOPICS = TOPICS + ["pay\ufffd"]  # a directory named as the broker decodes an invalid UTF-8 topic
SELECTED = st.dictionaries(st.sampled_from(RULE_TOPICS), st.sets(st.sampled_from([0, 1, 2, 7, 5000]), max_size=4),
                           max_size=4)
LIMITS = st.lists(st.tuples(st.sampled_from(RULE_TOPICS), st.sampled_from([0, 1, 2, 7]), st.integers(0, 30),
                            st.integers(0, 50)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, selected=SELECTED, limits=LIMITS, sparse=st.booleans())
@example(rows=[(0, 0, 0, 0)], selected={"orders": {0}}, limits=[("orders", 0, 0, 1), ("orders", 0, 0, 0)],
         sparse=False)  # a queue listed twice
def test_records_are_kept_as_their_queue_rules_say(rows, selected, limits, sparse):
    """Dense tables and hashed queues alike keep a record when its transaction type is dispatched, its queue is
    selected and its offset lies inside its queue's range (the lowest listed), by topic name and queue id; a
    topic that is not UTF-8 is the name the broker decodes it to."""
    if sparse:  # a queue id this far out leaves the queues too sparse for a table
        selected = {**selected, "other": {2_000_000_000}}
    buf, fields = records(rows)
    got = QueueTest(selected, limits).keeps(buf, fields).tolist()
    assert got == expected(rows, selected, limits)


def test_a_topic_outside_the_buffer_is_a_corrupt_record():
    import pytest

    from rocketstore_spark.errors import CorruptRecordError

    buf, fields = records([(0, 0, 0, 0)])
    fields.topic_len = fields.topic_len + len(buf)
    with pytest.raises(CorruptRecordError, match="runs outside the buffer"):
        QueueTest({"orders": {0}}).keeps(buf, fields)
