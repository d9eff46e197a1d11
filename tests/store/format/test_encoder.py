"""The native record encoder: encode → decode round trips (hypothesis), byte layouts of hand-built records, and
errors for rows that cannot be records."""

import dataclasses
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.errors import MessageValidationError, StoreFormatError
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.codec import parse_records
from rocketstore_spark.store.format.encoder import (
    EncodeInput,
    encode_pieces,
    encode_records,
    join_properties,
    patch_records,
    piece_scratch_size,
    record_lengths,
    record_offsets,
)

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
TOPIC = st.one_of(st.text(alphabet="abcXYZ09_-%|", min_size=1, max_size=20),
                  st.text(alphabet="abc", min_size=120, max_size=255))
PROPERTIES = st.text(max_size=60)
MESSAGE = st.fixed_dictionaries({
    "topic": TOPIC, "body": st.binary(max_size=300), "properties": PROPERTIES, "queue_id": INT32,
    "flag": INT32, "queue_offset": INT64, "phy_offset": INT64, "born_v6": st.booleans(), "store_v6": st.booleans(),
    "other_flags": st.integers(0, 0xF), "born_ts": INT64, "store_ts": INT64, "born_addr": st.binary(min_size=16,
    max_size=16), "store_addr": st.binary(min_size=16, max_size=16), "born_port": st.integers(0, 0xFFFF),
    "store_port": st.integers(0, 0xFFFF), "reconsume": INT32, "prepared": INT64})


def encode_input(msgs: list, sliced: bool = False) -> EncodeInput:
    """The messages as encoder columns; ``sliced``: the Arrow columns are slices of larger arrays."""
    def column(values, typ):
        if not sliced:
            return pa.array(values, typ)
        filler = b"" if typ == pa.binary() else ""
        return pa.array([filler * 3, *values, filler], typ).slice(1, len(values))

    def ints(name):
        return np.array([m[name] for m in msgs], dtype=np.int64)

    sysflag = np.array([m["other_flags"] | (L.BORNHOST_V6_FLAG if m["born_v6"] else 0)
                        | (L.STOREHOSTADDRESS_V6_FLAG if m["store_v6"] else 0) for m in msgs], dtype=np.int64)
    addr = lambda name: np.frombuffer(b"".join(m[name] for m in msgs), np.uint8).reshape(len(msgs), 16)  # noqa: E731
    return EncodeInput(
        topic=column([m["topic"] for m in msgs], pa.string()), queue_id=ints("queue_id"), flag=ints("flag"),
        queue_offset=ints("queue_offset"), sysflag=sysflag, born_timestamp=ints("born_ts"),
        born_addr=addr("born_addr"), born_port=ints("born_port"), store_timestamp=ints("store_ts"),
        store_addr=addr("store_addr"), store_port=ints("store_port"), reconsume_times=ints("reconsume"),
        prepared_offset=ints("prepared"), body=column([m["body"] for m in msgs], pa.binary()),
        properties=column([m["properties"] for m in msgs], pa.string()))


def decoded(data: np.ndarray, offsets: np.ndarray) -> list:
    """Every record of ``data`` decoded back into the fields of ``MESSAGE``."""
    fields = parse_records(data, offsets[:-1])
    assert fields.valid.all(), fields.problem
    raw = data.tobytes()
    out = []
    for i in range(len(fields)):
        def cut(pos, length, i=i):
            return raw[int(pos[i]):int(pos[i]) + int(length[i])]

        sysflag = int(fields.sysflag[i])
        born_w = 16 if sysflag & L.BORNHOST_V6_FLAG else 4
        store_w = 16 if sysflag & L.STOREHOSTADDRESS_V6_FLAG else 4
        born = raw[int(fields.born_host_pos[i]):][:born_w + 4]
        store = raw[int(fields.store_host_pos[i]):][:store_w + 4]
        body = cut(fields.body_pos, fields.body_len)
        assert int(fields.body_crc[i]) == zlib.crc32(body) & 0x7FFFFFFF
        assert int(fields.total_size[i]) == int(offsets[i + 1] - offsets[i])
        out.append({
            "topic": cut(fields.topic_pos, fields.topic_len).decode(), "body": body,
            "properties": cut(fields.props_pos, fields.props_len).decode(), "queue_id": int(fields.queue_id[i]),
            "flag": int(fields.flag[i]), "queue_offset": int(fields.queue_offset[i]),
            "phy_offset": int(fields.phy_offset[i]), "born_v6": born_w == 16, "store_v6": store_w == 16,
            "other_flags": sysflag & 0xF, "born_ts": int(fields.born_timestamp[i]),
            "store_ts": int(fields.store_timestamp[i]), "born_addr": born[:born_w],
            "store_addr": store[:store_w], "born_port": int.from_bytes(born[born_w:], "big"),
            "store_port": int.from_bytes(store[store_w:], "big"), "reconsume": int(fields.reconsume_times[i]),
            "prepared": int(fields.prepared_offset[i]),
            "magic": int(fields.magic[i]) & 0xFFFFFFFF})
    return out


