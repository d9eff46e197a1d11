"""The worker's cache of opened stores and its one rule for reusing one (store_cache.open_cached), counted in
opens: the same key and options, a stamp that says unchanged, a store that serves the request; planners,
executors and streams all go through it."""

import pytest

from rocketstore_spark.errors import RocketStoreError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import Pushed, plan, plan_key
from rocketstore_spark.spark.reader import read_key, store_for
from rocketstore_spark.spark.store_cache import OPEN_STORES, OpenStores, open_cached
from rocketstore_spark.spark.store_snapshot import OldestFile
from rocketstore_spark.spark.stream_reader import RocketStoreStreamReader, open_live, stream_key
from rocketstore_spark.store import RocketStore
from tests.spark.test_planning import _small_store, aged_store


class Opened:
    """A stand-in for an opened store: the cache only closes what it holds."""

    def __init__(self, n):
        self.n, self.closed = n, False

    def close(self):
        self.closed = True


class Stamp:
    def __init__(self, holds=True):
        self.holds = holds

    def unchanged(self):
        return self.holds


class Counting:
    def __init__(self):
        self.opens, self.stamps = [], []

    def open(self):
        self.opens.append(Opened(len(self.opens)))
        return self.opens[-1]

    def stamp(self, store, opened_at):
        assert opened_at > 0
        self.stamps.append(Stamp())
        return self.stamps[-1]


def test_a_store_opened_the_same_way_and_unchanged_is_opened_once():
    cache, c = OpenStores(), Counting()
    first = open_cached("k", ("opts",), c.open, c.stamp, cache=cache)
    assert open_cached("k", ("opts",), c.open, c.stamp, cache=cache) is first
    assert len(c.opens) == 1 and not first.closed


def test_other_options_a_changed_stamp_or_a_store_that_cannot_serve_open_it_again_and_close_the_old():
    cache, c = OpenStores(), Counting()
    first = open_cached("k", 1, c.open, c.stamp, cache=cache)
    second = open_cached("k", 2, c.open, c.stamp, cache=cache)  # other options
    assert len(c.opens) == 2 and first.closed and not second.closed
    c.stamps[-1].holds = False  # something it depends on changed
    third = open_cached("k", 2, c.open, c.stamp, cache=cache)
    assert len(c.opens) == 3 and second.closed
    fourth = open_cached("k", 2, c.open, c.stamp, serves=lambda store: False, cache=cache)
    assert len(c.opens) == 4 and third.closed and fourth is c.opens[-1]
    assert open_cached("k", 2, c.open, c.stamp, serves=lambda store: store is fourth, cache=cache) is fourth
    assert len(c.opens) == 4 and len(cache) == 1


def test_a_stamp_that_fails_closes_the_store_it_was_taken_for():
    cache, c = OpenStores(), Counting()

    def broken(store, opened_at):
        raise OSError("gone")

    with pytest.raises(OSError):
        open_cached("k", 1, c.open, broken, cache=cache)
    assert c.opens[0].closed and "k" not in cache


def test_the_capacity_closes_the_least_recently_used():
    cache, c = OpenStores(capacity=2), Counting()
    a = open_cached("a", 0, c.open, c.stamp, cache=cache)
    b = open_cached("b", 0, c.open, c.stamp, cache=cache)
    assert open_cached("a", 0, c.open, c.stamp, cache=cache) is a  # now the most recently used
    open_cached("c", 0, c.open, c.stamp, cache=cache)
    assert b.closed and not a.closed and "b" not in cache and len(c.opens) == 3


@pytest.fixture
def opens(monkeypatch):
    """Every RocketStore.open of the test, counted."""
    seen = []
    real = RocketStore.open

    def counted(*args, **kwargs):
        seen.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(RocketStore, "open", counted)
    OPEN_STORES.clear()
    yield seen
    OPEN_STORES.clear()


def test_planning_executors_and_streams_share_the_cache_each_under_its_own_key(tmp_path, opens):
    root = aged_store(tmp_path)
    opts = parse_read_options({"path": str(root)})
    parts = plan(opts, Pushed())
    plan(opts, Pushed())
    assert len(opens) == 1 and plan_key(str(root)) in OPEN_STORES
    store_for(parts[0].store, parts[0])
    store_for(parts[0].store, parts[0])
    assert len(opens) == 2 and read_key(parts[0].store, parts[0].lazy_queues) in OPEN_STORES
    ref = opts.stores[0]
    assert open_live(ref, opts) is open_live(ref, opts)
    assert len(opens) == 3 and stream_key(ref, False) in OPEN_STORES


def test_a_stream_opens_a_grown_store_again_and_closes_its_stores_when_it_stops(tmp_path, opens):
    root = aged_store(tmp_path)
    opts = parse_read_options({"path": str(root)}, stream=True)
    ref = opts.stores[0]
    first = open_live(ref, opts)
    assert open_live(ref, opts) is first and len(opens) == 1
    _small_store(root, 3, start=12)  # appended: the snapshot sees the commit log and queue change
    grown = open_live(ref, opts)
    assert grown is not first and len(opens) == 2 and grown.max_offset("T", 0) == 15
    grown_again = open_live(ref, opts)  # just written when opened: not trusted, opened once more
    assert len(opens) == 3 and grown_again.max_offset("T", 0) == 15
    reader = RocketStoreStreamReader(opts, ("body",))
    reader.stop()
    assert stream_key(ref, False) not in OPEN_STORES and not grown_again.commitlog.queue._maps


def test_an_executor_opens_its_store_again_when_the_oldest_commit_log_file_expired(tmp_path, opens):
    root = aged_store(tmp_path)
    part = plan(parse_read_options({"path": str(root)}), Pushed())[0]
    first = store_for(part.store, part)
    assert store_for(part.store, part) is first and len(opens) == 2  # the plan's open, the executor's
    oldest = first.commitlog.queue.files[0].path
    stamp = OldestFile(first)
    moved = tmp_path / "expired"
    oldest.rename(moved)  # expired under it
    assert not stamp.unchanged()
    moved.rename(oldest)
    assert stamp.unchanged()
    oldest.rename(moved)
    try:
        again = store_for(part.store, part)
    except RocketStoreError:
        again = None  # the open may refuse a store without its commit log: it was tried all the same
    finally:
        moved.rename(oldest)
    assert len(opens) == 3 and again is not first and not first.commitlog.queue._maps  # the old one closed
