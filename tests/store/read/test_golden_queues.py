"""Consume queues, offsets, tag filters and consumer-style paging agree with the real store (public-a)."""

import pyarrow as pa
import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.store import RocketStore
from tests.store.reference import colliding_variant, java_string_hash, to_signed32

UNITS_PER_FILE = 6000 // 20
MAX_FILTER_UNITS_BYTES = 16000  # maxFilterMessageSize
IN_MEMORY_LIMITS = (256 * 1024, 32)  # maxTransferBytes/CountOnMessageInMemory
ON_DISK_LIMITS = (64 * 1024, 8)  # maxTransferBytes/CountOnMessageInDisk
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def column(batches, name):
    return [v for b in batches for v in b.column(name).to_pylist()]


def queue_column(store, topic, qid, name="queueOffset", **kwargs):
    return column(store.read_queue(topic, qid, columns=[name], **kwargs), name)


# --- sizes, recovery, offsets -------------------------------------------------------------------------------

def test_sizes_are_detected_as_in_sizes_args(golden_store, golden_sizes):
    s = golden_store.sizes
    assert (s.commit_log_file_size, s.consume_queue_file_size, s.index_hash_slots, s.index_max_entries) == (
        golden_sizes["commit_log_file_size"], golden_sizes["consume_queue_file_size"],
        golden_sizes["index_hash_slots"], golden_sizes["index_max_entries"])


def test_explicit_sizes_from_sizes_args_are_accepted(golden_store_path, golden_sizes, golden_store):
    with RocketStore.open(golden_store_path, **golden_sizes) as s:
        assert s.sizes == golden_store.sizes
        assert s.max_phy_offset() == golden_store.max_phy_offset()


def test_recovery_and_commitlog_range_match_the_real_store(golden_store, golden_view):
    summary = golden_view["summary"]
    assert golden_store.recovery.mode == summary["recoveryMode"] == "normal"
    assert golden_store.max_phy_offset() == summary["afterLoadMaxPhyOffset"] == 29133002
    assert golden_store.min_phy_offset() == summary["afterLoadMinPhyOffset"] == 0


def test_checkpoint_values(golden_store, golden_view):
    cp, expected = golden_store.checkpoint(), golden_view["summary"]["checkpointFileBeforeLoad"]
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp, cp.master_flushed_offset,
            cp.confirm_phy_offset) == (expected["physicMsgTimestamp"], expected["logicsMsgTimestamp"],
                                       expected["indexMsgTimestamp"], expected["masterFlushedOffset"],
                                       expected["confirmPhyOffset"])


def test_topics_and_queue_ids(golden_store, golden_view):
    expected = {}
    for q in golden_view["queues"]:
        expected.setdefault(q["topic"], []).append(q["queueId"])
    assert golden_store.topics() == sorted(expected)
    for topic, ids in expected.items():
        assert golden_store.queue_ids(topic) == sorted(ids), topic
    assert golden_store.queue_ids("NoSuchTopic") == []
    assert all(golden_store.has_queue(t, q) for t, ids in expected.items() for q in ids)
    assert not golden_store.has_queue("TopicTest", 1000) and not golden_store.has_queue("NoSuchTopic", 0)
    golden_store.queue_ids("TopicTest").append(1000)  # callers get copies: the index cannot be changed through them
    assert golden_store.queue_ids("TopicTest") == sorted(expected["TopicTest"])


def test_min_max_offsets_match_the_real_store(golden_store, golden_view):
    bad = [(q["topic"], q["queueId"], golden_store.min_offset(q["topic"], q["queueId"]),
            golden_store.max_offset(q["topic"], q["queueId"]), q["minOffset"], q["maxOffset"])
           for q in golden_view["queues"]
           if (golden_store.min_offset(q["topic"], q["queueId"]), golden_store.max_offset(q["topic"], q["queueId"]))
           != (q["minOffset"], q["maxOffset"])]
    assert not bad, bad[:5]
    assert len(golden_view["queues"]) == 51


