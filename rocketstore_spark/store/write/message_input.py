"""Turning a ``pyarrow.Table`` of messages into checked, fully resolved columns for the encoder.

Accepted columns are the store layer's (``COLUMNS``) plus the raw ones (``rawBody``, ``propertiesString``).
``body`` (or ``rawBody``) and ``topic`` are required; everything else has RocketMQ's defaults: queue 0, store
time = now, born time = store time, hosts from the writer, a generated UNIQ_KEY. Columns win over the
properties map for TAGS, KEYS and UNIQ_KEY; ``propertiesString`` is written verbatim (byte-exact copies).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import MessageValidationError
from ..format import layout as L
from ..format.columns import FIELD_TYPES, parse_properties, property_values, split_keys
from ..format.encoder import (
    EncodeInput,
    UniqKeyFactory,
    binary_lengths,
    compress_body,
    join_properties,
    serialize_properties,
    value_offsets,
)

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # TopicValidator.VALID_CHAR_BIT_MAP characters
IGNORED_COLUMNS = ("msgId", "commitLogOffset", "storeSize")  # always derived from where a record lands
OVERRIDDEN = {"tags": L.PROPERTY_TAGS, "keys": L.PROPERTY_KEYS, "uniqKey": L.PROPERTY_UNIQ_KEY}


@dataclass
class PreparedMessages:
    """Encoder input plus what dispatch needs (topic per row, tags, keys, uniq keys, given queue offsets)."""

    enc: EncodeInput
    topic_codes: pa.DictionaryArray  # enc.topic dictionary-encoded (distinct topics in order of appearance)
    tags: pa.Array
    keys: pa.ListArray
    uniq_key: pa.Array
    delay_level: pa.Array
    given_queue_offset: np.ndarray | None


def _column(table: pa.Table, name: str):
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):  # one chunk (Spark's batches) needs no copy
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _ints(table: pa.Table, name: str, default: int, dtype=np.int64) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, default, dtype=dtype)
    col = _column(table, name)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
    try:
        return np.asarray(pc.fill_null(col.cast(pa.int64()), default), dtype=dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise MessageValidationError(f"column {name!r} must be integral, found type {col.type}") from e


def _hosts(table: pa.Table, name: str, default: str):
    """(n, 16) address bytes, ports and IPv6 mask from 'a.b.c.d:port' / '[v6]:port' strings."""
    n = table.num_rows
    if name not in table.column_names and n:  # every row has the writer's host: parsed once, shared by all
        packed, port_no, v6 = _parse_host(name, default)
        return (np.broadcast_to(np.frombuffer(packed, dtype=np.uint8), (n, 16)), np.full(n, port_no, np.int64),
                np.full(n, v6, dtype=bool))
    col = _column(table, name) if name in table.column_names else pa.nulls(n, pa.string())
    encoded = pc.dictionary_encode(pc.fill_null(col.cast(pa.string()), default))
    parsed = [_parse_host(name, text) for text in encoded.dictionary.to_pylist()]
    idx = np.asarray(encoded.indices, dtype=np.int64)
    addr = np.frombuffer(b"".join(p[0] for p in parsed), dtype=np.uint8).reshape(-1, 16)[idx]
    ports = np.array([p[1] for p in parsed], dtype=np.int64)[idx]
    v6 = np.array([p[2] for p in parsed], dtype=bool)[idx]
    return addr, ports, v6


def _parse_host(name: str, text: str) -> tuple[bytes, int, bool]:
    """'a.b.c.d:port' or '[v6]:port' → (16 address bytes, zero-padded; port; is IPv6)."""
    host, _, port = text.rpartition(":")
    try:
        packed = ipaddress.ip_address(host.strip("[]")).packed
        port_no = int(port)
        if not 0 <= port_no <= 0xFFFF:
            raise ValueError("port out of range")
    except ValueError as e:
        raise MessageValidationError(
            f"column {name!r}: expected 'a.b.c.d:port' or '[ipv6]:port', found {text!r}") from e
    return packed.ljust(16, b"\0"), port_no, len(packed) == 16


def validate_topics(topics: pa.Array) -> None:
    """RocketMQ's topic rules: non-empty, ``[%|a-zA-Z0-9_-]`` only (so no path separators or '..'),
    at most 255 bytes (over 127 needs v2 records, as for long retry topics)."""
    for topic in pc.unique(topics).to_pylist():
        problem = _topic_problem(topic)
        if problem:
            raise MessageValidationError(problem)


@functools.lru_cache(maxsize=8192)
def _topic_problem(topic: str | None) -> str | None:
    """Why ``topic`` breaks the rules, None when it is valid (remembered: batch after batch has the same
    topics)."""
    if topic is None or topic == "":
        return "topic is required: found a null or empty topic"
    if not TOPIC_PATTERN.match(topic):
        return (f"invalid topic {topic!r}: RocketMQ topics may contain only letters, digits, '%', '|', '_' "
                "and '-' (no path separators or '..')")
    if len(topic.encode("utf-8")) > L.MAX_TOPIC_LENGTH:
        return f"topic {topic[:40]!r}... is {len(topic)} characters; the store allows at most {L.MAX_TOPIC_LENGTH}"
    return None


def build_properties_known(table: pa.Table, uniq_factory: UniqKeyFactory, now_ms: int):
    """The serialised properties of each row, and — when they can be known without parsing — the values the
    broker's parser will find in them: ``(text, {property name: values} or None)``.

    ``propertiesString`` (when given and not null) is used verbatim. Otherwise the ``properties`` map is
    written minus the names that columns override, then TAGS, KEYS and UNIQ_KEY from their columns, and a
    generated UNIQ_KEY for rows that have none. The values are known when every pair came from a column (no
    map, no verbatim string) and no value contains a separator, which a count of separators proves.
    """
    n = table.num_rows
    names = table.column_names
    parts = []  # the map's pairs, serialised (no map: nothing to serialise)
    if "properties" in names:
        props = _column(table, "properties")
        if not pa.types.is_map(props.type):
            raise MessageValidationError(f"column 'properties' must be map<string,string>, found {props.type}")
        parts.append(serialize_properties(_without(props, [OVERRIDDEN[c] for c in OVERRIDDEN if c in names])))
    from_columns: dict[str, pa.Array] = {}  # property name → the column values written as its pairs
    if "tags" in names:
        from_columns[L.PROPERTY_TAGS] = _column(table, "tags").cast(pa.string())
    if "keys" in names:
        keys_col = _column(table, "keys")
        if pa.types.is_list(keys_col.type) or pa.types.is_large_list(keys_col.type):
            # Spark hands lists over with non-null elements, which binary_join has no kernel for
            keys_text = pc.binary_join(keys_col.cast(pa.list_(pa.string())), L.KEY_SEPARATOR)
        else:
            keys_text = keys_col.cast(pa.string())
        keys_text = pc.if_else(pc.equal(pc.fill_null(keys_text, ""), ""), pa.scalar(None, pa.string()), keys_text)
        from_columns[L.PROPERTY_KEYS] = keys_text
    if "uniqKey" in names:
        uniq = _column(table, "uniqKey").cast(pa.string())
    elif "properties" in names:
        uniq = property_values(props, L.PROPERTY_UNIQ_KEY)
    else:
        uniq = pa.nulls(n, pa.string())
    # a uniqKey column (even with nulls, as read back from a store) is taken as it is; only tables without
    # one get keys generated, like a producer that sets UNIQ_KEY on send
    missing = np.asarray(pc.is_null(uniq)) & ("uniqKey" not in names)
    if "propertiesString" in names:
        missing &= np.asarray(pc.is_null(_column(table, "propertiesString")))
    if missing.all() and n:  # no row has a key (the usual table): the new keys are the whole column
        uniq = generated = uniq_factory.make(n, now_ms)
    elif missing.any():
        mask = pa.array(missing)
        uniq = pc.replace_with_mask(uniq.cast(pa.string()), mask, uniq_factory.make(int(missing.sum()), now_ms))
        generated = pc.if_else(mask, uniq, pa.scalar(None, pa.string()))
    if "uniqKey" in names:
        from_columns[L.PROPERTY_UNIQ_KEY] = uniq
    elif missing.any():
        from_columns[L.PROPERTY_UNIQ_KEY] = generated
    text = join_properties(n, from_columns, parts[0] if parts else None)
    if "propertiesString" in names:
        given = _column(table, "propertiesString").cast(pa.string())
        return pc.if_else(pc.is_valid(given), given, text), None
    if "properties" in names:
        return text, None
    return text, _known_values(text, from_columns)


def _without(props: pa.MapArray, names: list) -> pa.MapArray:
    """``props`` minus the pairs named in ``names``."""
    n = len(props)
    offsets = np.asarray(props.offsets)
    # ``keys``/``items`` are the whole child arrays, also of a slice (a batch cut from a larger one): take the
    # pairs the slice's offsets span
    first, last = int(offsets[0]), int(offsets[-1])
    keys, items = props.keys.slice(first, last - first), props.items.slice(first, last - first)
    keep = ~np.asarray(pc.fill_null(pc.is_in(keys, value_set=pa.array(names, pa.string())), False))
    rows = np.repeat(np.arange(n), np.diff(offsets))[keep]
    new_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=new_offsets[1:])
    return pa.MapArray.from_arrays(pa.array(new_offsets), keys.filter(pa.array(keep)), items.filter(pa.array(keep)))


def _known_values(text: pa.Array, from_columns: dict) -> dict | None:
    """What ``string2messageProperties`` finds in ``text`` built only from ``from_columns``' pairs: each value
    as written, empty ones dropped — provided no value holds a separator (then there are exactly as many of
    each separator as pairs written), else None."""
    pairs = sum(len(v) - v.null_count for v in from_columns.values())
    data = text.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    offsets = value_offsets(text)
    raw = raw[offsets[0]:offsets[-1]]
    if (np.count_nonzero(raw == _PAIR_END) != pairs or np.count_nonzero(raw == _NAME_END) != pairs):
        return None
    return {name: _empty_as_null(values) for name, values in from_columns.items()}


def _empty_as_null(values: pa.Array) -> pa.Array:
    """``values`` with empty strings null (the parser drops empty values); the column itself when it has none,
    which its offsets show without a pass over the strings."""
    empty = np.diff(value_offsets(values)) == 0
    if values.null_count:
        empty &= np.asarray(pc.is_valid(values))
    if not empty.any():
        return values
    return pc.if_else(pa.array(empty), pa.scalar(None, pa.string()), values)


_PAIR_END = ord(L.PROPERTY_SEPARATOR)
_NAME_END = ord(L.NAME_VALUE_SEPARATOR)


def prepare_messages(table: pa.Table, *, store_host: str, uniq_factory: UniqKeyFactory,
                     max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, now_ms: int | None = None
                     ) -> PreparedMessages:
    """Check ``table`` and resolve every field of its messages (see the module docstring)."""
    names = table.column_names
    unknown = [c for c in names if c not in FIELD_TYPES]
    if unknown:
        raise MessageValidationError(f"unknown column(s) {unknown}; expected columns among {list(FIELD_TYPES)}")
    if "topic" not in names:
        raise MessageValidationError("column 'topic' is required")
    if "body" not in names and "rawBody" not in names:
        raise MessageValidationError("column 'body' is required (binary or string)")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    n = table.num_rows
    topic = _column(table, "topic").cast(pa.string())
    # encoded once for both checking and dispatch; nulls encoded as a value so the distinct topics, in order,
    # are exactly pc.unique's
    topic_codes = pc.dictionary_encode(topic, null_encoding="encode")
    validate_topics(topic_codes.dictionary)
    sysflag = _ints(table, "sysFlag", 0) & ~(L.BORNHOST_V6_FLAG | L.STOREHOSTADDRESS_V6_FLAG)
    if "rawBody" in names:
        body = _column(table, "rawBody").cast(pa.binary())
    else:
        body = table.column("body")  # a merged table's bodies may stay in chunks: the encoder takes them so
        if isinstance(body, pa.ChunkedArray) and body.num_chunks == 1:
            body = body.chunk(0)
        if not (pa.types.is_binary(body.type) or pa.types.is_string(body.type) or
                pa.types.is_large_binary(body.type) or pa.types.is_large_string(body.type)):
            raise MessageValidationError(f"column 'body' must be binary or string, found {body.type}")
        body = body.cast(pa.binary())
        compressed = np.flatnonzero(sysflag & L.COMPRESSED_FLAG)
        if len(compressed):
            if isinstance(body, pa.ChunkedArray):
                body = body.combine_chunks()
            packed = [compress_body(body[int(i)].as_py() or b"", int(sysflag[i])) for i in compressed]
            mask = np.zeros(n, dtype=bool)
            mask[compressed] = True
            body = pc.replace_with_mask(body, pa.array(mask), pa.array(packed, pa.binary()))
    if body.null_count:
        row = int(np.flatnonzero(np.asarray(pc.is_null(body)))[0])
        raise MessageValidationError(f"row {row}: body is null; every message needs a body (may be empty)")
    body_len = binary_lengths(body)
    if (body_len > max_message_size).any():
        row = int(np.flatnonzero(body_len > max_message_size)[0])
        raise MessageValidationError(f"row {row}: body is {int(body_len[row])} bytes; the store accepts at most "
                                     f"{max_message_size} (maxMessageSize)")
    props, known = build_properties_known(table, uniq_factory, now_ms)
    props_len = binary_lengths(props)
    if (props_len > L.MAX_PROPERTIES_LENGTH).any():
        row = int(np.flatnonzero(props_len > L.MAX_PROPERTIES_LENGTH)[0])
        raise MessageValidationError(f"row {row}: properties are {int(props_len[row])} bytes once serialised; "
                                     f"RocketMQ allows at most {L.MAX_PROPERTIES_LENGTH}")
    store_addr, store_port, store_v6 = _hosts(table, "storeHost", store_host)
    born_addr, born_port, born_v6 = _hosts(table, "bornHost", store_host)
    sysflag = sysflag | np.where(born_v6, L.BORNHOST_V6_FLAG, 0) | np.where(store_v6, L.STOREHOSTADDRESS_V6_FLAG, 0)
    queue_id = _ints(table, "queueId", 0)
    if (queue_id < 0).any() or (queue_id > 0x7FFFFFFF).any():
        raise MessageValidationError(f"queueId must be a non-negative int, found {int(queue_id.min())}")
    store_ts = _ints(table, "storeTimestamp", now_ms)
    born_ts = _ints(table, "bornTimestamp", -1)
    born_ts = np.where(born_ts < 0, store_ts, born_ts)
    enc = EncodeInput(
        topic=topic, queue_id=queue_id, flag=_ints(table, "flag", 0),
        queue_offset=_ints(table, "queueOffset", 0), sysflag=sysflag, born_timestamp=born_ts,
        born_addr=born_addr, born_port=born_port, store_timestamp=store_ts, store_addr=store_addr,
        store_port=store_port, reconsume_times=_ints(table, "reconsumeTimes", 0),
        prepared_offset=_ints(table, "preparedTransactionOffset", 0), body=body, properties=props)
    key_tokens = None
    if known is None:  # dispatch reads what is stored, exactly as the broker does
        parsed = parse_properties(props)
        known = {name: property_values(parsed, name) for name in
                 (L.PROPERTY_TAGS, L.PROPERTY_KEYS, L.PROPERTY_UNIQ_KEY, L.PROPERTY_DELAY_TIME_LEVEL)}
    elif "keys" in names:  # KEYS was joined from the column: its tokens may be the column's lists as they are
        key_tokens = _listed_key_tokens(_column(table, "keys"))
    none = pa.nulls(n, pa.string())
    return PreparedMessages(
        enc=enc, topic_codes=topic_codes, tags=known.get(L.PROPERTY_TAGS, none),
        keys=key_tokens if key_tokens is not None else split_keys(known.get(L.PROPERTY_KEYS, none)),
        uniq_key=known.get(L.PROPERTY_UNIQ_KEY, none),
        delay_level=known.get(L.PROPERTY_DELAY_TIME_LEVEL, none),
        given_queue_offset=_ints(table, "queueOffset", -1) if "queueOffset" in names else None)


def _listed_key_tokens(keys: pa.Array) -> pa.ListArray | None:
    """A ``keys`` list column when it is exactly what splitting its joined KEYS text gives back (no null list
    or element, no empty element, no element holding the separator), else None: the split is then skipped."""
    if not pa.types.is_list(keys.type) or keys.null_count:
        return None
    tokens = keys.cast(FIELD_TYPES["keys"])
    elements = tokens.flatten()
    if elements.null_count or not (binary_lengths(elements) > 0).all():
        return None
    offsets = value_offsets(elements)
    data = elements.buffers()[2]
    text = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]] if data is not None else np.zeros(0, np.uint8)
    return None if (text == _KEY_SEPARATOR).any() else tokens


_KEY_SEPARATOR = ord(L.KEY_SEPARATOR)
