"""Property tests: the properties format, Java's hashes, tag subscriptions and the record parser.

References (naive transcriptions of the Java) are in :mod:`tests.store.reference`.
"""

import tempfile

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.codec import parse_records
from rocketstore_spark.store.format.columns import parse_properties, single_property, split_keys
from rocketstore_spark.store.format.java_hash import index_key_hash, java_string_hash, java_string_hashes
from rocketstore_spark.store.format.subscription import Subscription
from tests.store import reference as ref

TOPIC_CHARS = "%|_-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
# letters, the two separators, NUL, BMP and astral characters: everything the properties parser must handle
PROPS_ALPHABET = st.sampled_from(list("abcK_ =") + ["\u0001", "\u0002", "\u0000", "é", "中", "😀", "\U0010FFFF"])
PROPS_TEXT = st.text(alphabet=PROPS_ALPHABET, max_size=40)


# --- properties ------------------------------------------------------------------------------------------

@given(st.lists(st.one_of(PROPS_TEXT, ANY_TEXT), max_size=12))
@example(["a\u0001b\u0002"])
@example(["k\u0001\u0002", "\u0001v\u0002", "k\u0001v", "k\u0001v\u0001w\u0002", "\u0002\u0002", ""])
@example(["a\u0001x\u0002a\u0001y\u0002", "a\u0001\u0002a\u0001z\u0002", "😀\u0001😀\u0002"])
@example(["k\u0001v\u0000\u0000\u0000", "\u0000\u0001\u0000\u0002"])
def test_parse_properties_is_javas_string2messageProperties(values):
    parsed = parse_properties(pa.array(values, pa.string())).to_pylist()
    assert [dict(p) for p in parsed] == [ref.java_properties(v) for v in values]


NAMED_PROPS_TEXT = st.lists(st.one_of(st.sampled_from(["TAGS", "TAGS\u0001", "XTAGS\u0001", "KEYS\u0001"]),
                                      PROPS_TEXT), max_size=8).map("".join)


@given(st.lists(st.one_of(NAMED_PROPS_TEXT, PROPS_TEXT), max_size=12), st.sampled_from(["TAGS", "KEYS", "a"]),
       st.integers(0, 3))
@example(["TAGS\u0001a\u0002", "", "XTAGS\u0001b\u0002", "TAGS\u0001\u0002TAGS\u0001c\u0002TAGS\u0001\u0002",
          "TAGS\u0001x\u0001y", "TAGS\u0001", "\u0002TAGS\u0001z"], "TAGS", 1)
def test_one_property_from_the_bytes_equals_its_value_in_the_parsed_map(values, name, skip):
    raw = pa.array([v.encode() for v in values], pa.binary()).slice(min(skip, len(values)))
    expected = [ref.java_properties(v).get(name) for v in values[skip:]]
    assert single_property(raw, name).to_pylist() == expected


def test_one_property_with_malformed_utf8_decodes_like_the_whole_string():
    from rocketstore_spark.store.format.columns import property_values, to_strings

    raw = pa.array([b"TAGS\x01a\xff\xfeb\x02K\x01\xc3\x02", b"\xe4\xb8TAGS\x01\xe4\xb8\x02", b"TAGS\x01\xf0\x9f\x98"],
                   pa.binary())
    for name in ("TAGS", "K"):
        assert single_property(raw, name).to_pylist() == \
            property_values(parse_properties(to_strings(raw)), name).to_pylist()


def test_parse_properties_nulls_and_empty_column():
    parsed = parse_properties(pa.array([None, "a\u0001b\u0002", None], pa.string())).to_pylist()
    assert [dict(p) for p in parsed] == [{}, {"a": "b"}, {}]
    assert len(parse_properties(pa.array([], pa.string()))) == 0


@given(st.lists(st.dictionaries(st.text(alphabet="xyz é😀_", min_size=1, max_size=6),
                                st.text(alphabet="uvw中 \u0000", min_size=1, max_size=8), max_size=6), max_size=8))
