"""The batch-cq golden store (topic ``BatchTopic`` with ``queue.type=BatchCQ``): queue offsets count messages,
inner batches read as one row per message (unwrapped as RocketMQ's client does), every row equal to the real
store's getMessage answer after that unwrap, lookups as the real store answers them."""


import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.errors import CorruptRecordError
from rocketstore_spark.store import RocketStore
from tests.conftest import sizes_from_args
from tests.store.read.variant_view import (
    ALL,
    compare_key_queries,
    compare_offsets,
    compare_scan_with_manifest,
    compare_time_queries,
    row_as_view,
    sample_queries,
    variant_fixtures,
    view_by_queue,
    view_line_expected,
)
from tests.store.reference import commitlog_file_of, keys_tokens, record_layout, sha256

FILE_SIZE = 1048576
BCQ_UNIT = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8"), ("time", ">i8"), ("base", ">i8"),
                     ("batch", ">i2"), ("compacted", ">i4"), ("reserved", ">i4")])


golden, view, store, copy = variant_fixtures("batch-cq")


def unwrapped(line: dict) -> list:
    """A getMessage line as the client hands it over: inner batches one message each (record-level fields the
    record's, the rest the inner message's; its stored inner BODYCRC is 0)."""
    record = view_line_expected(line)
    if not line.get("innerMessages"):
        return [record]
    out = []
    for m in line["innerMessages"]:
        out.append(dict(record, cqOffset=m["queueOffset"], uniqKey=m["uniqKey"], tags=m["tags"],
                        keys=keys_tokens(m["keys"]), properties=m["properties"], bodySha256=m["bodySha256"],
                        bodyLength=m["bodyLength"], flag=m["flag"], bodyCRC=0))
    return out


def test_detected_as_batch_cq_and_its_queues_count_messages(store, view):
    assert store.variant.name == "batch-cq"
    assert [q for q in range(4) if store.is_batch_queue("BatchTopic", q)] == [0, 1, 2, 3]
    assert not store.is_batch_queue("TopicTest", 0)
    compare_offsets(store, view)
    assert sum(store.max_offset("BatchTopic", q) for q in range(4)) == 5541


def test_every_message_of_every_queue_equals_the_real_getmessage_unwrapped(store, view):
    total = 0
    for (topic, qid), lines in view_by_queue(view["messages"]).items():
        want = [e for line in lines for e in unwrapped(line)]
        table = pa.Table.from_batches(list(store.read_queue(topic, qid, columns=ALL)))
        got = [row_as_view(r) for r in table.to_pylist()]
        bad = [(w["cqOffset"], k, g.get(k), w[k]) for g, w in zip(got, want) for k in w if g.get(k) != w[k]]
        assert len(got) == len(want) and not bad, (topic, qid, len(got), len(want), bad[:5])
        assert [g["cqOffset"] for g in got] == list(range(store.min_offset(topic, qid), store.max_offset(topic, qid)))
        total += len(got)
    assert total == 7029 and len(view["messages"]) == 2518


def test_inner_messages_equal_the_manifest(store, view):
    """Every inner message of the manifest, read by its queue offset through the batch consume queue."""
    inner = [(m["topic"], m["queueId"], i) for m in view["manifest"] for i in m.get("innerMessages") or []]
    assert len(inner) == 5241
    rows = {(r["topic"], r["queueId"], r["queueOffset"]): r for q in range(4)
            for b in store.read_queue("BatchTopic", q, columns=ALL) for r in b.to_pylist()}
    bad = []
    for topic, qid, m in inner:
        r = rows[(topic, qid, m["queueOffset"])]
        got = (r["uniqKey"], r["tags"], r["keys"], dict(r["properties"]), r["flag"], len(r["rawBody"]),
               sha256(r["rawBody"]), r["body"] == r["rawBody"])
        want = (m["uniqKey"], m["tags"], keys_tokens(m["keys"]), m["properties"], m["flag"], m["bodyLength"],
                m["bodySha256"], True)
        if got != want:
            bad.append((topic, qid, m["queueOffset"], got, want))
    assert not bad, bad[:3]


def test_ranges_start_and_end_inside_a_batch(store, view):
    """Bounds, limits and streaming offsets are message offsets: a range cut inside a batch returns exactly the
    messages in it."""
    line = next(line for line in view["messages"] if line["topic"] == "BatchTopic" and line["batchNum"] >= 8)
    base = line["cqOffset"]
    got = [r["queueOffset"] for b in store.read_queue("BatchTopic", line["queueId"], base + 3, base + 6,
                                                      columns=["queueOffset", "uniqKey"], batch_rows=2)
           for r in b.to_pylist()]
    assert got == [base + 3, base + 4, base + 5]
    keys = [r["uniqKey"] for b in store.read_queue("BatchTopic", line["queueId"], base + 3, base + 6,
                                                   columns=["uniqKey"]) for r in b.to_pylist()]
    assert keys == [m["uniqKey"] for m in line["innerMessages"][3:6]]


def test_tag_filter_sees_the_inner_messages_tags(store, view):
    """The inner batch's unit has tagsCode 0; its messages are checked on their own tags."""
    for qid in range(4):
        lines = view_by_queue(view["messages"])[("BatchTopic", qid)]
        want = [e["cqOffset"] for line in lines for e in unwrapped(line) if e["tags"] in ("TagA", "TagB")]
        got = [r["queueOffset"] for b in store.read_queue("BatchTopic", qid, tags="TagA || TagB",
                                                          columns=["queueOffset", "tags"]) for r in b.to_pylist()]
        assert got == want and got