def test_consume_queue_units_match_the_manifest(golden_store, dispatched):
    """Unit i of each queue points at the manifest record with cqOffset i, with its size and tagsCode
    (for SCHEDULE_TOPIC_XXXX the tagsCode is the delivery time)."""
    for (topic, qid), rows in dispatched.items():
        units = golden_store.consume_queue(topic, qid).units(0, len(rows))
        assert units["phy_offset"].tolist() == [m["commitLogOffset"] for m in rows], (topic, qid)
        assert units["size"].tolist() == [m["storeSize"] for m in rows], (topic, qid)
        assert units["tags_code"].tolist() == [m["tagsCode"] for m in rows], (topic, qid)


# --- read_queue ---------------------------------------------------------------------------------------------

def test_read_queue_returns_exactly_the_dispatched_records(golden_store, dispatched):
    total = 0
    for (topic, qid), rows in dispatched.items():
        cols = ["queueOffset", "commitLogOffset", "storeSize", "uniqKey", "tags", "topic", "queueId"]
        got = pa.Table.from_batches(list(golden_store.read_queue(topic, qid, columns=cols))).to_pylist()
        want = [{"queueOffset": m["cqOffset"], "commitLogOffset": m["commitLogOffset"], "storeSize": m["storeSize"],
                 "uniqKey": m["uniqKey"], "tags": m["tags"], "topic": topic, "queueId": qid} for m in rows]
        assert got == want, (topic, qid)
        total += len(got)
    assert total == 19444


def test_read_queue_batches_respect_batch_rows(golden_store, dispatched):
    rows = dispatched[("orders_v1-EU", 0)]
    batches = list(golden_store.read_queue("orders_v1-EU", 0, columns=["queueOffset"], batch_rows=64))
    assert max(b.num_rows for b in batches) <= 64
    assert column(batches, "queueOffset") == [m["cqOffset"] for m in rows]
    assert all(b.num_rows <= 10_000 for b in golden_store.read_queue("orders_v1-EU", 0, columns=["queueId"]))


def _queue_with_most(dispatched, topic, tag):
    return max((qid for (t, qid) in dispatched if t == topic),
               key=lambda q: sum(m["tags"] == tag for m in dispatched[(topic, q)]))


TAG_CASES = [
    ("TopicTest", 3, "TagA", {"TagA"}),
    ("TopicTest", 3, "TagA || TagB", {"TagA", "TagB"}),
    ("TopicTest", 5, " TagB ", {"TagB"}),
    ("TopicTest", 6, "TagB||TagA", {"TagA", "TagB"}),
    ("TopicTest", 1, ["TagA", "标签C"], {"TagA", "标签C"}),
    ("orders_v1-EU", 1, "TagB", {"TagB"}),
    ("orders_v1-EU", 2, "TagA || TagB || 标签C", {"TagA", "TagB", "标签C"}),
    ("unicode_tags|topic", 2, "标签C || タグ-ü", {"标签C", "タグ-ü"}),
    ("unicode_tags|topic", 4, "タグ-ü", {"タグ-ü"}),
    ("LongTopic_abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqr", 0,
     "TagA", {"TagA"}),
    ("BenchTopic", 0, "BatchTag0 || BatchTag2", {"BatchTag0", "BatchTag2"}),
    ("TopicTest", 3, "NoSuchTag", set()),
]


@pytest.mark.parametrize("topic,qid,expression,wanted", TAG_CASES)
def test_tag_filter_returns_exactly_the_rows_with_those_tags(golden_store, dispatched, topic, qid, expression,
                                                             wanted):
    rows = dispatched[(topic, qid)]
    got = pa.Table.from_batches(list(golden_store.read_queue(topic, qid, tags=expression,
                                                             columns=["queueOffset", "tags"])),
                                schema=pa.schema([("queueOffset", pa.int64()), ("tags", pa.string())]))
    assert got.column("queueOffset").to_pylist() == [m["cqOffset"] for m in rows if m["tags"] in wanted]
    assert set(got.column("tags").to_pylist()) <= wanted
    if wanted:
        assert got.num_rows > 0


