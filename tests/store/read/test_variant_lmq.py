"""The lmq golden store (``enableLmq`` + ``enableMultiDispatch``): ``%LMQ%`` queues read as topics equal to the
real store's getMessage answers, the parent queues once, lookups as the real store answers them."""


import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.errors import CorruptRecordError
from rocketstore_spark.store import RocketStore
from tests.store.read.variant_view import (
    compare_key_queries,
    compare_offsets,
    compare_queue_reads,
    compare_scan_with_manifest,
    compare_time_queries,
    sample_queries,
    variant_fixtures,
    view_by_queue,
)
from tests.store.reference import commitlog_file_of, record_layout

FILE_SIZE = 1048576
LMQS = ["%LMQ%chat_α", "%LMQ%device_42", "%LMQ%orders-2024", "%LMQ%room-1", "%LMQ%room-2", "%LMQ%sensor|eu"]


golden, view, store, copy = variant_fixtures("lmq")


def test_detected_as_lmq_and_its_queues_are_topics(store):
    assert store.variant.name == "lmq"
    assert store.lmq_topics() == LMQS
    assert set(LMQS) <= set(store.topics()) and all(store.queue_ids(t) == [0] for t in LMQS)
    assert not store.is_lmq("TopicTest")


def test_offsets_match_the_real_store(store, view):
    compare_offsets(store, view)


def test_every_row_of_every_queue_equals_the_real_getmessage(store, view):
    """LMQ rows: the LMQ as topic, queue 0, the LMQ offset (the real store's cqOffset), the parent record's
    fields otherwise (its msgId, commit-log offset, properties with INNER_MULTI_*)."""
    assert compare_queue_reads(store, view) == len(view["messages"]) == 8047
    assert sum(line["topic"].startswith("%LMQ%") for line in view["messages"]) == 3592


def test_parent_topics_return_each_record_once(store, view):
    parents = [q for q in view["queues"] if not q["topic"].startswith("%LMQ%")]
    offsets = [r for q in parents for b in store.read_queue(q["topic"], q["queueId"], columns=["commitLogOffset"])
               for r in b.column(0).to_pylist()]
    assert len(offsets) == len(set(offsets)) == len(view["manifest"]) == 4455


def test_lmq_rows_point_at_their_parent_records(store, view):
    """Each LMQ unit's record is the manifest record whose lmqDispatch names that LMQ at that offset."""
    expected = {(d["queue"], d["cqOffset"]): m["commitLogOffset"] for m in view["manifest"]
                for d in m.get("lmqDispatch") or []}
    got = {(r["topic"], r["queueOffset"]): r["commitLogOffset"] for t in LMQS
           for b in store.read_queue(t, 0, columns=["topic", "queueOffset", "commitLogOffset"]) for r in b.to_pylist()}
    assert got == expected and len(got) == 3592


def test_tag_filter_on_an_lmq(store, view):
    lines = view_by_queue(view["messages"])[("%LMQ%chat_α", 0)]
    got = [r["queueOffset"] for b in store.read_queue("%LMQ%chat_α", 0, tags="TagA || TagB",
                                                      columns=["queueOffset", "tags"]) for r in b.to_pylist()]
    assert got == [line["cqOffset"] for line in lines if line["tags"] in ("TagA", "TagB")] and got


def test_get_message_pages_through_an_lmq(store, view):
    lines = view_by_queue(view["messages"])[("%LMQ%room-1", 0)]
    offset, seen = 0, []
    while True:
        res = store.get_message("%LMQ%room-1", 0, offset, max_nums=32, columns=["topic", "queueId", "queueOffset",
                                                                               "commitLogOffset"])
        if res.status != "FOUND":
            assert res.status == "OFFSET_OVERFLOW_ONE"
            break
        rows = res.messages.to_pylist()
        assert {(r["topic"], r["queueId"]) for r in rows} == {("%LMQ%room-1", 0)}
        seen += [(r["queueOffset"], r["commitLogOffset"]) for r in rows]
        offset = res.next_begin_offset
    assert seen == [(line["cqOffset"], line["commitLogOffset"]) for line in lines]


def test_scan_equals_the_manifest(store, view):
    compare_scan_with_manifest(store, view["manifest"], verify_crc=True)


