"""Memory the native decode writes a batch's columns into, recycled once the batch is gone.

A scan decodes batch after batch of the same shape. Each batch's columns are Arrow buffers over one block of
memory (:class:`OutputBlock`); when every array of a batch has been dropped, nothing refers to its block any
more and the next batch takes it again. The bytes the decode writes then land in pages that are mapped and
usually still in the CPU's cache, where a fresh block costs an allocation, a page fault and a zeroed page per
4 KiB touched (the columns of a batch of 1 KiB records are about as large as its records).

A block is a numpy array: Arrow buffers made from it (``pyarrow.py_buffer``) hold a reference to it, so its
reference count tells whether any array still uses it.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pyarrow as pa

#: The alignment of each part of a block (Arrow's recommended buffer alignment).
ALIGNMENT = 64
#: Blocks kept for reuse per process: a reader holds the batch it is decoding and its consumer one or two more.
KEPT_BLOCKS = 3
#: The largest block kept: a batch of very large records gets memory of its own, returned when it is dropped
#: (the pages a kept block's batches touched stay resident).
KEPT_BLOCK_BYTES = 32 << 20
#: References to a block in nobody's use: the kept list's and :func:`sys.getrefcount`'s argument.
_FREE_REFERENCES = 2


class OutputBlock:
    """One allocation split into aligned parts: ``views`` are numpy arrays the native decode fills, ``arrow``
    wraps a filled part for an Arrow array without a copy."""

    __slots__ = ("memory", "buffer", "starts")

    def __init__(self, memory: np.ndarray, starts: list[int]):
        self.memory = memory
        self.buffer = pa.py_buffer(memory)
        self.starts = starts

    def view(self, part: int, size: int, dtype=np.uint8) -> np.ndarray:
        """Part ``part`` (``size`` bytes) as a numpy array of ``dtype``."""
        start = self.starts[part]
        return self.memory[start:start + size].view(dtype)

    def arrow(self, part: int, size: int) -> pa.Buffer:
        """The first ``size`` bytes of part ``part`` as an Arrow buffer."""
        return self.buffer.slice(self.starts[part], size)


class OutputMemory:
    """Blocks for decode outputs, handed out again once no batch uses them (thread-safe)."""

    def __init__(self, kept: int = KEPT_BLOCKS):
        self._kept = kept
        self._blocks: list[np.ndarray] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Blocks kept for reuse."""
        return len(self._blocks)

    def block(self, sizes: list[int]) -> OutputBlock:
        """A block with one part of at least ``sizes[i]`` bytes each, every part starting aligned."""
        starts, total = [], 0
        for size in sizes:
            starts.append(total)
            total += -(-max(size, 0) // ALIGNMENT) * ALIGNMENT
        return OutputBlock(self._memory(max(total, ALIGNMENT)), starts)

    def _memory(self, nbytes: int) -> np.ndarray:
        with self._lock:
            best = None
            for i in range(len(self._blocks)):
                # the list's reference and getrefcount's argument: no Arrow buffer holds it
                if sys.getrefcount(self._blocks[i]) == _FREE_REFERENCES and len(self._blocks[i]) >= nbytes and \
                        (best is None or len(self._blocks[i]) < len(self._blocks[best])):
                    best = i
            if best is not None:
                return self._blocks[best]
            memory = _aligned(nbytes)
            if nbytes > KEPT_BLOCK_BYTES:
                return memory
            if len(self._blocks) < self._kept:
                self._blocks.append(memory)
            else:  # replace the smallest block nobody uses, if any: the sizes follow the batches read now
                free = [i for i in range(len(self._blocks)) if sys.getrefcount(self._blocks[i]) == _FREE_REFERENCES]
                if free:
                    self._blocks[min(free, key=lambda i: len(self._blocks[i]))] = memory
            return memory


def _aligned(nbytes: int) -> np.ndarray:
    """``nbytes`` of uninitialised memory starting on an :data:`ALIGNMENT` boundary."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip:skip + nbytes]


#: The process's decode output memory.
OUTPUT_MEMORY = OutputMemory()