def test_tag_filter_on_schedule_topic_uses_the_real_tag(golden_store, dispatched):
    """SCHEDULE_TOPIC_XXXX units carry a delivery time, not a tag hash: the filter must still be exact."""
    qid = _queue_with_most(dispatched, SCHEDULE, "TagA")
    rows = dispatched[(SCHEDULE, qid)]
    expected = [m["cqOffset"] for m in rows if m["tags"] == "TagA"]
    assert expected
    assert queue_column(golden_store, SCHEDULE, qid, tags="TagA") == expected


@pytest.mark.parametrize("everything", [None, "*", " * ", ""])
def test_subscribe_all_returns_every_row(golden_store, dispatched, everything):
    rows = dispatched[("TopicTest", 2)]
    assert queue_column(golden_store, "TopicTest", 2, tags=everything) == [m["cqOffset"] for m in rows]


def test_tag_hash_collision_is_removed_by_the_exact_check(golden_store, dispatched):
    """'UBgA' has the same Java hash as 'TagA': every TagA unit passes the consume-queue check, none may come back."""
    fake = colliding_variant("TagA")
    assert fake == "UBgA" and java_string_hash(fake) == java_string_hash("TagA")
    assert any(m["tags"] == "TagA" for m in dispatched[("TopicTest", 3)])
    assert queue_column(golden_store, "TopicTest", 3, tags=fake) == []
    assert queue_column(golden_store, "TopicTest", 3, tags=f"{fake} || TagB") == \
        [m["cqOffset"] for m in dispatched[("TopicTest", 3)] if m["tags"] == "TagB"]


@pytest.mark.parametrize("expression", ["TagA ||", "|TagA", "TagA | TagB", "* || TagA", "||"])
def test_bad_tag_expression(golden_store, expression):
    with pytest.raises(InvalidArgumentError):
        list(golden_store.read_queue("TopicTest", 0, tags=expression))


@pytest.mark.parametrize("start,end", [(5, 17), (0, 1), (290, 310), (299, 301), (300, 300), (17, 5), (0, None),
                                      (None, 12), (520, 10_000), (533, None), (600, 700), (None, None)])
def test_start_end_slicing(golden_store, dispatched, start, end):
    offsets = [m["cqOffset"] for m in dispatched[("TopicTest", 0)]]
    assert len(offsets) == 533
    assert queue_column(golden_store, "TopicTest", 0, start=start, end=end) == offsets[start:end]


def test_slicing_with_tags_across_a_file_boundary(golden_store, dispatched):
    rows = dispatched[("orders_v1-EU", 3)]
    expected = [m["cqOffset"] for m in rows[250:650] if m["tags"] == "TagA"]
    assert queue_column(golden_store, "orders_v1-EU", 3, start=250, end=650, tags="TagA") == expected


def test_read_queues_gathers_tag_matches_across_ranges_and_keeps_each_queues_order(golden_store, dispatched):
    """Several ranges (two topics, several queues, file boundaries) read with one tag filter: the matches of all
    ranges are decoded together, yet every queue's rows come back once, complete and in queue-offset order."""
    ranges = [(t, q, lo, hi) for (t, q), rows in sorted(dispatched.items()) if t in ("TopicTest", "orders_v1-EU")
              for lo, hi in ((0, 250), (250, len(rows)))]
    batches = list(golden_store.read_queues(ranges, tags="TagA || TagB", columns=["topic", "queueId", "queueOffset"],
                                            batch_rows=400))
    got: dict = {}
    for b in batches:
        for t, q, o in zip(*(b.column(i).to_pylist() for i in range(3))):
            got.setdefault((t, q), []).append(o)
    expected = {(t, q): [m["cqOffset"] for m in rows if m["tags"] in ("TagA", "TagB")]
                for (t, q), rows in dispatched.items() if t in ("TopicTest", "orders_v1-EU")}
    assert got == {k: v for k, v in expected.items() if v}
    per_range = sum(1 for t, q, lo, hi in ranges for b in golden_store.read_queue(t, q, lo, hi, tags="TagA || TagB",
                                                                                   batch_rows=400) if b.num_rows)
    assert len(batches) < per_range  # gathered: fewer batches than range by range (each still one file's rows)
    small = list(golden_store.read_queues(ranges, tags="TagA || TagB", columns=["queueOffset"], batch_rows=7))
    assert max(b.num_rows for b in small) <= 7  # decoded several batches at a time, handed out in batch_rows
    assert sum(b.num_rows for b in small) == sum(b.num_rows for b in batches)
    assert list(golden_store.read_queues(ranges, tags="NoSuchTag")) == []


