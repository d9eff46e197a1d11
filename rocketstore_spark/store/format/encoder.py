"""Encoding commit-log records, many at a time (``MessageExtEncoder.encode`` for whole columns).

The caller supplies fully resolved fields (hosts as bytes, properties serialised, bodies as stored) and the
physical offsets the records will occupy; :func:`encode_records` hands the columns' Arrow buffers to the native
encoder (``_native.encode_records``, the body CRCs included), which lays the records end to end in one buffer.
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import _native
from ...errors import MessageValidationError, StoreFormatError
from . import layout as L
from .arrow_buffers import native_strings
from .codec import body_crc32


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
    body: pa.Array  # binary, as stored (compressed when the sysflag says so); may be chunked (see _pieces)
    properties: pa.Array  # string, serialised

    def __len__(self) -> int:
        return len(self.queue_id)


def binary_lengths(arr: pa.Array) -> np.ndarray:
    """Byte length of each value (0 for nulls)."""
    return np.asarray(pc.fill_null(pc.binary_length(arr), 0), dtype=np.int64)


def value_offsets(arr: pa.Array) -> np.ndarray:
    """The n + 1 value offsets of a binary/string array into its data buffer (slices respected)."""
    n = len(arr)
    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)


def _pieces(enc: EncodeInput) -> list[tuple[int, int, pa.Array]]:
    """The rows ``[lo, hi)`` of each chunk of the body column, with the chunk: a table merged from several
    batches keeps its bodies in the batches' buffers, and the kernels run once per chunk instead of the bodies
    being copied into one buffer first."""
    body = enc.body
    if not isinstance(body, pa.ChunkedArray):
        return [(0, len(enc), body)]
    if body.num_chunks == 0:
        return [(0, 0, pa.array([], pa.binary()))]
    pieces, lo = [], 0
    for chunk in body.chunks:
        pieces.append((lo, lo + len(chunk), chunk))
        lo += len(chunk)
    return pieces


class _KernelInputs:
    """The record kernels' arguments but the output for the rows of ``enc`` placed at ``phy_offsets``: each column
    is converted once, and a range of rows is then views of them (string columns, int64 columns, host
    addresses)."""

    def __init__(self, enc: EncodeInput, phy_offsets: np.ndarray):
        ints = {"queue_id": enc.queue_id, "flag": enc.flag, "queue_offset": enc.queue_offset,
                "phy_offset": phy_offsets, "sysflag": enc.sysflag, "born_timestamp": enc.born_timestamp,
                "born_port": enc.born_port, "store_timestamp": enc.store_timestamp, "store_port": enc.store_port,
                "reconsume_times": enc.reconsume_times, "prepared_offset": enc.prepared_offset}
        self._ints = [np.require(ints[name], dtype=np.int64, requirements=["C", "A"])
                      for name in _native.ENCODE_INT_COLUMNS]
        self._topic, self._properties = native_strings(enc.topic), native_strings(enc.properties)
        self._born, self._store = _addresses(enc.born_addr), _addresses(enc.store_addr)

    def rows(self, lo: int, hi: int, body: tuple, body_lo: int) -> tuple:
        """Rows ``[lo, hi)``, whose bodies are rows ``[lo - body_lo, hi - body_lo)`` of ``body`` (a chunk of the
        body column as :func:`~.arrow_buffers.native_strings` gives it)."""
        return (_rows(self._topic, lo, hi), _rows(body, lo - body_lo, hi - body_lo), _rows(self._properties, lo, hi),
                [column[lo:hi] for column in self._ints], self._born[lo * 16:hi * 16], self._store[lo * 16:hi * 16])


def _rows(strings: tuple, lo: int, hi: int) -> tuple:
    """Rows ``[lo, hi)`` of a string column's ``(offsets, data)``: the offsets point into the same data."""
    return strings[0][lo:hi + 1], strings[1]


