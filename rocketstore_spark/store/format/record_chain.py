"""Record starts of a stretch of one commit-log file, found by following TOTALSIZE from a known record start.

A commit-log-ordered read starts its tasks at record starts inside 1 GiB files and must find every record of its
stretch without a consume queue. The native kernel follows TOTALSIZE one record at a time, checking each start's
MAGICCODE and each size against the buffer, with the GIL released.
"""

from __future__ import annotations

import numpy as np

from ... import _native
from .codec import native_bytes

CHAIN_STOP = "stop"  # the chain reached the stretch's end (a record starts at or past ``stop``)
CHAIN_BLANK = "blank"  # a BLANK end-of-file marker, or too few bytes left for a record
CHAIN_DATA = "end"  # no record starts here (zeros or an unknown magic code): end of written data
CHAIN_BAD = "bad"  # the last position's TOTALSIZE is not positive or runs past the file (the caller reports it)

_KINDS = {_native.CHAIN_STOP: CHAIN_STOP, _native.CHAIN_BLANK: CHAIN_BLANK, _native.CHAIN_DATA: CHAIN_DATA,
          _native.CHAIN_BAD: CHAIN_BAD}


def magic_candidates(buf: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Sorted positions ``p`` in ``[start, stop)`` whose bytes ``p+4 .. p+8`` hold a record magic code (record
    starts, and bodies that happen to hold the magic bytes)."""
    return np.frombuffer(_native.magic_candidates(native_bytes(buf), int(start), int(stop)), dtype=np.int64)


def chain_record_starts(buf: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int, str]:
    """Record starts from ``start`` (a record start) on, until a record starts at or past ``stop``.

    Returns (positions, end position, how it ended: one of the ``CHAIN_*`` kinds). With :data:`CHAIN_BAD` the
    last position is the record whose TOTALSIZE cannot be followed: parsing it reports the problem. The records
    are not checked here beyond their magic code and TOTALSIZE (see :func:`~.codec.parse_records`).
    """
    raw, end, kind = _native.chain_record_starts(native_bytes(buf), int(start), int(stop))
    return np.frombuffer(raw, dtype=np.int64), int(end), _KINDS[kind]