def test_key_queries_sample(store, view):
    """The index knows the parent topics only; LMQ names are never index topics."""
    chosen = sample_queries(view["queries"], 8)
    assert len(chosen) > 1000 and not any(q["topic"].startswith("%LMQ%") for q in view["queries"])
    compare_key_queries(store, view["manifest"], chosen)


@pytest.mark.slow
def test_key_queries_all(store, view):
    compare_key_queries(store, view["manifest"], view["queries"])


def test_time_queries_on_lmqs_and_parents(store, view):
    assert len(view["time_queries"]) == 708 and {q["topic"] for q in view["time_queries"]} >= set(LMQS)
    compare_time_queries(store, view["time_queries"])


# --- damaged copies -----------------------------------------------------------------------------------------



def test_an_lmq_offset_property_that_disagrees_with_its_queue_is_an_error(copy, view):
    """INNER_MULTI_QUEUE_OFFSET rewritten (same length) on one record: reading the LMQ fails naming the LMQ's
    consume-queue file and unit; the parent queue still reads."""
    m = next(m for m in view["manifest"] if len(m.get("lmqDispatch") or []) == 1
             and m["lmqDispatch"][0]["cqOffset"] >= 10 and m["commitLogOffset"] + m["storeSize"] < FILE_SIZE)
    d = m["lmqDispatch"][0]
    text = m["propertiesString"].encode()
    value = f"INNER_MULTI_QUEUE_OFFSET\u0001{d['cqOffset']}".encode()
    wrong = f"INNER_MULTI_QUEUE_OFFSET\u0001{d['cqOffset'] - 10}".encode()
    at = m["commitLogOffset"] + record_layout(m)["props_pos"] + text.index(value)
    name, pos = commitlog_file_of(at, FILE_SIZE)
    with open(copy / "commitlog" / name, "r+b") as fh:
        fh.seek(pos)
        fh.write(wrong)
    with RocketStore.open(copy) as s:
        with pytest.raises(CorruptRecordError, match="INNER_MULTI_QUEUE_OFFSET gives offset") as err:
            list(s.read_queue(d["queue"], 0, columns=["queueOffset"]))
        per = 6000 // 20
        assert err.value.path.endswith(f"{d['queue']}/0/{(d['cqOffset'] // per) * 6000:020d}")
        assert err.value.offset == (d["cqOffset"] % per) * 20
        with pytest.raises(CorruptRecordError):
            s.get_message(d["queue"], 0, d["cqOffset"])
        rows = [r for b in s.read_queue(m["topic"], m["queueId"], columns=["commitLogOffset"])
                for r in b.column(0).to_pylist()]
        assert m["commitLogOffset"] in rows


def test_abnormal_recovery_redispatches_lmq_units(copy, view, golden):
    """Every unit pointing at the last LMQ record or later zeroed, abort present: re-dispatch on opening rebuilds
    the parent and LMQ units, so every queue reads as the real store's view again."""
    last_lmq = max(m["commitLogOffset"] for m in view["manifest"] if m.get("lmqDispatch"))
    for cq_file in (copy / "consumequeue").glob("*/*/*"):
        units = np.fromfile(cq_file, dtype=np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")]))
        units[units["phy"] >= last_lmq] = np.zeros(1, units.dtype)
        units.tofile(cq_file)
    (copy / "abort").write_bytes(b"")
    with RocketStore.open(copy) as s:
        assert s.recovery.mode == "abnormal"
        compare_offsets(s, view)
        assert compare_queue_reads(s, view) == 8047
    with RocketStore.open(copy, variant="default") as s:  # not told of LMQs: their last units stay missing
        assert s.max_offset("%LMQ%device_42", 0) == 600


def test_the_lmq_offset_property_checks_batches_gathered_across_queues(store, view):
    """A tag read over several queues at once (parents and LMQs gathered into one decode) keeps each row's own
    topic, queue and offset."""
    ranges = [(t, 0, None, None) for t in LMQS] + [("TopicTest", q, None, None) for q in store.queue_ids("TopicTest")]
    got = pa.Table.from_batches(list(store.read_queues(ranges, tags="TagA", columns=["topic", "queueId",
                                                                                       "queueOffset", "tags"])))
    expected = sorted((line["topic"], line["queueId"], line["cqOffset"]) for line in view["messages"]
                      if line["tags"] == "TagA" and (line["topic"] in LMQS or line["topic"] == "TopicTest"))
    assert sorted(zip(*(got.column(c).to_pylist() for c in ("topic", "queueId", "queueOffset")))) == expected
