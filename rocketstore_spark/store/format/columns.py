"""Arrow columns from parsed commit-log records, built with native, numpy and Arrow kernels (no per-row objects).

Variable-length fields are gathered straight out of the memory-mapped file by the native kernel into Arrow's
offset and data buffers, which Arrow wraps without a copy.
"""

from __future__ import annotations

import functools
import zlib
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import _native
from . import layout as L
from .codec import RecordBatchFields, check_fixed, fields_of, header_outputs, native_bytes, parse_records
from .output_memory import OUTPUT_MEMORY
from .queue_test import QueueTest

#: The store layer's columns, in the order every reader returns them.
COLUMNS = (
    "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "msgId", "uniqKey", "tags", "keys",
    "body", "properties", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag",
    "reconsumeTimes", "bodyCRC", "preparedTransactionOffset",
)
#: Opt-in columns for byte-exact work: the body as stored (still compressed) and the raw properties string.
RAW_COLUMNS = ("rawBody", "propertiesString")

TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
FIELD_TYPES = {
    "topic": pa.string(), "queueId": pa.int32(), "queueOffset": pa.int64(), "commitLogOffset": pa.int64(),
    "storeSize": pa.int32(), "msgId": pa.string(), "uniqKey": pa.string(), "tags": pa.string(),
    "keys": pa.list_(pa.field("element", pa.string())), "body": pa.binary(),
    "properties": pa.map_(pa.string(), pa.string()),
    "bornTimestamp": TIMESTAMP_TYPE, "storeTimestamp": TIMESTAMP_TYPE, "bornHost": pa.string(),
    "storeHost": pa.string(), "sysFlag": pa.int32(), "flag": pa.int32(), "reconsumeTimes": pa.int32(),
    "bodyCRC": pa.int32(), "preparedTransactionOffset": pa.int64(), "rawBody": pa.binary(),
    "propertiesString": pa.string(),
}


def arrow_schema(columns=COLUMNS) -> pa.Schema:
    """The Arrow schema of a batch holding ``columns``."""
    return _schema_of(tuple(columns))


@functools.lru_cache(maxsize=256)
def _schema_of(columns: tuple) -> pa.Schema:
    return pa.schema([pa.field(c, FIELD_TYPES[c]) for c in columns])


def normalize_columns(columns) -> tuple[str, ...]:
    """Validate a column selection; ``None`` means every standard column."""
    if columns is None:
        return COLUMNS
    columns = tuple(columns)
    unknown = [c for c in columns if c not in FIELD_TYPES]
    if unknown:
        from ...errors import InvalidArgumentError

        raise InvalidArgumentError(f"unknown column(s) {unknown}; expected a subset of {list(FIELD_TYPES)}")
    return columns


def gather_binary(buf, pos: np.ndarray, length: np.ndarray, nullable: bool = False) -> pa.Array:
    """A ``binary`` array of ``buf[pos:pos+length]`` per row, copied by the native kernel into one Arrow data
    buffer; with ``nullable``, rows of negative length are null."""
    n = len(pos)
    pos = np.require(pos, dtype=np.int64, requirements=["C", "A"])
    length = np.require(length, dtype=np.int64, requirements=["C", "A"])
    total = int(np.maximum(length, 0).sum()) if n else 0
    if total >= 1 << 31:
        raise pa.ArrowInvalid(f"{total:,} bytes of values exceed a binary array's 2 GiB: read smaller batches")
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(total, dtype=np.uint8)
    validity = np.empty((n + 7) // 8, dtype=np.uint8) if nullable else None
    nulls = _native.gather(native_bytes(buf), pos, length, offsets, data, validity)
    if nulls < 0:
        from ...errors import CorruptRecordError

        row = -nulls - 1
        raise CorruptRecordError(f"a value of {int(length[row])} bytes runs outside the buffer", None, int(pos[row]))
    return pa.Array.from_buffers(pa.binary(), n, [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets),
                                                  pa.py_buffer(data)], null_count=nulls)


def view_array(buf: np.ndarray, pos: np.ndarray, length: np.ndarray, to_type: pa.DataType) -> pa.Array:
    """Gather ``buf[pos:pos+length]`` per row into a ``binary`` (or ``to_type``) array."""
    if len(pos) == 0:
        return pa.array([], type=to_type)
    values = gather_binary(buf, pos, length)
    return values if to_type == pa.binary() else values.cast(to_type)