def test_properties_written_like_java_parse_back(maps):
    """messageProperties2String (every pair followed by U+0002) round-trips through the parser."""
    texts = ["".join(f"{k}\u0001{v}\u0002" for k, v in m.items()) for m in maps]
    assert [dict(p) for p in parse_properties(pa.array(texts, pa.string())).to_pylist()] == maps


@given(st.lists(st.one_of(st.none(), st.text(alphabet="ab \u00e9😀", max_size=20)), max_size=10))
@example(["  a  b  ", " ", None, ""])
def test_keys_split_on_spaces_dropping_empty_tokens(values):
    assert split_keys(pa.array(values, pa.string())).to_pylist() == [ref.keys_tokens(v) for v in values]


# --- Java hashes ---------------------------------------------------------------------------------------------

@given(ANY_TEXT)
@example("")
@example("😀")  # astral: two UTF-16 units
@example("a😀b\U0010FFFF")
@example("polygenelubricants")  # hashCode == Integer.MIN_VALUE
def test_java_string_hash_matches_the_utf16_reference(text):
    assert java_string_hash(text) == ref.java_string_hash(text)
    assert -(1 << 31) <= java_string_hash(text) < 1 << 31


def test_known_java_hash_values():
    # values printed by Java's String.hashCode()
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112


@given(st.lists(st.one_of(ANY_TEXT, st.text(alphabet="abcXYZ09_-#", max_size=300)), max_size=30))
@example(["", "a", "é", "😀", "a" * 1000, "TopicTest#order-42"])
def test_vectorised_hashes_equal_the_scalar_hash(values):
    got = java_string_hashes(values)
    assert got.tolist() == [java_string_hash(v) for v in values]
    assert got.tolist() == [ref.java_string_hash(v) for v in values]


def test_vectorised_hashes_accept_arrow_arrays_and_nulls():
    arr = pa.chunked_array([["TagA", None], ["é😀", "BB"]])
    assert java_string_hashes(arr).tolist() == [2598919, 0, ref.java_string_hash("é😀"), 2112]
    sliced = pa.array(["x", "TagA", "Aa"]).slice(1)
    assert java_string_hashes(sliced).tolist() == [2598919, 2112]
    assert java_string_hashes([]).tolist() == []


@given(ANY_TEXT)
@example("polygenelubricants")
def test_index_key_hash_is_abs_with_min_value_to_zero(text):
    assert index_key_hash(text) == ref.index_key_hash(text)
    assert 0 <= index_key_hash(text) < 1 << 31


# --- tag subscriptions and hash collisions -------------------------------------------------------------------

@given(st.lists(st.sampled_from(["Aa", "BB", "C#", "TagA", "UBgA", "TagB", "标签C", ""]), min_size=1, max_size=30),
       st.sampled_from(["Aa", "BB", "TagA || Aa", "*", "TagB || 标签C", "UBgA"]))
def test_consume_queue_filter_passes_every_exact_match_and_exactly_the_hash_matches(tags, expression):
    sub = Subscription.parse(expression)
    codes = np.array([ref.java_string_hash(t) if t else 0 for t in tags], dtype=np.int64)
    passed = sub.matches_codes(codes).tolist()
    if sub.is_all:
        assert all(passed)
        return
    wanted_codes = {ref.java_string_hash(t) for t in sub.tags}
    assert passed == [ref.java_string_hash(t) in wanted_codes if t else False for t in tags]
    exact = [t in sub.tags for t in tags]
    assert all(p for p, e in zip(passed, exact) if e)  # a superset of the exact matches


def test_colliding_tags_pass_the_hash_check_both_ways():
    codes = np.array([java_string_hash("Aa"), java_string_hash("BB"), java_string_hash("Ab")])
    assert Subscription.parse("Aa").matches_codes(codes).tolist() == [True, True, False]
    assert Subscription.parse("BB").matches_codes(codes).tolist() == [True, True, False]


