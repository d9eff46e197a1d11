"""``EncodedBatch.queue_groups``: the dispatched rows grouped by queue, checked against a plain Python grouping for
queue ids dense enough to number directly and for sparse ones."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.write.encoded_batch import EncodedBatch


def a_batch(topic_idx, queue_id, dispatch, topics) -> EncodedBatch:
    n = len(topic_idx)
    zeros = np.zeros(n, dtype=np.int64)
    return EncodedBatch(
        data=np.zeros(0, np.uint8), record_offsets=np.zeros(n + 1, np.int64), topic_names=topics,
        topic_idx=np.asarray(topic_idx, dtype=np.int32), queue_id=np.asarray(queue_id, dtype=np.int32),
        queue_offset_given=zeros - 1, dispatch=np.asarray(dispatch, dtype=bool), tags_code=zeros, delay_ms=zeros,
        store_ts=zeros, ts_given=np.zeros(n, bool), ts_pos=zeros + L.BORN_HOST_POSITION + L.IPV4_HOST_LENGTH,
        entry_rec=np.zeros(0, np.int64), entry_hash=np.zeros(0, np.int64))


def grouped_by_hand(batch: EncodedBatch) -> dict:
    groups: dict = {}
    for r in np.flatnonzero(batch.dispatch).tolist():
        key = (batch.topic_names[int(batch.topic_idx[r])], int(batch.queue_id[r]))
        groups.setdefault(key, []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (batch.topic_names.index(kv[0][0]), kv[0][1])))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 5).flatmap(lambda topics: st.tuples(
    st.just(topics),
    st.lists(st.tuples(st.integers(0, topics - 1), st.one_of(st.integers(0, 9), st.integers(0, 0x7FFFFFFF)),
                       st.booleans()), max_size=60))))
def test_queue_groups_are_the_dispatched_rows_of_each_queue_in_row_order(case):
    topics, rows = case
    names = [f"t{i}" for i in range(topics)]
    batch = a_batch([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], names)
    order, bounds, queues = batch.queue_groups()
    got = {q: order[lo:hi].tolist() for q, lo, hi in zip(queues, bounds[:-1].tolist(), bounds[1:].tolist())}
    assert list(got.items()) == list(grouped_by_hand(batch).items())
    assert bounds[0] == 0 and bounds[-1] == len(order)


def test_many_queues_of_many_topics_numbered_densely():
    rng = np.random.default_rng(5)
    n = 20_000
    topic_idx, queue_id = rng.integers(0, 360, n), rng.integers(0, 8, n)
    batch = a_batch(topic_idx, queue_id, rng.random(n) < 0.95, [f"topic-{i:05d}" for i in range(360)])
    order, bounds, queues = batch.queue_groups()
    got = {q: order[lo:hi].tolist() for q, lo, hi in zip(queues, bounds[:-1].tolist(), bounds[1:].tolist())}
    assert got == grouped_by_hand(batch) and len(queues) == len(got)
