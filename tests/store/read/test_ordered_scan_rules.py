"""The per-record test of a commit-log-ordered stretch: selected queues, offset ranges, transaction types."""

import types

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.read import ordered_scan

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
def test_records_are_accepted_as_their_queue_rules_say(rows, selected, limits, sparse):
    """Dense tables and sorted keys alike accept a record when its transaction type is dispatched, its queue is
    selected and its offset lies inside its queue's range (the first listed), by topic name and queue id."""
    if sparse:
        saved, ordered_scan.DENSE_RULE_SLOTS = ordered_scan.DENSE_RULE_SLOTS, 0
    try:
        rules = ordered_scan._Rules(selected, limits)
        assert rules.dense is not sparse or not (selected or limits)
        buf, fields = records(rows)
        got = rules.accept(buf, fields).tolist() if rows else []
    finally:
        if sparse:
            ordered_scan.DENSE_RULE_SLOTS = saved
    assert got == expected(rows, selected, limits)


def test_queue_ids_too_sparse_for_a_table_use_sorted_keys():
    many = {f"t{k}": {0, 2_000_000} for k in range(3)}  # 3 topics x 2M queue ids: past the dense table's bound
    assert not ordered_scan._Rules(many, []).dense
    assert ordered_scan._Rules({"t": set(range(2000))}, []).dense