def test_tags_code_uses_the_low_32_bits_and_ext_addresses_pass():
    sub = Subscription.parse("TagA")
    code = java_string_hash("TagA")
    codes = np.array([code, code + (5 << 32), code & 0xFFFFFFFF, -(1 << 31) - 5, 0], dtype=np.int64)
    assert sub.matches_codes(codes).tolist() == [True, True, True, True, False]


@given(st.lists(st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 32) - 3, (1 << 32) + 3),
                          st.sampled_from([java_string_hash("TagA"), java_string_hash("Aa"), -(1 << 31) - 1,
                                           -(1 << 31), (1 << 31) - 1, -1, 0])), max_size=40),
       st.sampled_from(["TagA", "Aa || BB", "TagA || x || y", "*"]), st.sampled_from(["t", "SCHEDULE_TOPIC_XXXX"]))
def test_tag_test_on_consume_queue_units_in_place_equals_the_int64_test(codes, expression, topic):
    units = np.zeros(len(codes), dtype=L.CQ_UNIT_DTYPE)
    units["tags_code"] = codes
    sub = Subscription.parse(expression)
    expected = sub.matches_codes(np.array(codes, dtype=np.int64), topic).tolist()
    assert sub.matches_units(units, topic).tolist() == expected
    native = np.concatenate([units])  # numpy turns the big-endian fields native: the test must still hold
    assert sub.matches_units(native, topic).tolist() == expected


def test_subscription_parsing():
    assert Subscription.parse(" TagA ||TagB|| TagA ").tags == ("TagA", "TagB")
    assert Subscription.parse(["TagB", " TagA"]).tags == ("TagB", "TagA")
    for everything in (None, "*", " * ", ""):
        assert Subscription.parse(everything).is_all


@pytest.fixture(scope="module")
def collision_store(tmp_path_factory):
    """A store written by the package's writer with tags 'Aa' and 'BB' (same Java hash) in one queue."""
    root = tmp_path_factory.mktemp("collide") / "store"
    tags = ["Aa", "BB", None, "Aa", "BB", "BB", "Ab", "Aa"]
    table = pa.table({"topic": ["Collide"] * len(tags), "queueId": [0] * len(tags),
                      "tags": pa.array(tags, pa.string()),
                      "body": pa.array([f"m{i}".encode() for i in range(len(tags))], pa.binary())})
    with RocketStore.open_writer(root, commit_log_file_size=1 << 20, consume_queue_file_size=600,
                          index_hash_slots=64, index_max_entries=256) as w:
        w.append(table)
    return root, tags


def test_read_queue_rechecks_the_real_tag_after_a_hash_collision(collision_store):
    root, tags = collision_store
    with RocketStore.open(root, index_hash_slots=64, index_max_entries=256) as s:
        units = s.consume_queue("Collide", 0).units(0, len(tags))
        assert len(set(units["tags_code"][[0, 1, 3, 4]].tolist())) == 1  # the collision is on disk
        for expression, wanted in (("Aa", {"Aa"}), ("BB", {"BB"}), ("Aa || Ab", {"Aa", "Ab"})):
            got = [o for b in s.read_queue("Collide", 0, tags=expression, columns=["queueOffset", "tags"])
                   for o in zip(b.column(0).to_pylist(), b.column(1).to_pylist())]
            assert got == [(i, t) for i, t in enumerate(tags) if t in wanted], expression
            res = s.get_message("Collide", 0, 0, tags=expression, columns=["queueOffset", "tags"])
            assert res.status == "FOUND"
            assert set(res.messages.column("tags").to_pylist()) <= wanted


