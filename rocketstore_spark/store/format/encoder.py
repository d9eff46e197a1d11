"""Encoding commit-log records, many at a time (``MessageExtEncoder.encode`` for whole columns).

The caller supplies fully resolved fields (hosts as bytes, properties serialised, bodies as stored) and the
physical offsets the records will occupy; :func:`encode_records` returns one Arrow ``binary`` array whose
data buffer is the records laid end to end. Arrow's ``binary_join_element_wise`` does the byte copying.
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import layout as L
from .codec import body_crc32

MAX_HEADER = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 20 + 8 + 20 + 4 + 8 + 4  # fixed part incl. BODYLEN, v6 hosts


@dataclass
class EncodeInput:
    """Column arrays for n records; hosts are (n, 16) address bytes + a v6 mask + ports."""

    topic: pa.Array  # string
    queue_id: np.ndarray
    flag: np.ndarray
    queue_offset: np.ndarray
    sysflag: np.ndarray  # IPv6 bits already set from the hosts
    born_timestamp: np.ndarray
    born_addr: np.ndarray
    born_port: np.ndarray
    store_timestamp: np.ndarray
    store_addr: np.ndarray
    store_port: np.ndarray
    reconsume_times: np.ndarray
    prepared_offset: np.ndarray
    body: pa.Array  # binary, as stored (compressed when the sysflag says so)
    properties: pa.Array  # string, serialised

    def __len__(self) -> int:
        return len(self.queue_id)


def binary_lengths(arr: pa.Array) -> np.ndarray:
    """Byte length of each value (0 for nulls)."""
    return np.asarray(pc.fill_null(pc.binary_length(arr), 0), dtype=np.int64)


def topic_magic(topic_lengths: np.ndarray) -> np.ndarray:
    """v2 records for topics longer than 127 (``autoMessageVersionOnTopicLen``), v1 otherwise."""
    return np.where(topic_lengths > L.MAX_TOPIC_LENGTH_V1, L.MESSAGE_MAGIC_CODE_V2, L.MESSAGE_MAGIC_CODE)


def record_lengths(enc: EncodeInput) -> np.ndarray:
    """``calMsgLength`` per record."""
    return _record_lengths(enc.sysflag, binary_lengths(enc.topic), binary_lengths(enc.body),
                           binary_lengths(enc.properties))


def _record_lengths(sysflag: np.ndarray, topic_len: np.ndarray, body_len: np.ndarray, props_len: np.ndarray):
    v6_born = (sysflag & L.BORNHOST_V6_FLAG) != 0
    v6_store = (sysflag & L.STOREHOSTADDRESS_V6_FLAG) != 0
    return (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + np.where(v6_born, 20, 8) + 8 + np.where(v6_store, 20, 8)
            + 4 + 8 + 4 + body_len + np.where(topic_len > L.MAX_TOPIC_LENGTH_V1, 2, 1)
            + topic_len + 2 + props_len)


def _put(matrix: np.ndarray, col: np.ndarray, values: np.ndarray, width: int) -> None:
    """Write big-endian ``values`` of ``width`` bytes at per-row column ``col`` of ``matrix``."""
    raw = values.astype(_BE[width]).view(np.uint8).reshape(len(values), width)
    rows = np.arange(len(values))[:, None]
    matrix[rows, col[:, None] + np.arange(width)] = raw


_BE = {1: ">i1", 2: ">i2", 4: ">i4", 8: ">i8"}


def _variable_binary(matrix: np.ndarray, widths: np.ndarray) -> pa.Array:
    """Rows of ``matrix`` cut to ``widths`` bytes, as a binary array."""
    data = matrix[np.arange(matrix.shape[1]) < widths[:, None]]
    offsets = np.zeros(len(widths) + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(widths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed_width_binary(raw: np.ndarray) -> pa.Array:
    """Each row of the (n, width) byte matrix ``raw`` as one binary value (the matrix is the data buffer)."""
    n, width = raw.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(raw))])


def value_offsets(arr: pa.Array) -> np.ndarray:
    """The n + 1 value offsets of a binary/string array into its data buffer (slices respected)."""
    n = len(arr)
    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)


def body_crcs(body: pa.Array) -> np.ndarray:
    """``UtilAll.crc32`` of each stored body (the record's BODYCRC)."""
    offsets = value_offsets(body).tolist()
    data = body.buffers()[2]
    mv = memoryview(data) if data is not None else memoryview(b"")
    crcs = [_crc32(mv[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    return np.array(crcs, dtype=np.int64) & 0x7FFFFFFF


try:  # ISA-L's CRC-32 is the same polynomial as zlib's (java.util.zip.CRC32), about 2.5x faster per body
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives identical values
    _crc32 = zlib.crc32


#: TOTALSIZE … BODYLEN of a record whose hosts are both IPv4, as one numpy record type (big-endian, packed).
V4_RECORD_HEAD = np.dtype([
    ("total", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
    ("queue_offset", ">i8"), ("phy_offset", ">i8"), ("sysflag", ">i4"), ("born_ts", ">i8"),
    ("born_addr", "u1", (4,)), ("born_port", ">i4"), ("store_ts", ">i8"), ("store_addr", "u1", (4,)),
    ("store_port", ">i4"), ("reconsume", ">i4"), ("prepared", ">i8"), ("body_len", ">i4"),
])
assert V4_RECORD_HEAD.itemsize == 88  # BODY starts at 88 when both hosts are IPv4


def _v4_heads(enc: EncodeInput, total, magic, crcs, phy_offsets, body_len) -> pa.Array:
    """The fixed parts of IPv4-only records, filled field by field as columns of a record array."""
    head = np.empty(len(enc), dtype=V4_RECORD_HEAD)
    for name, values in (("total", total), ("magic", magic), ("body_crc", crcs), ("queue_id", enc.queue_id),
                         ("flag", enc.flag), ("queue_offset", enc.queue_offset), ("phy_offset", phy_offsets),
                         ("sysflag", enc.sysflag), ("born_ts", enc.born_timestamp), ("born_port", enc.born_port),
                         ("store_ts", enc.store_timestamp), ("store_port", enc.store_port),
                         ("reconsume", enc.reconsume_times), ("prepared", enc.prepared_offset),
                         ("body_len", body_len)):
        head[name] = values
    head["born_addr"] = enc.born_addr[:, :4]
    head["store_addr"] = enc.store_addr[:, :4]
    return _fixed_width_binary(head.view(np.uint8).reshape(len(enc), V4_RECORD_HEAD.itemsize))


def encode_records(enc: EncodeInput, phy_offsets: np.ndarray) -> pa.Array:
    """The records' bytes, one binary value per record, for records placed at ``phy_offsets``."""
    n = len(enc)
    topic_len = binary_lengths(enc.topic)
    body_len = binary_lengths(enc.body)
    props_len = binary_lengths(enc.properties)
    total = _record_lengths(enc.sysflag, topic_len, body_len, props_len)
    if not (enc.sysflag & (L.BORNHOST_V6_FLAG | L.STOREHOSTADDRESS_V6_FLAG)).any():
        heads = _v4_heads(enc, total, topic_magic(topic_len), body_crcs(enc.body), phy_offsets, body_len)
    else:
        heads = _mixed_heads(enc, total, topic_len, phy_offsets, body_len)
    v2 = topic_len > L.MAX_TOPIC_LENGTH_V1
    if v2.any():
        tlen = np.zeros((n, 2), dtype=np.uint8)
        _put(tlen, np.zeros(n, dtype=np.int64), np.where(v2, topic_len, topic_len << 8), 2)  # v1: high byte alone
        topic_length_field = _variable_binary(tlen, np.where(v2, 2, 1))
    else:  # v1 records only: TOPICLEN is one byte, the length itself
        topic_length_field = _fixed_width_binary(topic_len.astype(np.uint8).reshape(n, 1))
    parts = [
        heads,
        enc.body.cast(pa.binary()),
        topic_length_field,
        enc.topic.cast(pa.binary()),
        _fixed_width_binary(props_len.astype(_BE[2]).view(np.uint8).reshape(n, 2)),  # PROPERTIESLENGTH
        enc.properties.cast(pa.binary()),
    ]
    out = pc.binary_join_element_wise(*parts, pa.scalar(b"", type=pa.binary()))
    produced = binary_lengths(out)
    if not np.array_equal(produced, total):  # an internal invariant: lengths follow calMsgLength
        raise AssertionError("encoded record lengths disagree with calMsgLength")
    return out


def _mixed_heads(enc: EncodeInput, total, topic_len, phy_offsets, body_len) -> pa.Array:
    """The fixed parts of records some of which have IPv6 hosts (variable widths), written byte-column-wise."""
    n = len(enc)
    head = np.zeros((n, MAX_HEADER), dtype=np.uint8)
    zero = np.zeros(n, dtype=np.int64)
    _put(head, zero, total, 4)
    _put(head, zero + 4, topic_magic(topic_len), 4)
    _put(head, zero + 8, body_crcs(enc.body), 4)
    _put(head, zero + 12, enc.queue_id, 4)
    _put(head, zero + 16, enc.flag, 4)
    _put(head, zero + 20, enc.queue_offset, 8)
    _put(head, zero + 28, phy_offsets, 8)
    _put(head, zero + 36, enc.sysflag, 4)
    _put(head, zero + 40, enc.born_timestamp, 8)
    born_v6 = (enc.sysflag & L.BORNHOST_V6_FLAG) != 0
    col = zero + 48
    _write_host(head, col, enc.born_addr, enc.born_port, born_v6)
    col = col + np.where(born_v6, 20, 8)
    _put(head, col, enc.store_timestamp, 8)
    col = col + 8
    store_v6 = (enc.sysflag & L.STOREHOSTADDRESS_V6_FLAG) != 0
    _write_host(head, col, enc.store_addr, enc.store_port, store_v6)
    col = col + np.where(store_v6, 20, 8)
    _put(head, col, enc.reconsume_times, 4)
    _put(head, col + 4, enc.prepared_offset, 8)
    _put(head, col + 12, body_len, 4)
    return _variable_binary(head, col + 16)


def _write_host(matrix, col, addr, port, is_v6) -> None:
    """Address bytes (4, or 16 for IPv6 rows) then the 4-byte port, at per-row column ``col``."""
    width = np.where(is_v6, 16, 4)
    for k in range(16):
        rows = np.flatnonzero(k < width)
        matrix[rows, col[rows] + k] = addr[rows, k]
    _put(matrix, col + width, port, 4)


# --- properties and ids ------------------------------------------------------------------------------------


def serialize_properties(props: pa.Array) -> pa.Array:
    """``MessageDecoder.messageProperties2String`` for a map column: ``name\\u0001value\\u0002`` per pair,
    pairs with a null value skipped, in the map's order."""
    n = len(props)
    if n == 0:
        return pa.array([], type=pa.string())
    offsets = np.asarray(props.offsets)
    # ``keys``/``items`` are the whole child arrays, also of a slice: only the pairs its offsets span count
    first, last = int(offsets[0]), int(offsets[-1])
    keys, values = props.keys.slice(first, last - first), props.items.slice(first, last - first)
    row_of = np.repeat(np.arange(n), np.diff(offsets))
    present = np.asarray(pc.is_valid(values))
    pair = pc.binary_join_element_wise(keys, pa.scalar(L.NAME_VALUE_SEPARATOR), values,
                                       pa.scalar(L.PROPERTY_SEPARATOR), pa.scalar(""))
    pair = pair.filter(pa.array(present))
    row_of = row_of[present]
    new_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(row_of, minlength=n), out=new_offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(new_offsets), pair), "")
    null_rows = np.asarray(pc.is_null(props)) if props.null_count else np.zeros(n, dtype=bool)
    joined = pc.fill_null(joined, "")
    return pc.if_else(pa.array(null_rows), pa.scalar(""), joined)


class UniqKeyFactory:
    """``MessageClientIDSetter``: UNIQ_KEYs laid out as IP(4) ‖ pid(2) ‖ classloader hash(4) ‖
    ms since the start of the month(4) ‖ counter(2), uppercase hex."""

    def __init__(self, ip: bytes = b"\x7f\x00\x00\x01"):
        self.prefix = ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + (id(self) & 0xFFFFFFFF).to_bytes(4, "big")
        self.counter = 0

    def make(self, count: int, now_ms: int | None = None) -> pa.Array:
        """``count`` new keys as a string array (built as one fixed-width byte matrix: no per-key strings)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        t = time.gmtime(now_ms / 1000)
        month_start = int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)
        since = (now_ms - month_start) & 0xFFFFFFFF
        head = np.frombuffer((self.prefix + since.to_bytes(4, "big")).hex().upper().encode(), dtype=np.uint8)
        counter = (self.counter + np.arange(count, dtype=np.int64)) & 0xFFFF
        width = len(head) + UNIQ_COUNTER_HEX_DIGITS
        matrix = np.empty((count, width), dtype=np.uint8)
        matrix[:, :len(head)] = head
        for digit in range(UNIQ_COUNTER_HEX_DIGITS):  # most significant nibble first
            nibble = (counter >> (4 * (UNIQ_COUNTER_HEX_DIGITS - 1 - digit))) & 0xF
            matrix[:, len(head) + digit] = _UPPER_HEX[nibble]
        self.counter += count
        offsets = np.arange(count + 1, dtype=np.int32) * width
        return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(matrix))


UNIQ_COUNTER_HEX_DIGITS = 4  # the 2-byte counter closing a UNIQ_KEY
_UPPER_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def compress_body(data: bytes, sysflag: int) -> bytes:
    """Compress a body exactly as RocketMQ's producer does for the codec in ``sysflag``, level 5
    (``compressLevel``); the bytes equal what Java writes, so re-encoded records keep their body CRC.

    ZLIB: ``Deflater`` stream. LZ4: lz4-java ``LZ4FrameOutputStream`` (4 MiB independent blocks, no sizes or
    checksums). ZSTD: zstd-jni ``ZstdOutputStream``: a flushed block, then the frame end on close.
    """
    kind = (sysflag & L.COMPRESSION_TYPE_MASK) >> L.COMPRESSION_TYPE_SHIFT
    if kind == L.COMPRESSION_LZ4:
        import lz4.frame

        compressor = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                                  content_checksum=False, auto_flush=True)
        return compressor.begin() + compressor.compress(data) + compressor.flush()
    if kind == L.COMPRESSION_ZSTD:
        import io

        import zstandard

        out = io.BytesIO()
        writer = zstandard.ZstdCompressor(level=COMPRESS_LEVEL, write_content_size=False).stream_writer(
            out, closefd=False, size=-1)
        writer.write(data)
        writer.flush(zstandard.FLUSH_BLOCK)
        writer.flush(zstandard.FLUSH_FRAME)
        return out.getvalue()
    return zlib.compress(data, COMPRESS_LEVEL)


COMPRESS_LEVEL = 5  # DefaultMQProducer.compressLevel (rocketmq.message.compressLevel)


__all__ = ["EncodeInput", "encode_records", "record_lengths", "serialize_properties", "UniqKeyFactory",
           "compress_body", "body_crc32", "binary_lengths"]
