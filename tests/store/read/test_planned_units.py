"""A planner's exact tag-hash counts of many short consume-queue ranges, read in one pass
(``StoreReader.tag_match_spans``), against the queue-by-queue count; counted, never timed."""

import numpy as np
import pytest

from rocketstore_spark.store import RocketStore, Subscription
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L


def counted_queue_by_queue(store, rng, sub):
    topic, qid, start, end = rng
    hits = [o[u["size"] != L.CQ_FILLER_SIZE] for o, u in store.consume_queue(topic, qid).hash_matches(sub, start, end)]
    found = np.concatenate(hits) if hits else np.zeros(0, dtype=np.int64)
    return len(found), (int(found[0]) if len(found) else None), (int(found[-1]) if len(found) else None)


@pytest.mark.parametrize("tags", ["TagA", "TagB || 标签C", "Tag-264", "nothing-has-this"])
def test_counts_match_the_queue_by_queue_count(golden_store_path, tags):
    sub = Subscription.parse(tags)
    with RocketStore.open(golden_store_path) as store:
        per = store.sizes.consume_queue_file_size // L.CQ_STORE_UNIT_SIZE
        ranges = []
        for t in store.topics():
            for q in store.queue_ids(t):
                lo, hi = store.min_offset(t, q), store.max_offset(t, q)
                ranges.append((t, q, lo, hi))  # the whole queue: across files unless the queue is short
                for a, b in store.consume_queue(t, q).file_ranges(lo, hi):
                    ranges += [(t, q, a, b), (t, q, a + 1, max(a + 1, b - 2))]  # the planner's ranges, and inside
        with counting() as cost:
            spans = store.tag_match_spans(ranges, sub)
        eligible = 0
        for rng, span in zip(ranges, spans):
            topic, qid, lo, hi = rng
            one_file = hi > lo and lo // per == (hi - 1) // per
            if topic == L.SCHEDULE_TOPIC or not one_file:
                assert span is None  # the schedule topic's tagsCode is a time; a range crossing files
                continue
            eligible += 1
            count, first, last = counted_queue_by_queue(store, rng, sub)
            assert span == (count, first, last), rng
    assert eligible > 40 and cost.reads == eligible  # one read per range counted


def test_invalid_units_leave_a_range_to_the_queue_by_queue_count(golden_copy):
    sub = Subscription.parse("TagA")
    with RocketStore.open(golden_copy) as store:
        topic = "TopicTest"
        ranges = [(topic, q, 0, min(100, store.max_offset(topic, q))) for q in store.queue_ids(topic)]
        assert all(s is not None for s in store.tag_match_spans(ranges, sub))
        path = golden_copy / L.CONSUMEQUEUE_DIR / topic / "1" / f"{0:020d}"
        units = np.fromfile(path, dtype=L.CQ_UNIT_DTYPE)
        units[50:] = np.zeros(1, dtype=L.CQ_UNIT_DTYPE)  # the queue was cut behind the store's back
        units.tofile(path)
        spans = store.tag_match_spans(ranges, sub)
    assert spans[1] is None and all(s is not None for i, s in enumerate(spans) if i != 1)