def expected(m: dict) -> dict:
    """What decoding gives back for message ``m``: IPv4 hosts keep their first 4 address bytes."""
    want = dict(m)
    want["born_addr"] = m["born_addr"] if m["born_v6"] else m["born_addr"][:4]
    want["store_addr"] = m["store_addr"] if m["store_v6"] else m["store_addr"][:4]
    want["magic"] = (L.MESSAGE_MAGIC_CODE_V2 if len(m["topic"].encode()) > 127 else L.MESSAGE_MAGIC_CODE) & 0xFFFFFFFF
    return want


@settings(max_examples=60, deadline=None)
@given(st.lists(MESSAGE, max_size=12), st.booleans())
def test_encoded_records_decode_to_their_input(msgs, sliced):
    enc = encode_input(msgs, sliced)
    data, offsets = encode_records(enc, np.array([m["phy_offset"] for m in msgs], dtype=np.int64))
    assert offsets[0] == 0 and offsets[-1] == len(data)
    assert np.diff(offsets).tolist() == record_lengths(enc).tolist()
    assert decoded(data, offsets) == [expected(m) for m in msgs]


def a_message(**changes) -> dict:
    m = {"topic": "T", "body": b"hi", "properties": "KEYS\x01k\x02", "queue_id": 3, "flag": 0, "queue_offset": 7,
         "phy_offset": 1000, "born_v6": False, "store_v6": False, "other_flags": 0, "born_ts": 111,
         "store_ts": 222, "born_addr": bytes([10, 0, 0, 1]) + bytes(12), "store_addr": bytes([0xFE] * 16),
         "born_port": 1234, "store_port": 10911, "reconsume": 0, "prepared": 0}
    m.update(changes)
    return m


def test_empty_bodies_properties_and_values():
    msgs = [a_message(body=b"", properties=""), a_message(properties="A\x01\x02"), a_message(topic="é中")]
    enc = encode_input(msgs)
    data, offsets = encode_records(enc, np.array([m["phy_offset"] for m in msgs], dtype=np.int64))
    assert decoded(data, offsets) == [expected(m) for m in msgs]
    assert int(offsets[1]) == 88 + 1 + 1 + 2  # fixed part incl. BODYLEN, then TOPICLEN, "T", PROPERTIESLEN


def test_an_ipv4_record_byte_for_byte():
    m = a_message()
    enc = encode_input([m])
    data, offsets = encode_records(enc, np.array([1000], dtype=np.int64))
    want = b"".join([
        (88 + 2 + 1 + 1 + 2 + 7).to_bytes(4, "big"), (L.MESSAGE_MAGIC_CODE & 0xFFFFFFFF).to_bytes(4, "big"),
        (zlib.crc32(b"hi") & 0x7FFFFFFF).to_bytes(4, "big"), (3).to_bytes(4, "big"), (0).to_bytes(4, "big"),
        (7).to_bytes(8, "big"), (1000).to_bytes(8, "big"), (0).to_bytes(4, "big"), (111).to_bytes(8, "big"),
        bytes([10, 0, 0, 1]), (1234).to_bytes(4, "big"), (222).to_bytes(8, "big"), bytes([0xFE] * 4),
        (10911).to_bytes(4, "big"), (0).to_bytes(4, "big"), (0).to_bytes(8, "big"), (2).to_bytes(4, "big"), b"hi",
        b"\x01T", (7).to_bytes(2, "big"), b"KEYS\x01k\x02"])
    assert data.tobytes() == want
    assert offsets.tolist() == [0, len(want)]


