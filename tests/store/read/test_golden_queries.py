"""Key, msgId, physical-offset and time lookups agree with what the real store answered (rocketmq-view/)."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from tests.store.reference import colliding_variant, index_key_hash, keys_tokens, sha256

JAVA_LONG_MAX = (1 << 63) - 1


def real_matches(manifest_by_offset, q) -> list:
    """The real store's answer with hash collisions removed: the record's topic is the query's topic and the
    key is its UNIQ_KEY or one of its KEYS tokens. Sorted by commit-log offset, as queryMessage sorts."""
    out = []
    for off in q["commitLogOffsets"]:
        m = manifest_by_offset[off]
        if m["topic"] == q["topic"] and (m["uniqKey"] == q["key"] or q["key"] in keys_tokens(m["keys"])):
            out.append(off)
    return sorted(out)


def has_collision(manifest_by_offset, q) -> bool:
    return real_matches(manifest_by_offset, q) != sorted(q["commitLogOffsets"])


def sample(queries, manifest_by_offset, every=12) -> list:
    """Deterministic: every 12th query, every query of the hot key order-42, every query with collisions."""
    return [q for i, q in enumerate(queries)
            if i % every == 0 or q["key"] == "order-42" or has_collision(manifest_by_offset, q)]


def check_queries(store, manifest_by_offset, queries):
    bad = []
    for q in queries:
        got = store.query_by_key(q["topic"], q["key"], columns=["commitLogOffset"]).column(0).to_pylist()
        if got != real_matches(manifest_by_offset, q):
            bad.append((q["topic"], q["key"], got, q["commitLogOffsets"]))
    assert not bad, (len(bad), bad[:3])


def test_query_by_key_sample(golden_store, manifest_by_offset, golden_view):
    queries = golden_view["queries"]
    chosen = sample(queries, manifest_by_offset)
    assert 2900 <= len(chosen) <= 3300
    assert {q["topic"] for q in chosen} == {q["topic"] for q in queries}
    assert sum(q["key"] == "order-42" for q in chosen) == 9
    assert any(len(q["commitLogOffsets"]) == 64 for q in chosen)  # the 64-result cap is exercised
    # PREPARED halves are indexed (ROLLBACK ones never are): some answers must contain them
    kinds = {manifest_by_offset[o]["transactionType"] for q in chosen for o in q["commitLogOffsets"]}
    assert "PREPARED" in kinds and "ROLLBACK" not in kinds
    check_queries(golden_store, manifest_by_offset, chosen)


@pytest.mark.slow
def test_query_by_key_all(golden_store, manifest_by_offset, golden_view):
    assert len(golden_view["queries"]) == 36689
    check_queries(golden_store, manifest_by_offset, golden_view["queries"])


def indexed_with_key(manifest, topic, key) -> list:
    """Offsets of the records the index holds for (topic, key): every record but ROLLBACK ones."""
    return sorted(m["commitLogOffset"] for m in manifest
                  if m["topic"] == topic and m["transactionType"] != "ROLLBACK"
                  and (m["uniqKey"] == key or key in keys_tokens(m["keys"])))


def test_hot_key_is_capped_at_64_newest(golden_store, manifest):
    """order-42 is on 90 TopicTest records (2 of them ROLLBACK, never indexed); queryMessage returns the 64
    newest indexed ones, in commit-log order (by default: ``max_num`` asks for more)."""
    having = indexed_with_key(manifest, "TopicTest", "order-42")
    assert len(having) == 88
    got = golden_store.query_by_key("TopicTest", "order-42", columns=["commitLogOffset"]).column(0).to_pylist()
    assert got == sorted(having)[-64:]
    # the broker caps maxNum at 64 (maxMsgsNumBatch); a larger max_num lifts that cap here, in commit-log order
    lifted = golden_store.query_by_key("TopicTest", "order-42", max_num=1000, columns=["commitLogOffset"])
    assert lifted.column(0).to_pylist() == sorted(having)
    three = golden_store.query_by_key("TopicTest", "order-42", max_num=3, columns=["commitLogOffset"])
    assert three.column(0).to_pylist() == sorted(having)[-3:]


def test_query_by_key_returns_full_rows(golden_store, manifest_by_offset, golden_view):
    q = next(q for q in golden_view["queries"] if q["key"] == "order-42" and q["topic"] == "orders_v1-EU")
    table = golden_store.query_by_key(q["topic"], q["key"])
    assert table.num_rows == 64
    for row in table.to_pylist():
        m = manifest_by_offset[row["commitLogOffset"]]
        assert (row["topic"], row["msgId"], row["uniqKey"]) == (m["topic"], m["msgId"], m["uniqKey"])
        assert "order-42" in row["keys"]
        assert sha256(row["body"]) == (m.get("bodyDecompressedSha256") or m["bodySha256"])


def test_hash_collisions_are_removed(golden_store, golden_view, manifest_by_offset):
    """Keys built to share ``topic#key``'s index hash with a stored key: the index walk finds the stored
    records, the exact check must drop every one of them (the golden answers themselves have no collisions)."""
    queries = [q for q in golden_view["queries"][::400] if len(q["key"]) >= 2 and ord(q["key"][1]) >= 0x1F]
    assert len(queries) >= 50
    for q in queries:
        fake = colliding_variant(q["key"])
        assert fake != q["key"]
        assert index_key_hash(f"{q['topic']}#{fake}") == index_key_hash(f"{q['topic']}#{q['key']}")
        found = []
        for f in golden_store.index_files():
            f.select_phy_offsets(found, f"{q['topic']}#{fake}", 64, 0, JAVA_LONG_MAX)
        assert set(q["commitLogOffsets"]) <= set(found), q  # the collision really reaches the exact check
        assert golden_store.query_by_key(q["topic"], fake).num_rows == 0, q
        # the same key under another topic is another index key: nothing either
        assert golden_store.query_by_key("NoSuchTopic", q["key"]).num_rows == 0


def test_query_time_window(golden_store, manifest):
    having = indexed_with_key(manifest, "orders_v1-EU", "order-42")
    assert golden_store.query_by_key("orders_v1-EU", "order-42", begin=JAVA_LONG_MAX - 1).num_rows == 0
    assert golden_store.query_by_key("orders_v1-EU", "order-42", end=1000).num_rows == 0
    everything = golden_store.query_by_key("orders_v1-EU", "order-42", begin=0, end=JAVA_LONG_MAX,
                                           columns=["commitLogOffset"])
    assert everything.column(0).to_pylist() == having[-64:]


# --- point lookups -----------------------------------------------------------------------------------------

def lookup_sample(manifest):
    chosen = {m["commitLogOffset"]: m for m in manifest[::97]}
    for predicate in (lambda m: m["sysFlag"] & 0x20, lambda m: m["sysFlag"] & 0x10, lambda m: m["sysFlag"] & 0x1,
                      lambda m: m["msgVersion"] == "V2", lambda m: m["transactionType"] == "PREPARED",
                      lambda m: m["transactionType"] == "ROLLBACK", lambda m: m["uniqKey"] is None,
                      lambda m: m["bodyLength"] == 0, lambda m: m["storeSize"] > 100_000):
        for m in [m for m in manifest if predicate(m)][:5]:
            chosen[m["commitLogOffset"]] = m
    chosen[manifest[0]["commitLogOffset"]] = manifest[0]
    chosen[manifest[-1]["commitLogOffset"]] = manifest[-1]
    return list(chosen.values())


def assert_row_is(row, m):
    assert row is not None, m["commitLogOffset"]
    for field in ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "msgId", "uniqKey",
                  "bornHost", "storeHost", "sysFlag", "flag", "reconsumeTimes", "bodyCRC",
                  "preparedTransactionOffset"):
        assert row[field] == m[field], (field, m["commitLogOffset"])
    assert dict(row["properties"]) == m["properties"]
    assert row["tags"] == m["properties"].get("TAGS")
    assert row["keys"] == keys_tokens(m["properties"].get("KEYS"))
    assert round(row["storeTimestamp"].timestamp() * 1000) == m["storeTimestamp"]
    assert sha256(row["body"]) == (m.get("bodyDecompressedSha256") or m["bodySha256"])


def test_look_message_by_offset(golden_store, manifest):
    chosen = lookup_sample(manifest)
    assert len(chosen) > 200
    for m in chosen:
        assert_row_is(golden_store.look_message_by_offset(m["commitLogOffset"]), m)


def test_look_message_by_msg_id(golden_store, manifest):
    chosen = lookup_sample(manifest)
    assert any(len(m["msgId"]) == 56 for m in chosen) and any(len(m["msgId"]) == 32 for m in chosen)
    for m in chosen:
        assert_row_is(golden_store.look_message_by_msg_id(m["msgId"]), m)
        assert golden_store.look_message_by_msg_id(m["msgId"].lower())["msgId"] == m["msgId"]


def test_lookups_outside_the_commit_log(golden_store):
    end = golden_store.max_phy_offset()
    assert golden_store.look_message_by_offset(end) is None
    assert golden_store.look_message_by_offset(end + 12345) is None
    assert golden_store.look_message_by_offset(-1) is None
    past = "C000020A00002A9F" + f"{end:016X}"
    assert golden_store.look_message_by_msg_id(past) is None
    for bad in ("XYZ", "", "C000020A00002A9F00000000000000", "C000020A00002A9F0000000000000000AB"):
        with pytest.raises(InvalidArgumentError):
            golden_store.look_message_by_msg_id(bad)


def test_read_records_at_skips_offsets_outside_the_log(golden_store, manifest):
    offsets = [manifest[i]["commitLogOffset"] for i in (3, 17, 17, 5000, 19999)]
    outside = [golden_store.max_phy_offset(), golden_store.max_phy_offset() + 100, -5]
    got = golden_store.read_records_at(offsets + outside, ["commitLogOffset", "msgId"])
    assert got.column("commitLogOffset").to_pylist() == offsets
    assert got.column("msgId").to_pylist() == [manifest[i]["msgId"] for i in (3, 17, 17, 5000, 19999)]
    assert golden_store.read_records_at([], ["msgId"]).num_rows == 0


def test_read_records_at_keeps_the_given_order(golden_store, manifest):
    """The docstring promises "in the order given"; offsets from different commit-log files are interleaved."""
    picks = (5000, 17, 19999, 3)  # files 7, 0, 27, 0
    offsets = [manifest[i]["commitLogOffset"] for i in picks]
    got = golden_store.read_records_at(offsets, ["commitLogOffset"])
    assert got.column("commitLogOffset").to_pylist() == offsets


# --- time ------------------------------------------------------------------------------------------------

def test_offset_by_time_matches_every_recorded_answer(golden_store, golden_view):
    queries = golden_view["time_queries"]
    assert len(queries) == 1155
    bad = []
    for q in queries:
        lower = golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "lower")
        upper = golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "upper")
        if (lower, upper) != (q["lower"], q["upper"]):
            bad.append((q, lower, upper))
    assert not bad, (len(bad), bad[:3])


def test_offset_by_time_default_boundary_and_bad_boundary(golden_store, golden_view):
    q = golden_view["time_queries"][len(golden_view["time_queries"]) // 2]
    assert golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"]) == q["lower"]
    assert golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "UPPER") == q["upper"]
    with pytest.raises(InvalidArgumentError, match="boundary"):
        golden_store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "middle")
    with pytest.raises(InvalidArgumentError):
        golden_store.offset_by_time("NoSuchTopic", 0, q["timestamp"])
