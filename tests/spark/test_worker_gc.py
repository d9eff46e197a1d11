"""The worker's long-lived objects leave the cycle collector's generations, and come back when a new store is
settled (no cycle among them is kept for good)."""

import gc
import sys
import types
import weakref

import pytest

from rocketstore_spark.spark.worker_gc import RECLAIM_EVERY, in_spark_worker, settle, settle_in_worker


class Holder:
    """Stands for an opened store a worker keeps."""


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cycle collector frees it


@pytest.fixture(autouse=True)
def thawed():
    yield
    gc.unfreeze()


def test_settling_freezes_what_the_worker_holds_once_per_holder():
    first = Holder()
    assert settle(first) is True
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the interpreter's modules at least
    since = Node()  # allocated after the freeze: in the young generation
    collections = []
    gc.callbacks.append(lambda phase, info: collections.append(phase))
    try:
        assert settle(first) is False  # the same store again: nothing collected, nothing frozen
        assert collections == []
    finally:
        gc.callbacks.pop()
    # The count can only fall here (a frozen object freed by its last reference leaves the permanent generation).
    assert gc.get_freeze_count() <= frozen
    assert any(o is since for o in gc.get_objects())  # still in the generations


def test_later_collections_skip_the_frozen_objects():
    kept = [Node() for _ in range(20_000)]
    settle(Holder())
    assert gc.get_freeze_count() >= len(kept)
    tracked = {id(o) for o in gc.get_objects()}  # what any collection visits: the generations
    assert not any(id(n) in tracked for n in kept)
    fresh = Node()
    assert any(o is fresh for o in gc.get_objects())  # what tasks allocate afterwards is collected as before


def collects(holder) -> bool:
    """Whether settling ``holder`` ran a collection."""
    seen = []
    gc.callbacks.append(lambda phase, info: seen.append(phase))
    try:
        settle(holder)
    finally:
        gc.callbacks.pop()
    return bool(seen)


def test_every_few_new_holders_return_the_frozen_objects_to_the_collector():
    for _ in range(RECLAIM_EVERY):  # to the start of a round: the settle that collected
        if collects(Holder()):
            break
    else:
        pytest.fail(f"{RECLAIM_EVERY} new holders settled without a full collection")
    node = Node()
    dead = weakref.ref(node)
    assert not collects(Holder())  # frozen, and nothing collected while the round lasts
    del node  # garbage now, but frozen: a collection does not see it
    gc.collect()
    assert dead() is not None
    for _ in range(RECLAIM_EVERY - 2):
        assert not collects(Holder())  # a stream's store opened again: freezing only
    assert dead() is not None
    assert collects(Holder())  # the next round's first: unfreeze, collect, freeze again
    assert dead() is None


def test_only_sparks_workers_are_settled(monkeypatch):
    """The source's constructor and the planner settle the worker they run in; in a driver, notebook or test
    process (this one) the collector is left alone."""
    assert not in_spark_worker()
    before = gc.get_freeze_count()
    assert settle_in_worker(Holder()) is False
    assert gc.get_freeze_count() == before
    for name, worker in (("pyspark.daemon", True), ("pyspark.sql.worker.plan_data_source_read", True),
                         ("pytest", False)):
        main = types.ModuleType("__main__")
        main.__spec__ = types.SimpleNamespace(name=name)
        monkeypatch.setitem(sys.modules, "__main__", main)
        assert in_spark_worker() is worker
    holder = Holder()
    assert settle_in_worker(holder) is False  # the last one: not a worker
    monkeypatch.setitem(sys.modules["__main__"].__dict__, "__spec__", types.SimpleNamespace(name="pyspark.daemon"))
    assert settle_in_worker(holder) is True
    assert gc.get_freeze_count() > before
    assert settle_in_worker(holder) is False  # settled once


def test_the_source_and_the_planner_settle_their_worker(monkeypatch, golden_store_path):
    """Spark's driver-side workers call in to create the source and to plan a read: each settles its worker, the
    planner with the store it keeps between plans (counted by the collector's permanent generation)."""
    from rocketstore_spark.spark import worker_gc
    from rocketstore_spark.spark.options import parse_read_options
    from rocketstore_spark.spark.planning import Pushed, open_store, plan
    from rocketstore_spark.spark.source import RocketStoreDataSource

    monkeypatch.setitem(sys.modules["__main__"].__dict__, "__spec__",
                        types.SimpleNamespace(name="pyspark.sql.worker.create_data_source"))
    monkeypatch.setattr(worker_gc, "_settled", weakref.WeakSet())  # a fresh worker
    gc.unfreeze()
    RocketStoreDataSource({"path": str(golden_store_path)})
    assert gc.get_freeze_count() > 1000
    assert settle(worker_gc.WORKER) is False  # settled by the constructor
    opts = parse_read_options({"path": str(golden_store_path)})
    assert plan(opts, Pushed())
    assert settle(open_store(opts.stores[0], opts)) is False  # the planner's cached store: settled by the plan