def to_strings(binary: pa.Array) -> pa.Array:
    """UTF-8 strings from bytes; malformed sequences become U+FFFD as Java's ``new String(bytes, UTF_8)``."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in binary.to_pylist()],
                        type=pa.string())


def parse_properties(props: pa.Array) -> pa.MapArray:
    """``MessageDecoder.string2messageProperties`` for a whole column of strings.

    Pairs are split on U+0002, name and value on the first U+0001; a pair is kept only when both name and
    value are non-empty; a repeated name keeps its last value (Java ``HashMap.put``). On-disk order is kept.
    """
    n = len(props)
    data = props.buffers()[2]
    data = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    offsets = np.frombuffer(props.buffers()[1], dtype=np.int32)[props.offset:props.offset + n + 1].astype(np.int64)
    pos, length = offsets[:-1], np.diff(offsets)
    if props.null_count:
        length = np.where(np.asarray(props.is_valid()), length, 0)
    capacity = max(int(offsets[-1] - offsets[0]) // 4 + 2 * n, 1) if n else 1
    map_offsets = np.empty(n + 1, dtype=np.int32)
    pairs = np.empty((4, capacity), dtype=np.int64)
    count = _native.property_pairs(data, np.ascontiguousarray(pos), length, map_offsets, pairs)
    names = gather_binary(data, pairs[0, :count], pairs[1, :count]).view(pa.string())
    values = gather_binary(data, pairs[2, :count], pairs[3, :count]).view(pa.string())
    return pa.MapArray.from_arrays(pa.array(map_offsets), names, values)


def property_values(props: pa.MapArray, name: str) -> pa.Array:
    """The value of one property per row (null when absent)."""
    n = len(props)
    offsets = np.asarray(props.offsets)
    # ``keys``/``items`` are the whole child arrays, also of a slice: only the pairs its offsets span count
    first, last = int(offsets[0]), int(offsets[-1])
    keys, items = props.keys.slice(first, last - first), props.items.slice(first, last - first)
    hits = np.flatnonzero(np.asarray(pc.fill_null(pc.equal(keys, name), False)))
    rows = np.searchsorted(offsets - first, hits, side="right") - 1
    idx = np.zeros(n, dtype=np.int64)
    present = np.zeros(n, dtype=bool)
    idx[rows] = hits
    present[rows] = True
    return items.take(pa.array(idx, mask=~present))


def single_property(props: pa.BinaryArray, name: str) -> pa.Array:
    """``string2messageProperties(props).get(name)`` per row, found in the raw bytes without building the map.

    A pair counts where a segment (after the row start or a U+0002) begins with ``name`` U+0001 and its value
    (up to the next U+0002 or the row end) is not empty; the last such pair of a row wins, as in the Java
    HashMap. The separators are ASCII, so byte positions agree with Java's char positions.
    """
    n = len(props)
    data = props.buffers()[2]
    offsets = np.frombuffer(props.buffers()[1], dtype=np.int32)[props.offset:props.offset + n + 1].astype(np.int64)
    return property_of(np.zeros(0, np.uint8) if data is None else data, offsets[:-1], np.diff(offsets), name)


def property_of(buf, props_pos: np.ndarray, props_len: np.ndarray, name: str) -> pa.Array:
    """:func:`single_property` over properties strings ``buf[props_pos:props_pos+props_len]`` in place."""
    n = len(props_pos)
    props_pos = np.require(props_pos, dtype=np.int64, requirements=["C", "A"])
    props_len = np.require(props_len, dtype=np.int64, requirements=["C", "A"])
    at, length = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    buf = native_bytes(buf)
    bad = _native.property_values(buf, props_pos, props_len, name.encode(), at, length)
    if bad < 0:
        from ...errors import CorruptRecordError

        raise CorruptRecordError("a properties string runs outside the buffer", None, int(props_pos[-bad - 1]))
    return to_strings(gather_binary(buf, at, length, nullable=True))


def split_keys(keys_value: pa.Array) -> pa.ListArray:
    """KEYS property → list of its non-empty space-separated tokens (empty list when absent)."""
    tokens_list = pc.split_pattern(pc.fill_null(keys_value, ""), L.KEY_SEPARATOR)
    tokens = tokens_list.flatten()
    rows = np.asarray(pc.list_parent_indices(tokens_list))
    keep = np.asarray(pc.greater(pc.binary_length(tokens), 0))
    offsets = np.zeros(len(keys_value) + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows[keep], minlength=len(keys_value)), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), tokens.filter(pa.array(keep)), type=FIELD_TYPES["keys"])


def decompress_body(data: bytes, sysflag: int) -> bytes:
    """Undo the producer's body compression recorded in ``sysflag`` (``CompressionType``; 0 means ZLIB)."""
    kind = (sysflag & L.COMPRESSION_TYPE_MASK) >> L.COMPRESSION_TYPE_SHIFT
    if kind == L.COMPRESSION_LZ4:
        import lz4.frame

        return lz4.frame.decompress(data)
    if kind == L.COMPRESSION_ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return zlib.decompress(data)