# --- the record parser never reads outside its buffer ----------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=400), st.lists(st.integers(min_value=-10, max_value=420), max_size=8))
def test_parse_records_on_arbitrary_bytes_never_raises(data, positions):
    buf = np.frombuffer(data, dtype=np.uint8)
    fields = parse_records(buf, np.array(positions, dtype=np.int64))
    assert len(fields) == len(positions)
    valid = fields.valid
    # a record is valid only when its fields, all inside the buffer, add up to TOTALSIZE
    assert all(0 <= int(fields.position[i]) and int(fields.position[i]) + int(fields.total_size[i]) <= len(data)
               for i in np.flatnonzero(valid))


@pytest.fixture(scope="module")
def one_record(golden_store, manifest):
    m = manifest[1]
    from tests.store.reference import commitlog_file_of

    name, pos = commitlog_file_of(m["commitLogOffset"], 1048576)
    data = (golden_store.root / "commitlog" / name).read_bytes()[pos:pos + m["storeSize"]]
    return m, data


def test_parse_records_on_every_prefix_of_a_real_record(one_record):
    m, data = one_record
    full = parse_records(np.frombuffer(data, dtype=np.uint8), np.array([0]))
    assert full.valid.tolist() == [True] and int(full.body_len[0]) == m["bodyLength"]
    for n in range(len(data)):
        fields = parse_records(np.frombuffer(data[:n], dtype=np.uint8), np.array([0]))
        assert fields.valid.tolist() == [False], n


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=1 << 20), st.integers(min_value=0, max_value=255))
def test_parse_records_with_any_single_byte_changed(one_record, where, value):
    """Changing a length byte (TOTALSIZE, MAGIC, BODYLEN, TOPICLEN, PROPLEN) invalidates the record; changing
    any byte that is neither a length nor SYSFLAG leaves the layout, and so the parse, intact."""
    m, data = one_record
    at = where % len(data)
    lay = ref.record_layout(m)
    changed = bytearray(data)
    old, changed[at] = changed[at], value
    fields = parse_records(np.frombuffer(bytes(changed), dtype=np.uint8), np.array([0]))
    length_bytes = set(range(0, 8)) | set(range(lay["body_len_pos"], lay["body_len_pos"] + 4)) | \
        {lay["topic_len_pos"], lay["props_len_pos"], lay["props_len_pos"] + 1}
    sysflag_bytes = set(range(36, 40))
    if value != old and at in length_bytes:
        assert fields.valid.tolist() == [False], at
    elif at not in sysflag_bytes:
        assert fields.valid.tolist() == [True], at
        assert (int(fields.body_len[0]), int(fields.props_len[0])) == \
            (m["bodyLength"], len(m["propertiesString"].encode()))


# --- writer round trip (kept from the earlier suite; the writer has its own modules) -----------------------------

message = st.fixed_dictionaries({
    "topic": st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=255),
    "body": st.one_of(st.binary(max_size=64), st.binary(min_size=5000, max_size=70000)),
    "bornHost": st.sampled_from(["10.0.0.1:1234", "[2001:db8::1]:80", "255.255.255.255:65535"]),
    "storeHost": st.sampled_from(["127.0.0.1:10911", "[::1]:10911"]),
    "props": st.dictionaries(st.text(alphabet="xyzé😀_", min_size=1, max_size=8),
                             st.text(alphabet="uvw中文 ", min_size=1, max_size=12), max_size=4),
    "tags": st.one_of(st.none(), st.text(alphabet="ABCé", min_size=1, max_size=6)),
})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(message, min_size=1, max_size=6))
def test_records_round_trip(msgs):
    table = pa.table({
        "topic": [m["topic"] for m in msgs], "body": pa.array([m["body"] for m in msgs], pa.binary()),
        "bornHost": [m["bornHost"] for m in msgs], "storeHost": [m["storeHost"] for m in msgs],
        "tags": pa.array([m["tags"] for m in msgs], pa.string()),
        "properties": pa.array([list(m["props"].items()) for m in msgs], pa.map_(pa.string(), pa.string())),
    })
    with tempfile.TemporaryDirectory() as tmp:
        sizes = dict(commit_log_file_size=1 << 20, consume_queue_file_size=600, index_hash_slots=16,
                     index_max_entries=64)
        with RocketStore.open_writer(tmp, **sizes) as w:
            w.append(table)
        # a 16-slot index with a few entries is genuinely ambiguous (detection says so): pass the sizes
        with RocketStore.open(tmp, **sizes) as s:
            rows = [r for b in s.scan_raw() for r in b.to_pylist()]
    assert len(rows) == len(msgs)
    for r, m in zip(rows, msgs):
        assert r["topic"] == m["topic"] and r["body"] == m["body"]
        assert r["bornHost"] == _java_host(m["bornHost"]) and r["storeHost"] == _java_host(m["storeHost"])
        assert r["tags"] == m["tags"]
        props = dict(r["properties"])
        assert {k: v for k, v in props.items() if k not in ("TAGS", "UNIQ_KEY")} == m["props"]
        assert len(r["msgId"]) == (56 if "[" in m["storeHost"] else 32)