def _addresses(addr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(addr, dtype=np.uint8).reshape(-1)


def _check_encoded(result: tuple[int, int], first_row: int = 0) -> None:
    """Raise for a row the record kernels could not encode (``first_row``: the row the kernel's rows start at)."""
    problem, row = result
    row += first_row
    if problem == _native.ENCODE_TOO_LONG:
        raise MessageValidationError(
            f"row {row}: the message does not fit a record: expected a topic of at most {L.MAX_TOPIC_LENGTH} bytes "
            f"and properties of at most {L.MAX_PROPERTIES_LENGTH} bytes once serialised; shorten them")
    if problem != _native.ENCODE_OK:
        raise MessageValidationError(f"row {row}: its column values lie outside their Arrow buffers; "
                                     "pass arrays pyarrow built or validated")


def record_lengths(enc: EncodeInput) -> np.ndarray:
    """``calMsgLength`` per record."""
    sizes = np.empty(len(enc), dtype=np.int64)
    inputs = _KernelInputs(enc, np.zeros(len(enc), dtype=np.int64))
    for lo, hi, body in _pieces(enc):
        _check_encoded(_native.record_sizes(*inputs.rows(lo, hi, native_strings(body), lo), sizes[lo:hi]), lo)
    return sizes


def encode_records(enc: EncodeInput, phy_offsets: np.ndarray, *, lengths: Optional[np.ndarray] = None,
                   scratch: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """The records of ``enc`` placed at ``phy_offsets``: ``(data, offsets)``, the records end to end (uint8) and
    the n + 1 int64 offsets of each record in ``data`` (the native encoder writes them, CRCs included).

    ``lengths`` are the records' sizes when the caller has them already (:func:`record_lengths`); with ``scratch``
    (uint8, large enough) ``data`` is the front of it, so that batch after batch writes into memory that is
    mapped already instead of faulting in fresh pages."""
    n = len(enc)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = record_lengths(enc) if lengths is None else lengths
    np.cumsum(offsets, out=offsets)
    total = int(offsets[-1])
    data = scratch[:total] if scratch is not None and len(scratch) >= total else np.empty(total, dtype=np.uint8)
    inputs = _KernelInputs(enc, phy_offsets)
    for lo, hi, body in _pieces(enc):
        out = data[int(offsets[lo]):int(offsets[hi])]
        _check_encoded(_native.encode_records(*inputs.rows(lo, hi, native_strings(body), lo), out), lo)
    return data, offsets


#: the record bytes :func:`encode_pieces` hands on at a time, and the alignment of the pieces in the commit log:
#: small enough to stay in the CPU's cache until they are written out (one large write of a buffer just encoded
#: was measured 2-4x slower per byte); a whole aligned 2 MiB has the page cache hold it as one large folio, which
#: the publisher then maps writable with a fraction of the work (measured: 28 ms against 58 ms per 600 MB written
#: in pieces of 2 MiB at arbitrary offsets, and a quarter less to unmap)
ENCODE_PIECE_BYTES = 2 * 1024 * 1024


def encode_pieces(enc: EncodeInput, phy_offsets: np.ndarray, offsets: np.ndarray, scratch: np.ndarray,
                  piece_bytes: int = ENCODE_PIECE_BYTES) -> Iterator[tuple[int, np.ndarray]]:
    """The records of ``enc`` placed at ``phy_offsets``, a few at a time: yields ``(at, data)``, record bytes that
    belong at commit-log offset ``at``, in ``scratch`` (uint8, reused: ``data`` is valid until the next piece).
    ``offsets`` are the n + 1 record offsets (:func:`record_offsets`).

    Pieces begin and end on multiples of ``piece_bytes`` of the commit log wherever the records run on: a record
    across a multiple is encoded with the piece before it, and its part past the multiple is kept at the front of
    ``scratch`` to begin the next piece. Only the first piece after a gap in ``phy_offsets`` (a commit-log file's
    BLANK end) and the last one before it, or before the end, are cut elsewhere. ``scratch`` must hold
    :func:`piece_scratch_size` bytes."""
    n = len(phy_offsets)
    if not n:
        return
    lengths = np.diff(offsets)
    gap_before = np.zeros(n + 1, dtype=bool)  # a row whose record does not follow the one before (or the end)
    gap_before[1:n] = phy_offsets[1:] != phy_offsets[:-1] + lengths[:-1]
    gap_before[n] = True
    runs_end = np.flatnonzero(gap_before[1:]) + 1  # the end row of each run of contiguous records
    inputs = _KernelInputs(enc, phy_offsets)
    carry = 0  # bytes at the front of scratch not handed on yet: they continue where the next row begins
    for lo_chunk, hi_chunk, chunk in _pieces(enc):
        body = native_strings(chunk)
        lo = lo_chunk
        while lo < hi_chunk:
            run_end = int(runs_end[np.searchsorted(runs_end, lo, side="right")])
            start = int(phy_offsets[lo])
            boundary = (start // piece_bytes + 1) * piece_bytes  # the piece's end: the next multiple past its start
            hi = int(np.searchsorted(offsets, offsets[lo] + (boundary - start), side="left"))
            hi = min(max(hi, lo + 1), hi_chunk, run_end)
            size = int(offsets[hi] - offsets[lo])
            out = scratch[carry:carry + size]
            _check_encoded(_native.encode_records(*inputs.rows(lo, hi, body, lo_chunk), out), lo)
            at = start - carry
            filled = carry + size
            if hi == run_end:  # a gap or the end follows: everything goes
                yield at, scratch[:filled]
                carry = 0
            else:
                cut = (at + filled) // piece_bytes * piece_bytes - at  # the last multiple inside
                if cut <= 0:  # none (the body column's chunk ended first): the next rows continue the piece
                    carry = filled
                else:
                    yield at, scratch[:cut]
                    carry = filled - cut
                    scratch[:carry] = scratch[cut:filled]  # the record across the multiple (numpy copies an
                    # overlapping range as memmove does)
            lo = hi


def record_offsets(lengths: np.ndarray) -> np.ndarray:
    """The n + 1 offsets of records of ``lengths`` laid end to end."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def piece_scratch_size(lengths: np.ndarray, piece_bytes: int = ENCODE_PIECE_BYTES) -> int:
    """The scratch :func:`encode_pieces` needs for records of ``lengths``: what it carries over (less than a
    piece, or the part of one record past a multiple) and a piece after it (a piece's bytes up to the multiple,
    plus the record across it), twice the larger of a piece and the largest record."""
    return 2 * (piece_bytes + (int(lengths.max()) if len(lengths) else 0))


def patch_records(buf: np.ndarray, starts: np.ndarray, queue_offsets: np.ndarray, ts_positions: np.ndarray,
                  store_timestamps: np.ndarray, phy_offsets: Optional[np.ndarray] = None, *,
                  path: str = "", base: int = 0) -> None:
    """Fill in what a publisher assigns in records already encoded into ``buf`` (uint8, writable: a scratch buffer
    or a staged file's map), in one native pass: each record at byte ``starts[k]`` gets its queue offset, its store
    time at ``ts_positions[k]`` inside it and, when given, its physical offset. ``path`` and ``base`` (where
    ``buf`` begins in that file) only name a record that lies outside ``buf``."""
    longs = [np.require(a, dtype=np.int64, requirements=["C", "A"])
             for a in (starts, queue_offsets, phy_offsets if phy_offsets is not None else _NO_LONGS, ts_positions,
                       store_timestamps)]
    problem, row = _native.patch_records(buf, *longs)
    if problem != _native.ENCODE_OK:
        raise StoreFormatError(f"record {row} to patch lies outside the {len(buf)} bytes written: expected its "
                               f"fields inside them, found it at byte {int(longs[0][row])}; the job's staged "
                               "records are damaged, run the job again", path, base + int(longs[0][row]))


_NO_LONGS = np.zeros(0, dtype=np.int64)


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


def join_properties(n: int, pairs: dict, prefix: Optional[pa.Array] = None) -> pa.Array:
    """The PROPERTIES text of ``n`` rows: ``prefix`` (each row's pairs serialised already, or nothing) followed by
    ``name\u0001value\u0002`` for each of ``pairs`` (property name → string column) whose value the row has
    (a null value: no pair), in the dict's order; one native pass (``_native.serialize_properties``)."""
    columns = [(name.encode("utf-8"), *_strings_and_presence(values)) for name, values in pairs.items()]
    head = _strings_and_presence(prefix)[0] if prefix is not None else None
    offsets = np.empty(n + 1, dtype=np.int32)
    _check_properties(_native.property_offsets(n, head, columns, offsets))
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _check_properties(_native.serialize_properties(n, head, columns, offsets, data))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _strings_and_presence(values) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """A string column as the properties kernels take it: ``((offsets, data), presence)``, the presence one byte a
    row (empty when no value is null). Views of the column's buffers (a null's offsets are never read)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    n = len(values)
    buffers = values.buffers()
    offsets = (np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=values.offset * 4) if n
               else np.zeros(1, dtype=np.int32))
    data = np.frombuffer(buffers[2], dtype=np.uint8) if n and buffers[2] is not None else np.zeros(0, np.uint8)
    present = (np.asarray(pc.is_valid(values)).view(np.uint8) if values.null_count
               else np.zeros(0, dtype=np.uint8))
    return (np.require(offsets, requirements=["A"]), data), present


def _check_properties(result: tuple[int, int]) -> None:
    problem, row = result
    if problem == _native.ENCODE_TOO_LONG:
        raise MessageValidationError(
            f"the properties of the rows up to row {row} exceed 2 GiB together once serialised; expected at most "
            f"{L.MAX_PROPERTIES_LENGTH} bytes per row: write fewer rows at a time or shorten the properties")
    if problem != _native.ENCODE_OK:
        raise MessageValidationError(f"row {row}: its property values lie outside their Arrow buffers; "
                                     "pass arrays pyarrow built or validated")


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


__all__ = ["EncodeInput", "encode_records", "encode_pieces", "record_offsets", "piece_scratch_size", "patch_records",
           "record_lengths", "serialize_properties", "join_properties", "UniqKeyFactory", "compress_body", "body_crc32",
           "binary_lengths"]