#: The variable-length columns one native pass decodes (``_native.decode_columns``), each with its buffers there.
DECODED_COLUMNS = ("topic", "body", "propertiesString", "properties", "tags", "uniqKey", "keys", "msgId",
                   "bornHost", "storeHost")
#: The most bytes a text value takes per byte of its source: an ill-formed byte becomes U+FFFD's three.
_TEXT_GROWTH = 3


class _DecodeOutputs:
    """The output buffers ``decode_columns`` / ``decode_records`` fill for the ``wanted`` decoded columns of
    ``n`` records: one recycled block (:mod:`.output_memory`) with a part per ``_native.DECODE_OUTPUTS`` name
    of a wanted column, the text columns sized for ``topic`` and ``props`` bytes of text and the body for
    ``body`` bytes."""

    __slots__ = ("block", "parts")

    def __init__(self, n: int, wanted, topic: int, body: int, props: int):
        pairs = (props + n) // 4 + n  # columns::max_property_pairs
        tokens = props // 2 + n  # decode::max_key_tokens
        sizes = {
            "topic": {"offsets": n + 1, "data": topic},
            "body": {"offsets": n + 1, "data": body},
            "propertiesString": {"offsets": n + 1, "data": props},
            "properties": {"offsets": n + 1, "name_offsets": pairs + 1, "names": props,
                           "value_offsets": pairs + 1, "values": props},
            "tags": {"offsets": n + 1, "data": props, "validity": (n + 7) // 8},
            "uniqKey": {"offsets": n + 1, "data": props, "validity": (n + 7) // 8},
            "keys": {"offsets": n + 1, "token_offsets": tokens + 1, "tokens": props},
            "msgId": {"offsets": n + 1, "data": n * _native.MAX_MSG_ID_TEXT},
            "bornHost": {"offsets": n + 1, "data": n * _native.MAX_HOST_TEXT},
            "storeHost": {"offsets": n + 1, "data": n * _native.MAX_HOST_TEXT},
        }
        self.parts: dict[str, tuple[int, int]] = {}  # slot name → (part, bytes)
        part_sizes = []
        for slot in _native.DECODE_OUTPUTS:
            column, part = slot.split(".")
            if column in wanted:
                size = sizes[column][part] * (4 if part.endswith("offsets") else 1)
                self.parts[slot] = (len(part_sizes), size)
                part_sizes.append(size)
        self.block = OUTPUT_MEMORY.block(part_sizes)

    def views(self) -> list:
        """A numpy view of each part in ``_native.DECODE_OUTPUTS`` order, None where a column is not decoded."""
        out = []
        for slot in _native.DECODE_OUTPUTS:
            where = self.parts.get(slot)
            out.append(None if where is None else self.block.view(
                where[0], where[1], np.int32 if slot.endswith("offsets") else np.uint8))
        return out

    def arrow(self, slot: str, size: int) -> pa.Buffer:
        """The first ``size`` bytes of ``slot`` as an Arrow buffer."""
        return self.block.arrow(self.parts[slot][0], size)

    def binary(self, kind: pa.DataType, rows: int, column: str, used: int, nulls: int = 0,
               offsets: str = "offsets", data: str = "data") -> pa.Array:
        """An Arrow binary or string array of ``rows`` rows wrapping the filled parts of ``column``."""
        validity = self.arrow(f"{column}.validity", (rows + 7) // 8) if nulls else None
        return pa.Array.from_buffers(kind, rows, [validity, self.arrow(f"{column}.{offsets}", 4 * (rows + 1)),
                                                  self.arrow(f"{column}.{data}", used)], null_count=nulls)

    def arrays(self, n: int, wanted, report) -> dict[str, pa.Array]:
        """The Arrow arrays of the filled parts; ``report``: the native decode's pairs, tokens, and each
        column's bytes used and nulls."""
        pairs, tokens = report[0], report[1]
        used = dict(zip(("topic", "body", "propertiesString", "names", "values", "tags", "uniqKey", "tokens",
                         "msgId", "bornHost", "storeHost"), zip(report[2::2], report[3::2])))
        out = {}
        for name in wanted & _PLAIN_DECODED:
            size, nulls = used[name]
            out[name] = self.binary(pa.binary() if name == "body" else pa.string(), n, name, size, nulls)
        if "properties" in wanted:
            names = self.binary(pa.string(), pairs, "properties", used["names"][0], offsets="name_offsets",
                                data="names")
            values = self.binary(pa.string(), pairs, "properties", used["values"][0], offsets="value_offsets",
                                 data="values")
            offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, self.arrow("properties.offsets", 4 * (n + 1))])
            out["properties"] = pa.MapArray.from_arrays(offsets, names, values)
        if "keys" in wanted:
            tokens_array = self.binary(pa.string(), tokens, "keys", used["tokens"][0], offsets="token_offsets",
                                       data="tokens")
            offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, self.arrow("keys.offsets", 4 * (n + 1))])
            out["keys"] = pa.ListArray.from_arrays(offsets, tokens_array, type=FIELD_TYPES["keys"])
        return out


