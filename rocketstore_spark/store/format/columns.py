"""Arrow columns from parsed commit-log records, built with native, numpy and Arrow kernels (no per-row objects).

Variable-length fields are gathered straight out of the memory-mapped file by the native kernel into Arrow's
offset and data buffers, which Arrow wraps without a copy.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import _native
from . import layout as L
from .codec import RecordBatchFields, native_bytes

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


def _formatted(kernel, n: int, width: int, *args) -> pa.Array:
    """A ``string`` array of ``n`` rows that ``kernel`` formats into Arrow buffers (at most ``width`` bytes a row)."""
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(n * width, dtype=np.uint8)
    used = kernel(*args, offsets, data)
    if used < 0:
        from ...errors import CorruptRecordError

        raise CorruptRecordError("a host field runs outside the buffer", None, int(args[1][-used - 1]))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data[:used])])


def _int64(values: np.ndarray) -> np.ndarray:
    return np.require(values, dtype=np.int64, requirements=["C", "A"])


def host_strings(buf: np.ndarray, host_pos: np.ndarray, is_v6: np.ndarray) -> pa.Array:
    """Hosts as Java prints them: ``a.b.c.d:port`` and ``[x:x:x:x:x:x:x:x]:port`` (groups unpadded)."""
    return _formatted(_native.host_strings, len(host_pos), _native.MAX_HOST_TEXT, native_bytes(buf),
                      _int64(host_pos), np.asarray(is_v6, dtype=np.int64), 1)


def msg_ids(buf: np.ndarray, fields: RecordBatchFields) -> pa.Array:
    """offsetMsgId per record: uppercase hex of store address ‖ port ‖ physical offset (32 or 56 chars)."""
    return _formatted(_native.msg_ids, len(fields), _native.MAX_MSG_ID_TEXT, native_bytes(buf),
                      _int64(fields.store_host_pos), _int64(fields.sysflag), _int64(fields.phy_offset))


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


def build_batch(buf: np.ndarray, fields: RecordBatchFields, columns=COLUMNS, where: str = "") -> pa.RecordBatch:
    """One ``RecordBatch`` of ``columns`` for the (valid) records described by ``fields``."""
    from ...errors import CorruptRecordError

    out: dict[str, pa.Array] = {}
    wanted = set(columns)
    props_map = None
    if wanted & {"properties", "propertiesString"}:
        props_str = to_strings(view_array(buf, fields.props_pos, fields.props_len, pa.binary()))
        if "propertiesString" in wanted:
            out["propertiesString"] = props_str
        if "properties" in wanted:
            props_map = parse_properties(props_str)

    def one_property(name):
        # found in the record bytes even with the map at hand: one native pass beats a lookup in the map
        return property_of(buf, fields.props_pos, fields.props_len, name)
    for name in columns:
        if name in out:
            continue
        if name == "topic":
            out[name] = to_strings(view_array(buf, fields.topic_pos, fields.topic_len, pa.binary()))
        elif name in ("body", "rawBody"):
            body = view_array(buf, fields.body_pos, fields.body_len, pa.binary())
            compressed = (fields.sysflag & L.COMPRESSED_FLAG) != 0
            if name == "body" and compressed.any():
                rows = np.flatnonzero(compressed)
                plain = []
                for i in rows:
                    try:
                        plain.append(decompress_body(body[int(i)].as_py(), int(fields.sysflag[i])))
                    except Exception as e:  # zlib.error, lz4/zstd errors: all mean the same to the reader
                        raise CorruptRecordError(
                            f"compressed body (sysflag 0x{int(fields.sysflag[i]):x}) does not decompress: {e}",
                            where, int(fields.position[i])) from e
                body = pc.replace_with_mask(body, pa.array(compressed), pa.array(plain, type=pa.binary()))
            out[name] = body
        elif name == "properties":
            out[name] = props_map
        elif name == "tags":
            out[name] = one_property(L.PROPERTY_TAGS)
        elif name == "uniqKey":
            out[name] = one_property(L.PROPERTY_UNIQ_KEY)
        elif name == "keys":
            out[name] = split_keys(one_property(L.PROPERTY_KEYS))
        elif name == "msgId":
            out[name] = msg_ids(buf, fields)
        elif name in ("bornHost", "storeHost"):
            pos = fields.born_host_pos if name == "bornHost" else fields.store_host_pos
            bit = L.BORNHOST_V6_FLAG if name == "bornHost" else L.STOREHOSTADDRESS_V6_FLAG
            out[name] = host_strings(buf, pos, (fields.sysflag & bit) != 0)
        else:
            out[name] = pa.array(_NUMERIC[name](fields), type=FIELD_TYPES[name])
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
