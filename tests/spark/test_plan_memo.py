"""A planner hands out the partitions of an unchanged store again (plan_memo), counted in plans worked out: the
same options and filters on the same store object, never a changed store, other filters or a plan that reported
lost messages."""

import pytest

from rocketstore_spark.spark import planning
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.plan_memo import PLANS, PlanMemo, memo_key
from rocketstore_spark.spark.planning import Pushed, plan
from rocketstore_spark.spark.store_cache import OPEN_STORES
from tests.spark.test_planning import _small_store, age, aged_store


@pytest.fixture
def worked_out(monkeypatch):
    """Every store plan the test worked out (not handed out from the memo), by broker."""
    seen = []
    real = planning._plan_store

    def counted(store, ref, *args):
        seen.append(ref.broker)
        return real(store, ref, *args)

    monkeypatch.setattr(planning, "_plan_store", counted)
    OPEN_STORES.clear()
    PLANS.clear()
    yield seen
    OPEN_STORES.clear()
    PLANS.clear()


def rows(parts) -> int:
    return sum(hi - lo for p in parts for _, _, lo, hi in getattr(p, "ranges", None) or [(0, 0, p.start, p.end)])


def test_an_unchanged_store_is_planned_once_per_request(tmp_path, worked_out):
    root = aged_store(tmp_path)
    opts = parse_read_options({"path": str(root)})
    first = plan(opts, Pushed())
    again = plan(opts, Pushed())
    assert again == first and rows(first) == 12 and len(worked_out) == 1
    # other pushed filters, other options: planned on their own, then served too
    only_tag = plan(opts, Pushed(tags={"a"}))
    plan(opts, Pushed(tags={"a"}))
    capped = parse_read_options({"path": str(root), "maxMessagesPerPartition": "5"})
    assert len(plan(capped, Pushed())) == 3 and len(plan(capped, Pushed())) == 3
    assert rows(only_tag) == 12 and len(worked_out) == 3


def test_a_changed_store_is_planned_again(tmp_path, worked_out):
    root = aged_store(tmp_path)
    opts = parse_read_options({"path": str(root)})
    assert rows(plan(opts, Pushed())) == 12
    _small_store(root, 3, start=12)  # appended: the cache opens the store again, the plan follows it
    assert rows(plan(opts, Pushed())) == 15 and len(worked_out) == 2


def test_a_plan_that_reported_lost_messages_reports_them_every_time(golden_copy, manifest, worked_out, caplog):
    from tests.store.read.test_lost_ranges import FILE_SIZE, cut_copy

    cut_copy(golden_copy, 1, 500_000)
    age(golden_copy)
    opts = parse_read_options({"path": str(golden_copy), "commitLogFileSize": str(FILE_SIZE),
                               "failOnDataLoss": "false"})
    caplog.set_level("WARNING", logger="rocketstore_spark")
    plan(opts, Pushed())
    plan(opts, Pushed())
    assert len(worked_out) == 2
    assert len([r for r in caplog.records if "are lost" in r.getMessage()]) == 2


def test_the_memo_serves_only_the_store_object_it_planned_from_and_keeps_its_capacity():
    class Store:
        pass

    memo = PlanMemo(capacity=2)
    a, b = Store(), Store()
    memo.put("x", a, [1, 2])
    assert memo.get("x", a) == [1, 2] and memo.get("x", b) is None
    memo.put("y", a, [3])
    memo.get("x", a)  # x used last: y goes first
    memo.put("z", a, [4])
    assert memo.get("y", a) is None and memo.get("x", a) == [1, 2] and len(memo) == 2
    del a  # a store closed and dropped: its plans are never handed out
    assert memo.get("x", Store()) is None


def test_the_memo_holds_plans_up_to_its_budget_of_pickled_bytes():
    class Store:
        pass

    store = Store()
    memo = PlanMemo(budget_bytes=1_000)
    memo.put("big", store, [b"x" * 2_000])  # heavier than the whole budget: not kept
    assert memo.get("big", store) is None and len(memo) == 0
    memo.put("a", store, [b"a" * 400])
    memo.put("b", store, [b"b" * 400])
    memo.get("a", store)  # a used last: b goes first when c needs room
    memo.put("c", store, [b"c" * 400])
    assert memo.get("b", store) is None and memo.get("a", store) and memo.get("c", store) and len(memo) == 2
    memo.put("a", store, [b"A" * 400])  # planned again under the same key: replaces, weighed once
    assert memo.get("a", store) == [b"A" * 400] and memo.get("c", store) and len(memo) == 2


def test_the_key_holds_every_option_and_filter_in_a_canonical_order(tmp_path):
    _small_store(tmp_path, 1)
    opts = parse_read_options({"path": str(tmp_path)})
    ref = opts.stores[0]
    assert memo_key(ref, opts, Pushed(tags={"a", "b"})) == memo_key(ref, opts, Pushed(tags={"b", "a"}))
    assert memo_key(ref, opts, Pushed(tags={"a"})) != memo_key(ref, opts, Pushed(tags={"b"}))
    assert memo_key(ref, opts, Pushed(notes=["why"])) == memo_key(ref, opts, Pushed())
    other = parse_read_options({"path": str(tmp_path), "includeRetryTopics": "true"})
    assert memo_key(ref, opts, Pushed()) != memo_key(ref, other, Pushed())