#: The decoded columns that are one binary or string array each.
_PLAIN_DECODED = frozenset({"topic", "body", "propertiesString", "tags", "uniqKey", "msgId", "bornHost",
                            "storeHost"})


def decode_columns(buf, fields: RecordBatchFields, wanted, where: str = "") -> dict[str, pa.Array]:
    """The ``wanted`` :data:`DECODED_COLUMNS` of the (valid) records of ``fields``, in one native pass over them:
    bodies as stored (still compressed), text as Java decodes UTF-8, the properties as
    ``string2messageProperties`` reads them."""
    wanted = set(wanted) & set(DECODED_COLUMNS)
    n = len(fields)
    inputs = np.empty((len(_native.DECODE_INPUTS), n), dtype=np.int64)
    for row, name in zip(inputs, _native.DECODE_INPUTS):
        value = getattr(fields, name)
        row[:] = 0 if value is None else value  # phy_offset is parsed where msgId is wanted
    props = int(fields.props_len.sum()) if wanted & _PROPERTY_COLUMNS else 0
    # a recycled block: the pages of earlier batches, mapped and often still cached
    outputs = _DecodeOutputs(n, wanted, _TEXT_GROWTH * int(fields.topic_len.sum()), int(fields.body_len.sum()),
                             _TEXT_GROWTH * props)
    report = _native.decode_columns(native_bytes(buf), inputs, outputs.views())
    if report[0] >= 0:
        from ...errors import CorruptRecordError

        raise CorruptRecordError("record fields run outside the buffer", where or None,
                                 int(fields.position[report[0]]))
    return outputs.arrays(n, wanted, report[1:])


#: The decoded columns read out of the properties string.
_PROPERTY_COLUMNS = frozenset({"propertiesString", "properties", "tags", "uniqKey", "keys"})


def decoded_columns_for(columns) -> frozenset:
    """The :data:`DECODED_COLUMNS` a batch of ``columns`` needs (``rawBody`` is the body as stored)."""
    return frozenset({"body" if c == "rawBody" else c for c in columns}) & frozenset(DECODED_COLUMNS)


#: The columns whose room the records' bytes bound closely: decoded with the parse up to :data:`FUSED_BYTES`.
FUSED_COLUMNS = frozenset({"body", "msgId", "bornHost", "storeHost"})
#: The most record bytes one fused parse and decode takes (more, from damaged sizes, is parsed alone first).
FUSED_BYTES = 256 << 20
#: The most record bytes one fused parse and decode of text columns (topic, properties and what is read out of
#: them) takes: each text column's room is the records' bytes, of which it fills a few per record (the pages past
#: what it writes are never touched, but the pool holds them while the batch lives). Larger batches are parsed
#: first and their text decoded into buffers of the exact sizes.
FUSED_TEXT_BYTES = 32 << 20