def _java_host(text):
    import ipaddress

    host, _, port = text.rpartition(":")
    if host.startswith("["):
        packed = ipaddress.ip_address(host[1:-1]).packed
        groups = [f"{(packed[i] << 8) | packed[i + 1]:x}" for i in range(0, 16, 2)]
        return "[" + ":".join(groups) + "]:" + port
    return text


# --- the gathered-header fast path parses exactly like the field-by-field path ----------------------------------

def _encoded_records(hosts):
    from rocketstore_spark.store.format.encoder import UniqKeyFactory
    from rocketstore_spark.store.write.encoded_batch import encode_table

    n = len(hosts)
    table = pa.table({"topic": ["T" * (1 + i % 3) for i in range(n)], "body": [b"x" * (i * 7 % 40) for i in range(n)],
                      "bornHost": [b for b, _ in hosts], "storeHost": [s for _, s in hosts],
                      "storeTimestamp": [1_700_000_000_000 + i for i in range(n)],
                      "reconsumeTimes": [3 + i for i in range(n)]})
    batch = encode_table(table, store_host="127.0.0.1:10911", uniq_factory=UniqKeyFactory())
    return bytes(batch.data), batch.record_offsets[:-1]


HOSTS = st.sampled_from(["10.0.0.1:1", "[2001:db8::1]:80"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(HOSTS, HOSTS), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(min_value=0, max_value=1 << 16), st.integers(0, 255)), max_size=4),
       st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=4))
def test_a_batch_parses_as_its_records_one_by_one(hosts, changes, extra_positions):
    from rocketstore_spark.store.format.codec import OPTIONAL_FIXED

    data, starts = _encoded_records(hosts)
    changed = bytearray(data + bytes(200))
    for where, value in changes:
        changed[where % len(data)] = value
    buf = np.frombuffer(bytes(changed), dtype=np.uint8)
    positions = np.concatenate([starts, np.array([p % len(data) for p in extra_positions], dtype=np.int64)])
    batch = parse_records(buf, positions)
    every = parse_records(buf, positions, OPTIONAL_FIXED)
    for i in range(len(positions)):
        one = parse_records(buf, positions[i:i + 1])
        for name, value in batch.__dict__.items():
            if name == "decoded":  # None: parse_records decodes nothing
                assert value is None and one.decoded is None
                continue
            assert value[i] == one.__dict__[name][0], name
            assert value[i] == every.__dict__[name][i], name
    if not changes:  # and it agrees with what was encoded
        n = len(starts)
        assert batch.valid[:n].all()
        assert batch.store_timestamp[:n].tolist() == [1_700_000_000_000 + i for i in range(n)]
        assert batch.reconsume_times[:n].tolist() == [3 + i for i in range(n)]
        assert batch.body_len[:n].tolist() == [i * 7 % 40 for i in range(n)]


