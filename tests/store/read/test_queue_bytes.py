"""Bytes of queue-offset runs from consume-queue units alone (``RocketStore.queue_bytes``,
``offset_within_bytes``): checked against the manifest's record sizes of the real store (public-a)."""

import itertools

import pytest

from rocketstore_spark.store.read import queue_bytes


def biggest_queue(dispatched):
    return max(dispatched.items(), key=lambda kv: len(kv[1]))


def test_bytes_of_runs_are_the_records_sizes(golden_store, dispatched):
    (topic, qid), records = biggest_queue(dispatched)
    sizes = [m["storeSize"] for m in records]
    first = records[0]["cqOffset"]
    n = len(records)
    for lo, hi in [(0, n), (0, 1), (3, 17), (n - 5, n), (7, 7)]:
        assert golden_store.queue_bytes(topic, qid, first + lo, first + hi) == sum(sizes[lo:hi])
    # a cap stops counting early, but never below the cap
    capped = golden_store.queue_bytes(topic, qid, first, first + n, cap=1000)
    assert 1000 <= capped <= sum(sizes)


def test_offset_within_bytes_is_the_longest_run_that_fits(golden_store, dispatched):
    (topic, qid), records = biggest_queue(dispatched)
    sizes = [m["storeSize"] for m in records]
    first = records[0]["cqOffset"]
    n = len(records)
    sums = list(itertools.accumulate(sizes))
    for budget in (1, sizes[0] - 1, sizes[0], sizes[0] + sizes[1], sums[n // 2], sums[-1], sums[-1] * 2):
        fits = sum(1 for s in sums if s <= budget)
        expected = max(fits, 1)  # at least one message, even when it is larger than the budget
        assert golden_store.offset_within_bytes(topic, qid, first, first + n, budget) == first + expected, budget
    # from the middle, and an empty run
    mid = n // 3
    budget = sums[mid + 4] - sums[mid - 1]
    assert golden_store.offset_within_bytes(topic, qid, first + mid, first + n, budget) == first + mid + 5
    assert golden_store.offset_within_bytes(topic, qid, first + 4, first + 4, 100) == first + 4


def test_chunked_reads_agree(golden_store, dispatched, monkeypatch):
    # chunks smaller than the queue: the runs cross chunk boundaries
    monkeypatch.setattr(queue_bytes, "FIRST_CHUNK_UNITS", 2)
    monkeypatch.setattr(queue_bytes, "CHUNK_UNITS", 8)
    (topic, qid), records = biggest_queue(dispatched)
    sizes = [m["storeSize"] for m in records]
    first = records[0]["cqOffset"]
    n = len(records)
    assert golden_store.queue_bytes(topic, qid, first, first + n) == sum(sizes)
    budget = sum(sizes[:n - 3])
    assert golden_store.offset_within_bytes(topic, qid, first, first + n, budget) == first + n - 3


@pytest.fixture(autouse=True)
def _enough_records(dispatched):
    assert len(biggest_queue(dispatched)[1]) > 40  # the checks above need a queue this long
