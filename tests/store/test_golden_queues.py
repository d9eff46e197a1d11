"""Consume queues, offsets and consumer-style reads agree with the real store."""

from collections import defaultdict

import pytest

from tests.conftest import GOLDEN_SIZES


def dispatched(manifest):
    by_queue = defaultdict(list)
    for m in manifest:
        if m["inConsumeQueue"]:
            by_queue[(m["topic"], m["queueId"])].append(m)
    for rows in by_queue.values():
        rows.sort(key=lambda m: m["cqOffset"])
    return by_queue


def test_sizes_are_detected(golden_store):
    assert golden_store.sizes.__dict__ == GOLDEN_SIZES


def test_recovery_and_offsets_match_the_real_store(golden_store, golden_view):
    summary = golden_view["summary"]
    assert golden_store.recovery.mode == summary["recoveryMode"] == "normal"
    assert golden_store.max_phy_offset() == summary["afterLoadMaxPhyOffset"]
    assert golden_store.min_phy_offset() == summary["afterLoadMinPhyOffset"]
    for q in golden_view["queues"]:
        assert golden_store.min_offset(q["topic"], q["queueId"]) == q["minOffset"], q
        assert golden_store.max_offset(q["topic"], q["queueId"]) == q["maxOffset"], q
    assert len([1 for t in golden_store.topics() for _ in golden_store.queue_ids(t)]) == len(golden_view["queues"])


def test_read_queue_returns_exactly_the_dispatched_records(golden_store, manifest):
    total = 0
    for (topic, qid), rows in dispatched(manifest).items():
        got = []
        for batch in golden_store.read_queue(topic, qid, columns=["queueOffset", "commitLogOffset", "uniqKey"]):
            got.extend(zip(*(batch.column(i).to_pylist() for i in range(3))))
        assert got == [(m["cqOffset"], m["commitLogOffset"], m["uniqKey"]) for m in rows], (topic, qid)
        total += len(got)
    assert total == 19444


@pytest.mark.parametrize("expression,wanted", [("TagA", {"TagA"}), ("TagA || TagB", {"TagA", "TagB"}),
                                               (" TagB ", {"TagB"})])
def test_tag_filter(golden_store, manifest, expression, wanted):
    rows = dispatched(manifest)[("TopicTest", 3)]
    got = [b.column(0).to_pylist() for b in golden_store.read_queue("TopicTest", 3, tags=expression,
                                                                    columns=["queueOffset"])]
    assert sum(got, []) == [m["cqOffset"] for m in rows if m["tags"] in wanted]


def test_start_end_slicing(golden_store, manifest):
    rows = dispatched(manifest)[("TopicTest", 0)]
    got = sum((b.column(0).to_pylist() for b in golden_store.read_queue("TopicTest", 0, 5, 17,
                                                                        columns=["queueOffset"])), [])
    assert got == [m["cqOffset"] for m in rows][5:17]


def test_get_message_statuses_and_paging(golden_store, manifest):
    topic, qid = "TopicTest", 1
    top = golden_store.max_offset(topic, qid)
    assert golden_store.get_message(topic, qid, top).status == "OFFSET_OVERFLOW_ONE"
    over = golden_store.get_message(topic, qid, top + 5)
    assert (over.status, over.next_begin_offset) == ("OFFSET_OVERFLOW_BADLY", 0)
    assert golden_store.get_message("NoSuchTopic", 0, 0).status == "NO_MATCHED_LOGIC_QUEUE"
    first = golden_store.get_message(topic, qid, 0, max_nums=4)
    assert first.status == "FOUND" and first.next_begin_offset == 4 and first.messages.num_rows == 4
    seen, offset = [], 0
    while True:
        res = golden_store.get_message(topic, qid, offset, max_nums=32, columns=["queueOffset"])
        if res.status != "FOUND":
            assert res.status == "OFFSET_OVERFLOW_ONE"
            break
        seen.extend(res.messages.column(0).to_pylist())
        offset = res.next_begin_offset
    assert seen == list(range(top))
    none = golden_store.get_message(topic, qid, 0, tags="NoSuchTag")
    assert none.status == "NO_MATCHED_MESSAGE" and none.next_begin_offset > 0
