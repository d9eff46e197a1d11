"""Key, msgId, offset and time lookups agree with what the real store answered."""

import pytest


def real_key_matches(manifest_by_offset, q):
    out = []
    for off in q["commitLogOffsets"]:
        m = manifest_by_offset[off]
        if m["topic"] == q["topic"] and (m["uniqKey"] == q["key"] or q["key"] in (m["keys"] or "").split(" ")):
            out.append(off)
    return out


def check_queries(store, manifest, queries):
    by_offset = {m["commitLogOffset"]: m for m in manifest}
    for q in queries:
        got = store.query_by_key(q["topic"], q["key"], columns=["commitLogOffset"]).column(0).to_pylist()
        assert got == real_key_matches(by_offset, q), q


def sample(queries):
    """Every 12th query plus every query with hash collisions and the hot key."""
    chosen = [q for i, q in enumerate(queries) if i % 12 == 0 or q["key"] == "order-42"]
    return chosen


def test_query_by_key_sample(golden_store, manifest, golden_view):
    queries = sample(golden_view["queries"])
    assert any(q["key"] == "order-42" for q in queries)
    check_queries(golden_store, manifest, queries)


@pytest.mark.slow
def test_query_by_key_all(golden_store, manifest, golden_view):
    check_queries(golden_store, manifest, golden_view["queries"])


def test_offset_by_time_matches_every_recorded_answer(golden_store, golden_view):
    for q in golden_view["time_queries"]:
        assert golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "lower") == q["lower"], q
        assert golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "upper") == q["upper"], q


def test_look_message_by_offset_and_msg_id(golden_store, manifest):
    for m in manifest[::97]:
        by_offset = golden_store.look_message_by_offset(m["commitLogOffset"])
        by_id = golden_store.look_message_by_msg_id(m["msgId"])
        assert by_offset["msgId"] == by_id["msgId"] == m["msgId"]
        assert by_offset["topic"] == m["topic"] and by_id["commitLogOffset"] == m["commitLogOffset"]
    assert golden_store.look_message_by_offset(golden_store.max_phy_offset()) is None