def test_properties_too_long_for_a_record_name_the_row():
    msgs = [a_message(), a_message(properties="p" * (L.MAX_PROPERTIES_LENGTH + 1))]
    with pytest.raises(MessageValidationError, match="row 1"):
        encode_records(encode_input(msgs), np.zeros(2, dtype=np.int64))
    fits = [a_message(properties="p" * L.MAX_PROPERTIES_LENGTH)]
    data, offsets = encode_records(encode_input(fits), np.zeros(1, dtype=np.int64))
    assert decoded(data, offsets)[0]["properties"] == fits[0]["properties"]


def test_no_rows_encode_to_nothing():
    data, offsets = encode_records(encode_input([]), np.zeros(0, dtype=np.int64))
    assert len(data) == 0 and offsets.tolist() == [0]


@settings(max_examples=60, deadline=None)
@given(st.lists(MESSAGE, min_size=1, max_size=12), st.lists(st.tuples(INT64, INT64, INT64), min_size=12,
                                                               max_size=12), st.booleans())
def test_patched_records_equal_records_encoded_with_those_values(msgs, assigned, with_phy):
    """What a publisher fills in (queue offset, store time, physical offset) patched into encoded records gives
    exactly the bytes of records encoded with those values."""
    enc = encode_input(msgs)
    data, offsets = encode_records(enc, np.array([m["phy_offset"] for m in msgs], dtype=np.int64))
    data = data.copy()
    queue_offset, store_ts, phy = (np.array(col[:len(msgs)], dtype=np.int64) for col in zip(*assigned))
    ts_pos = np.where(enc.sysflag & L.BORNHOST_V6_FLAG, 68, 56).astype(np.int64)
    patch_records(data, offsets[:-1], queue_offset, ts_pos, store_ts, phy if with_phy else None)
    for m, q, t, p in zip(msgs, queue_offset.tolist(), store_ts.tolist(), phy.tolist()):
        m.update(queue_offset=q, store_ts=t, phy_offset=p if with_phy else m["phy_offset"])
    want, want_offsets = encode_records(encode_input(msgs), np.array([m["phy_offset"] for m in msgs], np.int64))
    assert data.tobytes() == want.tobytes()