def parse_and_decode(buf, positions: np.ndarray, columns, fixed=None, crc_mode: int = 0,
                     record_bytes: Optional[int] = None) -> RecordBatchFields:
    """:func:`.codec.parse_records` of the records at ``positions``, with the variable-length columns a batch of
    ``columns`` needs decoded in the same native pass (each record's bytes read once, while in the cache) into
    the result's ``decoded``; a record that fails a check has an empty row there.

    ``record_bytes`` bounds the records' bytes (the sum of their sizes; None: the span of ascending positions)
    and sizes each column's room. Columns of text read out of the records (topic, properties) are decoded here up
    to :data:`FUSED_TEXT_BYTES` of records (their room is the records' bytes each), the others up to
    :data:`FUSED_BYTES`; past that, or without a bound, or when ill-formed text outgrows its room, the records are
    parsed alone (``decoded`` None: the batch decodes them, sized exactly)."""
    fields, _ = _fused(buf, positions, columns, fixed, crc_mode, record_bytes, None)
    return fields


def parse_and_decode_kept(buf, positions: np.ndarray, columns, fixed, test: QueueTest) -> tuple:
    """``(fields, keep)``: :func:`parse_and_decode` of the records at ``positions`` (ascending) that ``test``
    keeps. ``fields`` describes every record (check ``fields.valid``: a record that failed a check is not kept),
    ``keep`` the kept records' rows in it, and ``fields.decoded``, when the decode was fused, holds the kept
    records' columns only (set it on ``fields.take(keep)``); else it is None and a batch of the kept records
    decodes them."""
    fields, kept = _fused(buf, positions, columns, fixed, 0, None, test)
    if kept is None:  # parsed alone
        kept = test.keeps(buf, fields) & fields.valid
    return fields, np.flatnonzero(kept)


def _fused(buf, positions, columns, fixed, crc_mode, record_bytes, test: Optional[QueueTest]):
    """(fields, kept mask or None) of :func:`parse_and_decode` (no ``test``) or :func:`parse_and_decode_kept`;
    the mask is None when the records were parsed alone."""
    wanted = decoded_columns_for(columns)
    pos = np.require(positions, dtype=np.int64, requirements=["C", "A"])
    n = len(pos)
    buf = native_bytes(buf)
    if record_bytes is None and n:
        record_bytes = _ascending_span(buf, pos)
    limit = FUSED_BYTES if wanted <= FUSED_COLUMNS else FUSED_TEXT_BYTES
    if not wanted or not n or record_bytes is None or not 0 <= record_bytes <= limit:
        return parse_records(buf, pos, fixed, crc_mode), None
    check_fixed(fixed)
    header, problem = header_outputs(n)
    topic_room, props_room = TEXT_ROOMS.rooms(n, record_bytes)
    outputs = _DecodeOutputs(n, wanted, topic_room, record_bytes, props_room)
    kept = None if test is None else np.empty(n, dtype=np.uint8)
    report = _native.decode_records(buf, pos, header, problem, crc_mode, outputs.views(),
                                    None if test is None else test.native, kept)
    if report[0] < 0:  # a text column outgrew its room: parse alone, the batch decodes exactly
        TEXT_ROOMS.forget()
        return parse_records(buf, pos, fixed, crc_mode), None
    fields = fields_of(pos, header, problem, fixed)
    TEXT_ROOMS.saw(n, int(fields.topic_len.sum()), int(fields.props_len.sum()))
    fields.decoded = outputs.arrays(report[1], wanted, report[2:])
    return fields, None if kept is None else kept.view(bool)


