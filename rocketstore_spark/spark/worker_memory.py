"""The C allocator of Spark's Python workers: a task's large temporary arrays reuse memory instead of mapping it
afresh.

numpy takes the memory of its arrays from glibc's ``malloc``, which hands out every block above its mmap threshold
(128 KiB at first, rising with use to at most 32 MiB) as a mapping of its own and unmaps it when the array is
freed. The next array of that size is a new mapping again, whose pages the kernel zeroes as they are first touched
(in 2 MiB pages: numpy asks for huge pages for large arrays). A sink's commit works on arrays of the job's rows
(8-20 MB each for a million rows, dozens of them): zeroing fresh pages was half of its time (a profile of the
publication of 1M records: 47% in the kernel's ``clear_page``), and on a VM whose host takes back the memory its
guest frees, touching fresh pages costs several times more.

:func:`tune_allocator` raises the mmap threshold to :data:`MMAP_THRESHOLD` and the trim threshold to
:data:`TRIM_THRESHOLD`, so that such blocks come from the heap and a freed one serves the next array; at most
:data:`TRIM_THRESHOLD` of free memory at the heap's top is kept, more goes back to the system. It acts once per
process, only in Spark's Python workers (a user's own process keeps its allocator as it is, see
:func:`~.worker_gc.in_spark_worker`) and only where the C library has glibc's ``mallopt``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Optional

from .worker_gc import in_spark_worker

log = logging.getLogger("rocketstore_spark")

#: Blocks up to this size come from the heap (a million rows' widest temporary arrays are ~20 MB).
MMAP_THRESHOLD = 64 << 20
#: Free memory at the top of the heap kept for the next arrays.
TRIM_THRESHOLD = 256 << 20
# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

_tuned: Optional[bool] = None  # None: not tried yet in this process


def tune_allocator() -> bool:
    """Set the thresholds (tried once per process: every task calls this); True when they are set, False when
    this C library has no ``mallopt`` or refused them."""
    global _tuned
    if _tuned is not None:
        return _tuned
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator stays as it is
        _tuned = False
        return _tuned
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _tuned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not _tuned:
        log.debug("mallopt refused the allocator thresholds; large arrays stay separate mappings")
    return _tuned


def tune_allocator_in_worker() -> bool:
    """:func:`tune_allocator` in Spark's Python workers only; elsewhere nothing (False)."""
    return in_spark_worker() and tune_allocator()


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator", "tune_allocator_in_worker"]