def test_encoding_into_scratch_memory_with_known_lengths_gives_the_same_records():
    msgs = [a_message(), a_message(body=b"x" * 500, born_v6=True), a_message(topic="t" * 200)]
    enc = encode_input(msgs)
    phy = np.array([5, 600, 9000], dtype=np.int64)
    data, offsets = encode_records(enc, phy)
    scratch = np.full(len(data) + 100, 0xAA, dtype=np.uint8)
    into, into_offsets = encode_records(enc, phy, lengths=record_lengths(enc), scratch=scratch)
    assert into.tobytes() == data.tobytes() and into_offsets.tolist() == offsets.tolist()
    assert np.shares_memory(into, scratch)
    small = np.zeros(10, dtype=np.uint8)  # too small: fresh memory instead
    again, _ = encode_records(enc, phy, scratch=small)
    assert again.tobytes() == data.tobytes() and not np.shares_memory(again, small)


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("first", [0, 130, 399, 1234])
def test_records_encoded_in_pieces_are_the_records_encoded_at_once(chunked, first):
    """Pieces put together where they belong are exactly the records encoded in one go: records run on from
    ``first`` with a gap (a file's BLANK end) before row 7. Each piece begins and ends on a multiple of the piece
    size, but where a gap or the end follows, or where the records begin again after one; a piece holds at most a
    piece and the record across its end."""
    msgs = [a_message(body=bytes([i]) * (40 + 90 * (i % 4))) for i in range(16)]
    enc = encode_input(msgs)
    if chunked:  # the body column in chunks: pieces run on across them
        enc = dataclasses.replace(enc, body=pa.chunked_array([enc.body.slice(0, 5), enc.body.slice(5)]))
    lengths = np.diff(encode_records(enc, np.zeros(16, dtype=np.int64))[1])
    phy = first + np.concatenate(([0], np.cumsum(lengths[:-1])))
    phy[7:] += 5000  # the gap
    want, offsets = encode_records(enc, phy)
    assert record_offsets(lengths).tolist() == offsets.tolist()
    piece_bytes = 400
    scratch = np.zeros(piece_scratch_size(lengths, piece_bytes), dtype=np.uint8)
    pieces = [(at, data.tobytes()) for at, data in encode_pieces(enc, phy, offsets, scratch, piece_bytes)]
    placed = np.zeros(int(phy[-1] + lengths[-1]), dtype=np.uint8)
    for at, data in pieces:
        placed[at:at + len(data)] = np.frombuffer(data, np.uint8)
    for row in range(16):
        assert placed[phy[row]:phy[row] + lengths[row]].tobytes() == \
            want[offsets[row]:offsets[row + 1]].tobytes()
    covered = [(at, at + len(data)) for at, data in pieces]
    runs = [(int(phy[0]), int(phy[6] + lengths[6])), (int(phy[7]), int(phy[15] + lengths[15]))]
    # the pieces tile each run of records, in order, and nothing else
    assert sorted(covered) == covered
    assert sum(hi - lo for lo, hi in covered) == sum(hi - lo for lo, hi in runs)
    for lo, hi in covered:
        run = [r for r in runs if r[0] <= lo and hi <= r[1]]
        assert len(run) == 1
        assert lo == run[0][0] or lo % piece_bytes == 0
        assert hi == run[0][1] or hi % piece_bytes == 0
        assert hi - lo <= piece_bytes + int(lengths.max())
    assert len(covered) > 4


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(0, 700), min_size=1, max_size=14), first=st.integers(0, 2000),
       gap=st.integers(0, 14), split=st.integers(0, 14), piece_bytes=st.integers(64, 900))
def test_pieces_tile_the_records_at_multiples_of_the_piece_size(sizes, first, gap, split, piece_bytes):
    """Any record sizes, start, gap, body chunking and piece size: the pieces put together are the records encoded
    in one go, and every cut inside a run of records lies on a multiple of the piece size."""
    n = len(sizes)
    enc = encode_input([a_message(body=bytes([i % 251]) * size) for i, size in enumerate(sizes)])
    if 0 < split < n:
        enc = dataclasses.replace(enc, body=pa.chunked_array([enc.body.slice(0, split), enc.body.slice(split)]))
    lengths = np.diff(encode_records(enc, np.zeros(n, dtype=np.int64))[1])
    phy = first + np.concatenate(([0], np.cumsum(lengths[:-1])))
    if 0 < gap < n:
        phy[gap:] += 777
    want, offsets = encode_records(enc, phy)
    scratch = np.zeros(piece_scratch_size(lengths, piece_bytes), dtype=np.uint8)
    pieces = [(at, data.tobytes()) for at, data in encode_pieces(enc, phy, offsets, scratch, piece_bytes)]
    placed = {}
    for at, data in pieces:
        for k in range(len(data)):
            assert at + k not in placed
            placed[at + k] = data[k]
    for row in range(n):
        got = bytes(placed[int(phy[row]) + k] for k in range(int(lengths[row])))
        assert got == want[offsets[row]:offsets[row + 1]].tobytes()
    assert len(placed) == int(lengths.sum())
    run_starts = {int(phy[0])} | ({int(phy[gap])} if 0 < gap < n else set())
    run_ends = {int(phy[-1] + lengths[-1])} | ({int(phy[gap - 1] + lengths[gap - 1])} if 0 < gap < n else set())
    for at, data in pieces:
        assert at in run_starts or at % piece_bytes == 0
        assert at + len(data) in run_ends or (at + len(data)) % piece_bytes == 0


