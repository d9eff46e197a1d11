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


def a_staged_part(rng, n: int, topics: list, uniform: bool) -> EncodedBatch:
    """A staged part of ``n`` rows: every per-row field one value (``uniform``) or varied."""
    def column(low, high, dtype):
        if uniform:
            return np.full(n, low, dtype=dtype)
        return rng.integers(low, high, n).astype(dtype)

    entries = rng.integers(0, 3, n)
    lengths = rng.integers(100, 2000, n)
    return EncodedBatch(
        data=np.zeros(0, np.uint8), record_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        topic_names=topics, topic_idx=column(0, len(topics), np.int32), queue_id=column(0, 8, np.int32),
        queue_offset_given=column(-1, 5, np.int64), dispatch=column(0, 2, bool), tags_code=column(0, 1 << 40, np.int64),
        delay_ms=column(0, 3, np.int64), store_ts=column(1 << 40, (1 << 40) + 9, np.int64), ts_given=column(0, 2, bool),
        ts_pos=column(L.BORN_HOST_POSITION + L.IPV4_HOST_LENGTH, L.BORN_HOST_POSITION + L.IPV6_HOST_LENGTH, np.int64),
        entry_rec=np.repeat(np.arange(n), entries).astype(np.int64),
        entry_hash=rng.integers(0, 1 << 31, int(entries.sum())).astype(np.int64),
        phy=rng.integers(0, 1 << 40, n).astype(np.int64), staged_queue_offset=rng.integers(0, 1 << 30, n))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_staged_metadata_loads_back_as_saved(tmp_path_factory, parts_spec, seed):
    """Saved metadata (fields holding one value written once, entries as 32-bit numbers) loads back as the parts
    concatenated, field by field, for parts of one value per field, of varied values, empty or of one row."""
    rng = np.random.default_rng(seed)
    topics = ["a", "b", "c"]
    parts = [a_staged_part(rng, n, topics, uniform) for n, uniform in parts_spec]
    stem = tmp_path_factory.mktemp("meta") / "part"
    EncodedBatch.save_meta(parts, stem)
    loaded = EncodedBatch.load(stem, stem.parent, 1 << 30)
    rows = sum(len(p) for p in parts)
    assert len(loaded) == rows and loaded.chunks() == [(a, a + len(p)) for a, p in
                                                         zip(np.cumsum([0] + [len(p) for p in parts]), parts) if len(p)]
    concat = {name: np.concatenate([getattr(p, name) for p in parts]) for name in
              ("queue_id", "queue_offset_given", "dispatch", "tags_code", "delay_ms", "store_ts", "ts_given", "ts_pos",
               "entry_hash", "phy", "staged_queue_offset")}
    for name, expected in concat.items():
        assert getattr(loaded, name).tolist() == expected.tolist(), name
    assert loaded.topics() == [t for p in parts for t in p.topics()]
    assert loaded.lengths.tolist() == np.concatenate([p.lengths for p in parts]).tolist()
    bases = np.cumsum([0] + [len(p) for p in parts])
    assert loaded.entry_rec.tolist() == np.concatenate([p.entry_rec + b for p, b in zip(parts, bases)]).tolist()


def test_staged_metadata_of_uniform_rows_is_small(tmp_path):
    """A part whose rows share their topic, queue, delay, flags and timestamp position: those fields cost a few
    bytes each, not a number per row; entries cost 8 bytes (row and hash)."""
    rng = np.random.default_rng(1)
    n = 10_000
    part = a_staged_part(rng, n, ["a"], uniform=True)
    EncodedBatch.save_meta([part], tmp_path / "part")
    size = (tmp_path / "part.meta.npy").stat().st_size
    entries = len(part.entry_rec)
    # record offsets, phy and staged queue offsets (8 bytes a row each), entries (4 + 4), headers
    assert size < n * 24 + entries * 8 + 4096
    loaded = EncodedBatch.load(tmp_path / "part", tmp_path, 1 << 30)
    assert loaded.queue_id.shape == (n,) and not loaded.queue_id.flags.writeable
