"""Java's ``String.hashCode()`` as RocketMQ uses it: consume-queue tag codes and index key hashes.

Hashes run over UTF-16 code units with 32-bit wrap-around (a character outside the Basic Multilingual Plane counts
as its two surrogates); the native kernel ``_native.java_hashes`` computes them straight from Arrow's UTF-8
buffers, continuing from a seed when the hash of a prefix is known (an index key ``topic#key`` from the hash of
``topic#``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ... import _native
from ...errors import MessageValidationError
from .arrow_buffers import native_strings


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode()`` (over UTF-16 code units) as a signed 32-bit int."""
    return _native.java_string_hash(text.encode("utf-8"))


def java_string_hashes(texts, seeds: np.ndarray | None = None) -> np.ndarray:
    """``String.hashCode()`` of many strings at once (nulls count as ""), as int64 holding signed 32-bit values.

    With ``seeds`` (one 32-bit hash per string), each hash continues from its seed: the hash of the seed's
    string followed by this one."""
    arr = pa.array(texts, type=pa.string()) if not isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
    offsets, data = native_strings(arr)
    n = len(offsets) - 1
    seeds = np.zeros(0, np.int32) if seeds is None else np.asarray(seeds, dtype=np.int64).astype(np.int32)
    out = np.empty(n, dtype=np.int32)
    problem, row = _native.java_hashes((offsets, data), seeds, out)
    if problem != _native.ENCODE_OK:
        raise MessageValidationError(f"string {row} lies outside its Arrow buffer: expected offsets within the data, "
                               "found them past its end; pass arrays pyarrow built or validated")
    return out.astype(np.int64)


def tags_code_of(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: the Java hash of the TAGS value, 0 when absent/empty."""
    return java_string_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, and 0 when that overflows (Integer.MIN_VALUE)."""
    h = abs(java_string_hash(key))
    return 0 if h >= 1 << 31 else h
