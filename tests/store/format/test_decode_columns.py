"""The one-pass native decode of a batch's columns against naive transcriptions of RocketMQ's decoder, on
hand-encoded records: text as Java's ``new String(bytes, UTF_8)`` (ill-formed bytes become U+FFFD), the
properties as ``string2messageProperties``, hosts and msgIds in both address widths."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.errors import CorruptRecordError
from rocketstore_spark.store.format import columns as C
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.codec import parse_records
from rocketstore_spark.store.format.columns import COLUMNS, build_batch, parse_and_decode
from tests.store import reference as ref

PROPS_BYTES = st.lists(st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"k", b" ", b"a b", b"\x01", b"\x02", b"\xff",
                                        b"\xe2\x82", "é中😀".encode()]), max_size=14).map(b"".join)


def encode(topic: bytes, body: bytes, props: bytes, v6: bool, phy: int) -> bytes:
    """One v2 record as ``MessageExtEncoder`` writes it (born and store hosts of the same width)."""
    sysflag = L.BORNHOST_V6_FLAG | L.STOREHOSTADDRESS_V6_FLAG if v6 else 0
    host = (bytes(range(1, 17)) if v6 else bytes([10, 0, 0, 7])) + struct.pack(">i", 10911)
    fixed = struct.pack(">iiqqiq", 3, 0, 5, phy, sysflag, 1_700_000_000_000)  # QUEUEID .. BORNTIMESTAMP
    rest = (host + struct.pack(">q", 1_700_000_000_001) + host + struct.pack(">iq", 0, 0)
            + struct.pack(">i", len(body)) + body + struct.pack(">h", len(topic)) + topic
            + struct.pack(">h", len(props)) + props)
    total = 12 + len(fixed) + len(rest)
    return struct.pack(">iii", total, L.MESSAGE_MAGIC_CODE_V2, 0) + fixed + rest


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=40), PROPS_BYTES, st.booleans()),
                min_size=1, max_size=8))
def test_every_column_decodes_as_rocketmq_does(records):
    buf, positions = b"", []
    for topic, body, props, v6 in records:
        positions.append(len(buf))
        buf += encode(topic, body, props, v6, len(buf))
    fields = parse_records(np.frombuffer(buf, np.uint8), np.array(positions, np.int64))
    assert fields.valid.all()
    rows = build_batch(np.frombuffer(buf, np.uint8), fields, COLUMNS + ("propertiesString",)).to_pylist()
    for row, (topic, body, props, v6), at in zip(rows, records, positions):
        expected = ref.java_properties(text(props))
        assert row["topic"] == text(topic) and row["body"] == body and row["propertiesString"] == text(props)
        assert dict(row["properties"]) == expected
        assert (row["tags"], row["uniqKey"]) == (expected.get("TAGS"), expected.get("UNIQ_KEY"))
        assert row["keys"] == ref.keys_tokens(expected.get("KEYS"))
        host = "[102:304:506:708:90a:b0c:d0e:f10]:10911" if v6 else "10.0.0.7:10911"
        assert row["bornHost"] == row["storeHost"] == host
        address = bytes(range(1, 17)) if v6 else bytes([10, 0, 0, 7])
        assert row["msgId"] == (address + struct.pack(">iq", 10911, at)).hex().upper()


def test_a_field_outside_the_buffer_names_the_record():
    buf = np.frombuffer(encode(b"T", b"body", b"TAGS\x01a", False, 0) * 2, np.uint8)
    fields = parse_records(buf, np.array([0, len(buf) // 2], np.int64))
    fields.body_len[1] = len(buf)  # a header that lies about its body
    with pytest.raises(CorruptRecordError) as caught:
        build_batch(buf, fields, ["body"], "commitlog/00000000000000000000")
    assert caught.value.offset == len(buf) // 2 and "outside the buffer" in str(caught.value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=40), PROPS_BYTES, st.booleans()),
                min_size=1, max_size=8))
def test_the_parsing_pass_decodes_every_column_as_the_separate_decode_does(records):
    """Text columns decoded in the parsing pass (room: the records' bytes) equal those of a parse then a decode
    sized exactly, also where ill-formed text grows past the records' bytes (the pass falls back)."""
    buf, positions = b"", []
    for topic, body, props, v6 in records:
        positions.append(len(buf))
        buf += encode(topic, body, props, v6, len(buf))
    arr, pos = np.frombuffer(buf, np.uint8), np.array(positions, np.int64)
    columns = COLUMNS + ("propertiesString",)
    expected = build_batch(arr, parse_records(arr, pos), columns)
    fused = parse_and_decode(arr, pos, columns)
    assert fused.decoded is not None and fused.valid.all()
    assert build_batch(arr, fused, columns).equals(expected)


def test_text_outgrowing_the_records_bytes_or_too_many_records_bytes_decode_after_the_parse(monkeypatch):
    ill = encode(b"\xff" * 60, b"", b"TAGS\x01" + b"\xff" * 150, False, 0)  # U+FFFD takes 3 bytes a byte
    well = encode("тема".encode(), b"body", b"TAGS\x01a\x02KEYS\x01k1 k2", True, len(ill))
    arr = np.frombuffer(ill + well, np.uint8)
    pos = np.array([0, len(ill)], np.int64)
    expected = build_batch(arr, parse_records(arr, pos), COLUMNS)
    assert expected.column("tags")[0].as_py() == "\ufffd" * 150
    grown = parse_and_decode(arr, pos, COLUMNS)
    assert grown.decoded is None and build_batch(arr, grown, COLUMNS).equals(expected)
    fits = parse_and_decode(arr, pos[1:], COLUMNS)
    assert fits.decoded is not None
    assert build_batch(arr, fits, COLUMNS).equals(expected.slice(1))
    monkeypatch.setattr(C, "FUSED_TEXT_BYTES", len(well) - 1)
    large = parse_and_decode(arr, pos[1:], COLUMNS)
    assert large.decoded is None and build_batch(arr, large, COLUMNS).equals(expected.slice(1))
    assert parse_and_decode(arr, pos[1:], ["body", "msgId"]).decoded is not None  # body and hosts: up to FUSED_BYTES
