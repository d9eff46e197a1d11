"""Java's ``String.hashCode()`` as RocketMQ uses it: consume-queue tag codes and index key hashes.

Hashes run over UTF-16 code units with 32-bit wrap-around; the vectorised form handles ASCII strings with numpy
and falls back to the exact scalar form for anything else.
"""

from __future__ import annotations

import numpy as np


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode()`` (over UTF-16 code units) as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_hashes(texts) -> np.ndarray:
    """``String.hashCode()`` of many strings at once (vectorised for ASCII, exact for any text)."""
    return java_hashes_and_lengths(texts)[0]


def java_hashes_and_lengths(texts) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode()`` and ``String.length()`` (UTF-16 code units) of many strings; nulls count as ""."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(texts, type=pa.string()) if not isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.string())
    n = len(arr)
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out, np.zeros(0, dtype=np.int64)
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    chars = data[offsets[0]:offsets[-1]]
    ascii_rows = np.ones(n, dtype=bool)
    if chars.size and (chars >= 0x80).any():
        high = np.flatnonzero(chars >= 0x80) + offsets[0]
        ascii_rows[np.searchsorted(starts, high, side="right") - 1] = False
    lower = -1
    for upper in _DOT_WIDTH_CLASSES:  # rows of similar lengths together: a matrix row wastes at most 4x
        in_class = (lengths > lower) & (lengths <= upper)
        lower = upper
        if in_class.all():  # one class holds every row (the usual case): its characters are all of chars
            out[:] = _dot_hashes(chars, lengths)
        elif in_class.any():
            out[in_class] = _dot_hashes(chars[np.repeat(in_class, lengths)], lengths[in_class])
    rows = np.flatnonzero(lengths > _DOT_WIDTH_CLASSES[-1])
    if len(rows):
        out[rows] = _bincount_hashes(data, starts[rows], lengths[rows])
    utf16_lengths = lengths.copy()
    for i in np.flatnonzero(~ascii_rows):  # hashCode works on UTF-16 code units: exact, one by one
        text = arr[i].as_py()
        out[i] = java_string_hash(text)
        utf16_lengths[i] = len(text.encode("utf-16-be")) // 2
    return out, utf16_lengths


def concat_hashes(prefix_hashes: np.ndarray, suffix_hashes: np.ndarray, suffix_lengths: np.ndarray) -> np.ndarray:
    """``(a + b).hashCode()`` from ``a.hashCode()``, ``b.hashCode()`` and ``b.length()``: Horner's rule gives
    h(a)·31^len(b) + h(b) mod 2^32, so no concatenated string has to be built."""
    mask = np.uint64(0xFFFFFFFF)
    lengths = np.asarray(suffix_lengths, dtype=np.int64)
    powers = np.ones(int(lengths.max(initial=0)) + 1, dtype=np.uint64)
    np.cumprod(np.full(len(powers) - 1, 31, dtype=np.uint64), out=powers[1:])  # wraps mod 2^64: exact mod 2^32
    # both factors < 2^32, so product + addend < 2^64: no wrap before the mask
    h = (np.asarray(prefix_hashes).astype(np.uint64) & mask) * (powers[lengths] & mask) \
        + (np.asarray(suffix_hashes).astype(np.uint64) & mask)
    return _to_signed32(h & mask)


#: upper bounds of the string lengths hashed together by _dot_hashes (a power of 4 apart); longer strings are
#: hashed by _bincount_hashes
_DOT_WIDTH_CLASSES = (16, 64, 256)
#: 31**k mod 2**32 for k = 0 .. 255, highest power first: the weights of a right-aligned row of 256 characters
_POWERS_OF_31 = np.array([pow(31, k, 1 << 32) for k in range(_DOT_WIDTH_CLASSES[-1] - 1, -1, -1)], dtype=np.float64)


def _to_signed32(h: np.ndarray) -> np.ndarray:
    h = h.astype(np.int64) & 0xFFFFFFFF
    return np.where(h >= 1 << 31, h - (1 << 32), h)


def _dot_hashes(chars: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Hashes of the strings laid end to end in ``chars`` (each at most 256 long): sum(c[i] * 31**(len-1-i))
    mod 2**32 is the dot product of the string, right-aligned in a zero-padded row (leading zeros add nothing),
    with the powers of 31 mod 2**32 — one matrix-vector product for all rows. float64 is exact: each term is
    below 2**40 and a row sums at most 256 of them, below 2**48."""
    n = len(lengths)
    width = int(lengths.max(initial=0))
    if width == 0:
        return np.zeros(n, dtype=np.int64)
    if len(chars) == n * width:  # all of one length (such as UNIQ_KEYs): the characters are the matrix
        matrix = chars.reshape(n, width)
    else:
        matrix = np.zeros((n, width), dtype=np.uint8)
        matrix[np.arange(width) >= (width - lengths)[:, None]] = chars
    sums = matrix @ _POWERS_OF_31[-width:]
    return _to_signed32(sums.astype(np.uint64) & np.uint64(0xFFFFFFFF))


def _bincount_hashes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """sum(c[i] * 31**(len-1-i)) mod 2**32 per row, for long strings: one pass over all their characters."""
    n = len(starts)
    pow31 = np.ones(int(lengths.max()) + 1, dtype=np.uint32)
    for k in range(1, len(pow31)):
        pow31[k] = np.uint32((int(pow31[k - 1]) * 31) & 0xFFFFFFFF)
    row = np.repeat(np.arange(n), lengths)
    first = np.repeat(starts, lengths)
    pos_in_row = np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    exponent = np.repeat(lengths, lengths) - 1 - pos_in_row
    terms = data[first + pos_in_row].astype(np.uint32) * pow31[exponent]
    # float64 sums are exact here: each term < 2**39 and a row has far fewer than 2**14 characters
    sums = np.bincount(row, weights=terms.astype(np.float64), minlength=n).astype(np.uint64)
    return _to_signed32(sums & np.uint64(0xFFFFFFFF))


def tags_code_of(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: the Java hash of the TAGS value, 0 when absent/empty."""
    return java_string_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, and 0 when that overflows (Integer.MIN_VALUE)."""
    h = abs(java_string_hash(key))
    return 0 if h >= 1 << 31 else h