# --- get_message -------------------------------------------------------------------------------------------

def model_get_message(rows, offset, max_nums, tags, limits=IN_MEMORY_LIMITS):
    """``DefaultMessageStore.getMessage`` over the manifest rows of one queue: (status, next, queue offsets)."""
    hi = len(rows)
    if offset == hi:
        return "OFFSET_OVERFLOW_ONE", offset, []
    if offset > hi:
        return "OFFSET_OVERFLOW_BADLY", 0, []
    wanted = None if tags is None else set(tags)
    codes = None if tags is None else {java_string_hash(t) for t in tags}
    file_end = min(hi, (offset // UNITS_PER_FILE + 1) * UNITS_PER_FILE)
    status, nxt, picked, total = "NO_MATCHED_MESSAGE", offset, [], 0
    for i in range(offset, file_end):
        m = rows[i]
        if (i - offset) * 20 > max(MAX_FILTER_UNITS_BYTES, max_nums * 20):
            break
        if picked and (len(picked) + 1 > max_nums or total + m["storeSize"] > limits[0]
                       or len(picked) > limits[1] - 1):
            break
        nxt = i + 1
        if codes is not None and to_signed32(m["tagsCode"]) not in codes:
            continue
        picked.append(m)
        total += m["storeSize"]
        status = "FOUND"
    return status, nxt, [m["cqOffset"] for m in picked if wanted is None or m["tags"] in wanted]


def check_paging(store, rows, topic, qid, max_nums, tags, in_memory=True):
    """Page from 0 to the end, comparing every answer with the model; returns the offsets returned."""
    expression = "*" if tags is None else " || ".join(tags)
    limits = IN_MEMORY_LIMITS if in_memory else ON_DISK_LIMITS
    offset, seen, calls = 0, [], 0
    while True:
        res = store.get_message(topic, qid, offset, max_nums=max_nums, tags=expression,
                                columns=["queueOffset", "tags"], in_memory=in_memory)
        status, nxt, offsets = model_get_message(rows, offset, max_nums, tags, limits)
        got = res.messages.column("queueOffset").to_pylist()
        assert (res.status, res.next_begin_offset, got) == (status, nxt, offsets), (topic, qid, offset, tags)
        assert (res.min_offset, res.max_offset) == (0, len(rows))
        if tags is not None:
            assert set(res.messages.column("tags").to_pylist()) <= set(tags)
        if status == "OFFSET_OVERFLOW_ONE":
            return seen
        assert nxt > offset
        seen += got
        offset = nxt
        calls += 1
        assert calls <= len(rows) + 1


def test_paging_every_queue_returns_every_message_once(golden_store, dispatched):
    for (topic, qid), rows in dispatched.items():
        seen = check_paging(golden_store, rows, topic, qid, 32, None)
        assert seen == list(range(len(rows))), (topic, qid)


@pytest.mark.parametrize("max_nums", [1, 4, 32])
@pytest.mark.parametrize("tags", [["TagA"], ["TagA", "TagB"], ["NoSuchTag"], ["UBgA"]])
def test_paging_with_tags(golden_store, dispatched, max_nums, tags):
    rows = dispatched[("TopicTest", 3)]
    seen = check_paging(golden_store, rows, "TopicTest", 3, max_nums, tags)
    assert seen == [m["cqOffset"] for m in rows if m["tags"] in tags]


def test_paging_on_disk_limits_and_big_bodies(golden_store, dispatched):
    """Large bodies (up to 200 KiB) hit the 256 KiB / 64 KiB transfer limits."""
    big = max(dispatched, key=lambda k: sum(m["storeSize"] > 60_000 for m in dispatched[k]))
    rows = dispatched[big]
    assert any(m["storeSize"] > 60_000 for m in rows)
    limited = [o for o in range(len(rows))
               if len(model_get_message(rows, o, 32, None, ON_DISK_LIMITS)[2])
               < min(ON_DISK_LIMITS[1], (o // UNITS_PER_FILE + 1) * UNITS_PER_FILE - o, len(rows) - o)]
    assert limited, "no page of this queue is cut by the 64 KiB on-disk limit"
    assert check_paging(golden_store, rows, *big, 32, None, in_memory=False) == list(range(len(rows)))
    assert check_paging(golden_store, rows, *big, 32, None) == list(range(len(rows)))


def test_get_message_statuses(golden_store, dispatched):
    topic, qid = "TopicTest", 1
    top = golden_store.max_offset(topic, qid)
    assert top == len(dispatched[(topic, qid)])
    one = golden_store.get_message(topic, qid, top)
    assert (one.status, one.next_begin_offset, one.messages.num_rows) == ("OFFSET_OVERFLOW_ONE", top, 0)
    for beyond in (top + 1, top + 5, 10**12):
        over = golden_store.get_message(topic, qid, beyond)
        assert (over.status, over.next_begin_offset, over.messages.num_rows) == ("OFFSET_OVERFLOW_BADLY", 0, 0)
    none = golden_store.get_message("NoSuchTopic", 0, 0)
    assert (none.status, none.next_begin_offset) == ("NO_MATCHED_LOGIC_QUEUE", 0)
    assert golden_store.get_message(topic, 99, 0).status == "NO_MATCHED_LOGIC_QUEUE"
    first = golden_store.get_message(topic, qid, 0, max_nums=4)
    assert first.status == "FOUND" and first.next_begin_offset == 4 and first.messages.num_rows == 4
    assert first.messages.column("queueOffset").to_pylist() == [0, 1, 2, 3]


def test_no_matched_message_examines_to_the_end_of_the_consume_queue_file(golden_store, dispatched):
    rows = dispatched[("TopicTest", 3)]
    res = golden_store.get_message("TopicTest", 3, 10, tags="NoSuchTag")
    assert (res.status, res.next_begin_offset, res.messages.num_rows) == ("NO_MATCHED_MESSAGE", UNITS_PER_FILE, 0)
    last = golden_store.get_message("TopicTest", 3, UNITS_PER_FILE + 3, tags="NoSuchTag")
    assert (last.status, last.next_begin_offset) == ("NO_MATCHED_MESSAGE", len(rows))


def test_found_next_begin_offset_counts_examined_units(golden_store, dispatched):
    """With tags, nextBeginOffset is one past the last unit examined, not the last message returned + 1."""
    rows = dispatched[("TopicTest", 3)]
    res = golden_store.get_message("TopicTest", 3, 0, max_nums=3, tags="TagB")
    tag_b = [m["cqOffset"] for m in rows if m["tags"] == "TagB"]
    assert res.status == "FOUND"
    assert res.messages.column("queueOffset").to_pylist() == tag_b[:3]
    assert res.next_begin_offset == tag_b[2] + 1


def test_colliding_tag_is_found_by_hash_but_never_returned(golden_store, dispatched):
    rows = dispatched[("TopicTest", 3)]
    first_a = next(m["cqOffset"] for m in rows if m["tags"] == "TagA")
    res = golden_store.get_message("TopicTest", 3, 0, max_nums=1, tags="UBgA")
    assert (res.status, res.next_begin_offset, res.messages.num_rows) == ("FOUND", first_a + 1, 0)