# --- generated UNIQ_KEYs: MessageClientIDSetter's layout, counter wrapping at 2 bytes ----------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 16) + 5), st.integers(min_value=0, max_value=300),
       st.integers(min_value=1_600_000_000_000, max_value=1_900_000_000_000))
def test_generated_uniq_keys_follow_the_client_id_layout(start, count, now_ms):
    import time as _time

    from rocketstore_spark.store.format.encoder import UniqKeyFactory

    factory = UniqKeyFactory(ip=b"\x0a\x01\x02\x03")
    factory.counter = start
    keys = factory.make(count, now_ms).to_pylist()
    t = _time.gmtime(now_ms / 1000)
    since = (now_ms - int(_time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)) & 0xFFFFFFFF
    head = (factory.prefix + since.to_bytes(4, "big")).hex().upper()
    assert keys == [head + f"{(start + i) & 0xFFFF:04X}" for i in range(count)]
    assert factory.counter == start + count and all(k.startswith("0A010203") for k in keys)


COLUMN_VALUE = st.one_of(st.none(), PROPS_TEXT, st.sampled_from(["", " ", "a b", "x\u0001", "\u0002y"]))


@given(st.lists(st.tuples(COLUMN_VALUE, COLUMN_VALUE, COLUMN_VALUE), min_size=1, max_size=10),
       st.sets(st.sampled_from(["tags", "keys", "uniqKey"])))
@example([("a", "k1 k2", "U1"), ("", " ", ""), (None, None, None)], {"tags", "keys", "uniqKey"})
@example([("t\u0001x", "k", "u"), ("ok", "k\u0002K\u0001v", None)], {"tags", "keys", "uniqKey"})
def test_property_values_known_from_columns_equal_parsing_the_written_text(rows, present):
    """Tables whose properties come only from columns skip the parser; what they find must be what the
    broker's parser finds in the written bytes (separators inside values, empty values, nulls)."""
    from rocketstore_spark.store.format.encoder import UniqKeyFactory
    from rocketstore_spark.store.write.message_input import prepare_messages

    columns = {"topic": pa.array(["t"] * len(rows)), "body": pa.array([b"x"] * len(rows))}
    for i, name in enumerate(["tags", "keys", "uniqKey"]):
        if name in present:
            columns[name] = pa.array([r[i] for r in rows], pa.string())
    msgs = prepare_messages(pa.table(columns), store_host="127.0.0.1:10911", uniq_factory=UniqKeyFactory(),
                            now_ms=1_700_000_000_000)
    parsed = parse_properties(msgs.enc.properties)
    from rocketstore_spark.store.format.columns import property_values

    assert msgs.tags.to_pylist() == property_values(parsed, L.PROPERTY_TAGS).to_pylist()
    assert msgs.uniq_key.to_pylist() == property_values(parsed, L.PROPERTY_UNIQ_KEY).to_pylist()
    assert msgs.keys.to_pylist() == split_keys(property_values(parsed, L.PROPERTY_KEYS)).to_pylist()
    assert msgs.delay_level.to_pylist() == [None] * len(rows)


def test_values_are_known_only_when_no_value_holds_a_separator():
    from rocketstore_spark.store.format.encoder import UniqKeyFactory
    from rocketstore_spark.store.write.message_input import build_properties_known

    def known(tags, extra=None):
        table = pa.table({"topic": ["t", "t"], "body": [b"", b""], "tags": tags, **(extra or {})})
        return build_properties_known(table, UniqKeyFactory(), 0)[1]

    assert known(["a", None])[L.PROPERTY_TAGS].to_pylist() == ["a", None]
    assert known(["a", "b\u0002TAGS\u0001c"]) is None  # the parser would see a second TAGS pair
    props = pa.array([[("x", "1")], []], pa.map_(pa.string(), pa.string()))
    assert known(["a", "b"], {"properties": props}) is None  # a map may hold anything: parse