def test_a_record_larger_than_a_piece_is_cut_at_the_multiples_it_spans():
    """A record spanning several multiples: its piece ends on the last of them, the rest begins the next piece."""
    msgs = [a_message(body=b"a" * 100), a_message(body=b"b" * 1500), a_message(body=b"c" * 100)]
    enc = encode_input(msgs)
    lengths = np.diff(encode_records(enc, np.zeros(3, dtype=np.int64))[1])
    phy = 50 + np.concatenate(([0], np.cumsum(lengths[:-1])))
    want, offsets = encode_records(enc, phy)
    scratch = np.zeros(piece_scratch_size(lengths, 400), dtype=np.uint8)
    pieces = [(at, data.tobytes()) for at, data in encode_pieces(enc, phy, offsets, scratch, 400)]
    assert b"".join(d for _, d in pieces) == want.tobytes()
    assert [at for at, _ in pieces][0] == 50
    assert all(at % 400 == 0 for at, _ in pieces[1:])
    assert all((at + len(d)) % 400 == 0 for at, d in pieces[:-1])


def test_a_record_patched_outside_the_buffer_names_file_and_offset():
    data, offsets = encode_records(encode_input([a_message()]), np.zeros(1, dtype=np.int64))
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(StoreFormatError, match="record 0 to patch lies outside") as err:
        patch_records(data.copy(), np.array([len(data) - 10]), one, np.array([56]), one, path="/x/00", base=4096)
    assert err.value.path == "/x/00" and err.value.offset == 4096 + len(data) - 10


VALUES = st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=3, max_size=3)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(VALUES, max_size=25), cut=st.integers(0, 3))
def test_joined_properties_are_each_rows_present_pairs_in_order(rows, cut):
    """``name\u0001value\u0002`` per present value after the row's prefix; columns sliced as Spark's may be."""
    prefix, tags, keys = ([r[k] for r in rows] for k in range(3))
    columns = [pa.array(["pad"] * cut + c, pa.string()).slice(cut) for c in (prefix, tags, keys)]
    got = join_properties(len(rows), {"TAGS": columns[1], "KEYS": columns[2]},
                          prefix=columns[0].fill_null("") if rows else columns[0])
    want = [(p or "") + "".join(f"{name}\u0001{value}\u0002" for name, value in (("TAGS", t), ("KEYS", k))
                                 if value is not None) for p, t, k in rows]
    assert got.type == pa.string() and got.null_count == 0
    assert got.to_pylist() == want


def test_properties_of_no_pairs_are_empty_texts():
    assert join_properties(2, {}).to_pylist() == ["", ""]
    assert join_properties(0, {"TAGS": pa.array([], pa.string())}).to_pylist() == []


@settings(max_examples=40, deadline=None)
@given(msgs=st.lists(MESSAGE, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4))
def test_a_body_column_in_chunks_encodes_as_the_same_records(msgs, cuts):
    """A merged table keeps its bodies in their batches' chunks: the records are the same as from one array."""
    whole = encode_input(msgs)
    bounds = sorted({0, len(msgs), *(min(c, len(msgs)) for c in cuts)})
    chunked = dataclasses.replace(whole, body=pa.chunked_array(
        [whole.body.slice(a, b - a) for a, b in zip(bounds, bounds[1:])], pa.binary()))
    phy = np.arange(len(msgs), dtype=np.int64) * 1000
    want, want_offsets = encode_records(whole, phy)
    got, got_offsets = encode_records(chunked, phy)
    assert np.array_equal(record_lengths(chunked), record_lengths(whole))
    assert got_offsets.tolist() == want_offsets.tolist() and got.tobytes() == want.tobytes()


def test_a_row_that_cannot_be_a_record_is_named_in_a_later_body_chunk():
    msgs = [a_message(), a_message(), a_message(properties="p" * (L.MAX_PROPERTIES_LENGTH + 1))]
    enc = encode_input(msgs)
    chunked = dataclasses.replace(enc, body=pa.chunked_array([enc.body.slice(0, 2), enc.body.slice(2)]))
    with pytest.raises(MessageValidationError, match="row 2"):
        encode_records(chunked, np.zeros(3, dtype=np.int64))