def test_scan_equals_the_manifest(store, view):
    """scanMode=commitlog stays record-level: each inner batch once, its wrapped body as stored."""
    compare_scan_with_manifest(store, view["manifest"], verify_crc=True)


def test_key_queries_sample(store, view):
    """Only record-level keys are indexed: inner messages' keys find nothing unless also a record key."""
    chosen = sample_queries(view["queries"], 8)
    assert len(chosen) > 1500 and any(q["keySource"] == "inner-batch" for q in chosen)
    compare_key_queries(store, view["manifest"], chosen)


@pytest.mark.slow
def test_key_queries_all(store, view):
    compare_key_queries(store, view["manifest"], view["queries"])


def test_time_queries_use_the_batch_units_times(store, view):
    assert len(view["time_queries"]) == 502 and {q["topic"] for q in view["time_queries"]} >= {"BatchTopic"}
    compare_time_queries(store, view["time_queries"])


def test_get_message_pages_through_whole_batches(store, view):
    """Consumer paging as the real store: every record once in the view's order (the view read each queue with
    getMessage(offset, 32)), each batch unwrapped into its messages; the last page ends the queue."""
    for qid in range(4):
        lines = view_by_queue(view["messages"])[("BatchTopic", qid)]
        offset, records, rows = 0, [], []
        while True:
            res = store.get_message("BatchTopic", qid, offset, max_nums=32, columns=["queueOffset", "commitLogOffset"])
            if res.status != "FOUND":
                assert res.status == "OFFSET_OVERFLOW_ONE" and offset == store.max_offset("BatchTopic", qid)
                break
            got = res.messages.to_pylist()
            assert sum(line["batchNum"] for line in lines if line["commitLogOffset"] in
                       {r["commitLogOffset"] for r in got}) <= 32
            rows += got
            records += list(dict.fromkeys(r["commitLogOffset"] for r in got))
            offset = res.next_begin_offset
        assert records == [line["commitLogOffset"] for line in lines]
        assert [r["queueOffset"] for r in rows] == [e["cqOffset"] for line in lines for e in unwrapped(line)]


def test_get_message_inside_a_batch_returns_the_whole_batch(store, view):
    line = next(line for line in view["messages"] if line["topic"] == "BatchTopic" and line["batchNum"] >= 8)
    res = store.get_message("BatchTopic", line["queueId"], line["cqOffset"] + 4, max_nums=1,
                            columns=["queueOffset", "uniqKey"])
    assert res.status == "FOUND" and res.next_begin_offset == line["cqOffset"] + line["batchNum"]
    assert res.messages.column("uniqKey").to_pylist() == [m["uniqKey"] for m in line["innerMessages"]]
    # with a tag the broker skips the batch on its unit's tagsCode 0 (only the client sees the inner tags)
    tagged = store.get_message("BatchTopic", line["queueId"], line["cqOffset"], max_nums=4, tags="TagA",
                               columns=["commitLogOffset", "tags"]).messages.to_pylist()
    assert line["commitLogOffset"] not in {r["commitLogOffset"] for r in tagged}
    assert {r["tags"] for r in tagged} <= {"TagA"}


# --- damaged copies -----------------------------------------------------------------------------------------



def last_unit(copy, qid):
    files = sorted((copy / "batchconsumequeue" / "BatchTopic" / str(qid)).iterdir())
    for f in reversed(files):
        units = np.fromfile(f, dtype=BCQ_UNIT)
        n = int(np.count_nonzero(units["size"] > 0))
        if n:
            return f, n - 1, units


def test_a_batch_unit_pointing_past_its_record_is_an_error(copy, golden):
    """The last unit of a queue given a batchSize larger than its record holds: reading the extra offsets fails
    naming the batch consume-queue file and the unit's byte offset; the offsets before still read."""
    path, i, units = last_unit(copy, 0)
    held = int(units["batch"][i])
    units["batch"][i] = held + 2
    units.tofile(path)
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        top = s.max_offset("BatchTopic", 0)
        assert top == int(units["base"][i]) + held + 2
        with pytest.raises(CorruptRecordError, match="points past its record") as err:
            list(s.read_queue("BatchTopic", 0, top - 2, top))
        assert err.value.path == str(path) and err.value.offset == i * 46
        assert len(pa.Table.from_batches(list(s.read_queue("BatchTopic", 0, 0, top - 2, columns=["flag"])))) \
            == top - 2


def test_a_garbled_inner_message_is_an_error(copy, view, golden):
    """An inner message's TOTALSIZE rewritten: reading the batch fails naming the commit-log file and the inner
    message's offset."""
    m = next(m for m in view["manifest"] if len(m.get("innerMessages") or []) >= 3
             and m["commitLogOffset"] + m["storeSize"] < FILE_SIZE)
    body_at = m["commitLogOffset"] + record_layout(m)["body_pos"]
    name, pos = commitlog_file_of(body_at, FILE_SIZE)
    with open(copy / "commitlog" / name, "r+b") as fh:
        fh.seek(pos)
        fh.write((12345).to_bytes(4, "big"))
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(CorruptRecordError, match="inner message TOTALSIZE 12345") as err:
            list(s.read_queue("BatchTopic", m["queueId"], m["queueOffset"], m["queueOffset"] + 1))
        assert err.value.path.endswith(name) and err.value.offset == pos
