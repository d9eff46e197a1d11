"""Arrow string and binary arrays as the native kernels take them: ``(int32 offsets, uint8 data)`` views."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def native_strings(arr) -> tuple[np.ndarray, np.ndarray]:
    """A string or binary array (or chunked array) as ``(offsets, data)``: the n + 1 int32 offsets of its values
    into the uint8 data buffer; null values count as empty. Views of the array's buffers, no copy (chunked
    arrays are combined and large types cast first; offsets are copied only when a foreign buffer is misaligned)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.binary())
    if arr.null_count:
        arr = pc.fill_null(arr, pa.scalar(b"" if pa.types.is_binary(arr.type) else "", arr.type))
    n = len(arr)
    if n == 0:
        return np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.uint8)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return np.require(offsets, requirements=["A"]), data


__all__ = ["native_strings"]