class TextRooms:
    """The room a fused decode gives the text columns, learnt from the batches before.

    Their bytes are not known before the records are parsed; the records' bytes bound each of them (a text
    column's values are parts of the topic or the properties, which grow by a third at most when ill-formed),
    but a store's text takes a small, steady share of its records (a topic and a few properties beside
    kilobytes of body): rooms of the records' bytes would make a batch's memory several times its records'. So
    the rooms follow the topic and properties bytes a record of the last batch had on average (twice that, and
    :data:`SLACK` bytes a record); a batch whose text outgrows them is parsed alone and decoded exactly, and the
    next one gets the records' bytes again."""

    SLACK = 64

    def __init__(self):
        self.topic: Optional[int] = None  # bytes a record of the last batch had on average
        self.props: Optional[int] = None

    def rooms(self, n: int, record_bytes: int) -> tuple[int, int]:
        """The topic's and each properties column's room for ``n`` records of ``record_bytes``."""
        topic, props = self.topic, self.props
        if topic is None or props is None:
            return record_bytes, record_bytes
        return (min(record_bytes, n * (2 * topic + self.SLACK)), min(record_bytes, n * (2 * props + self.SLACK)))

    def saw(self, n: int, topic_bytes: int, props_bytes: int) -> None:
        """A batch of ``n`` records with ``topic_bytes`` and ``props_bytes`` of text was decoded."""
        self.topic = max(0, -(-topic_bytes // max(n, 1)))
        self.props = max(0, -(-props_bytes // max(n, 1)))

    def forget(self) -> None:
        """The next batch gets rooms of its records' bytes."""
        self.topic = self.props = None


#: The rooms of this process's fused decodes.
TEXT_ROOMS = TextRooms()


def _ascending_span(buf: np.ndarray, pos: np.ndarray) -> Optional[int]:
    """The bytes from the first record's start to the last one's end (its TOTALSIZE, clipped to ``buf``) when
    ``pos`` ascends, else None."""
    if len(pos) > 1 and not (pos[1:] > pos[:-1]).all():
        return None
    first, last = int(pos[0]), int(pos[-1])
    if first < 0 or last + 4 > len(buf):
        return None
    size = int.from_bytes(buf[last:last + 4].tobytes(), "big", signed=True)
    return last - first + min(max(size, 0), len(buf) - last)


def build_batch(buf: np.ndarray, fields: RecordBatchFields, columns=COLUMNS, where: str = "") -> pa.RecordBatch:
    """One ``RecordBatch`` of ``columns`` for the (valid) records described by ``fields``."""
    from ...errors import CorruptRecordError

    wanted = set(columns)
    decoded = decoded_columns_for(wanted)
    if fields.decoded is not None and decoded <= fields.decoded.keys():
        out: dict[str, pa.Array] = dict(fields.decoded)
    else:
        out = decode_columns(buf, fields, decoded, where)
    if "rawBody" in wanted:
        out["rawBody"] = out["body"]
    if "body" in wanted:
        compressed = (fields.sysflag & L.COMPRESSED_FLAG) != 0
        if compressed.any():
            body = out["body"]
            rows = np.flatnonzero(compressed)
            plain = []
            for i in rows:
                try:
                    plain.append(decompress_body(body[int(i)].as_py(), int(fields.sysflag[i])))
                except Exception as e:  # zlib.error, lz4/zstd errors: all mean the same to the reader
                    raise CorruptRecordError(
                        f"compressed body (sysflag 0x{int(fields.sysflag[i]):x}) does not decompress: {e}",
                        where, int(fields.position[i])) from e
            out["body"] = pc.replace_with_mask(body, pa.array(compressed), pa.array(plain, type=pa.binary()))
    for name in columns:
        if name not in out:
            out[name] = _primitive(_NUMERIC[name](fields), FIELD_TYPES[name])
    return pa.RecordBatch.from_arrays([out[c] for c in columns], schema=arrow_schema(columns))


#: The optional fixed header fields (codec names) each column is built from.
_FIXED_OF = {
    "queueId": "queue_id", "queueOffset": "queue_offset", "commitLogOffset": "phy_offset", "msgId": "phy_offset",
    "bornTimestamp": "born_ts", "storeTimestamp": "store_ts", "flag": "flag", "reconsumeTimes": "reconsume",
    "bodyCRC": "body_crc", "preparedTransactionOffset": "prepared",
}


def fixed_fields_for(columns) -> tuple[str, ...]:
    """The optional fixed fields to parse for ``columns`` (``CommitLog.read_fields`` adds the stored body CRC
    when it verifies bodies)."""
    return tuple(sorted({_FIXED_OF[c] for c in columns if c in _FIXED_OF}))


def _primitive(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """An Arrow array of ``kind`` over the native-endian ``values`` of its width, without a copy."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])


_NUMERIC = {
    "queueId": lambda f: f.queue_id.astype(np.int32),
    "queueOffset": lambda f: f.queue_offset,
    "commitLogOffset": lambda f: f.phy_offset,
    "storeSize": lambda f: f.total_size.astype(np.int32),
    "bornTimestamp": lambda f: f.born_timestamp,
    "storeTimestamp": lambda f: f.store_timestamp,
    "sysFlag": lambda f: f.sysflag.astype(np.int32),
    "flag": lambda f: f.flag.astype(np.int32),
    "reconsumeTimes": lambda f: f.reconsume_times.astype(np.int32),
    "bodyCRC": lambda f: f.body_crc.astype(np.int32),
    "preparedTransactionOffset": lambda f: f.prepared_offset,
}
