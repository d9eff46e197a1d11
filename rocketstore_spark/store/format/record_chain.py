"""Record starts of a stretch of one commit-log file, found by following TOTALSIZE from a known record start.

A commit-log-ordered read starts its tasks at record starts inside 1 GiB files and must find every record of its
stretch without a consume queue. Following TOTALSIZE one record at a time in Python costs ~1 µs a record; here
the candidates are found with numpy instead (every position whose bytes 4..8 are a MAGICCODE), and the chain
from the start is taken among them: a record start is the start itself or the TOTALSIZE successor of another
candidate. A body that happens to hold the magic bytes adds a false candidate; the chain is verified link by
link (each start is exactly its predecessor's start plus its TOTALSIZE), so a false candidate is dropped and the
chain resumes where the verified one continues.
"""

from __future__ import annotations

import struct

import numpy as np

from . import layout as L

CHAIN_STOP = "stop"  # the chain reached the stretch's end (a record starts at or past ``stop``)
CHAIN_BLANK = "blank"  # a BLANK end-of-file marker, or too few bytes left for a record
CHAIN_DATA = "end"  # no record starts here (zeros or an unknown magic code): end of written data
CHAIN_BAD = "bad"  # the last position's TOTALSIZE is not positive or runs past the file (the caller reports it)

_STEP = 8 << 20  # bytes searched at a time (bounds the temporary arrays)
_MAGIC = struct.pack(">i", L.MESSAGE_MAGIC_CODE)  # DA A3 20 A7
_LAST_V2 = struct.pack(">i", L.MESSAGE_MAGIC_CODE_V2)[3]  # MESSAGE_MAGIC_CODE_V2 differs in its last byte (AB)


def magic_candidates(buf: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Sorted positions ``p`` in ``[start, stop)`` whose bytes ``p+4 .. p+8`` hold a record magic code: one
    vectorised comparison per byte for the first magic byte, then the other three at the few hits."""
    size = len(buf)
    stop = min(stop, size - 8 + 1)
    at = L.MAGIC_CODE_POSITION
    out = [np.zeros(0, dtype=np.int64)]
    for lo in range(start, stop, _STEP):
        hi = min(stop, lo + _STEP)
        window = buf[lo + at:hi + at + 3]
        hit = np.flatnonzero(window[:hi - lo] == _MAGIC[0])
        last = window[hit + 3]
        hit = hit[(window[hit + 1] == _MAGIC[1]) & (window[hit + 2] == _MAGIC[2]) & ((last == _MAGIC[3]) |
                                                                                     (last == _LAST_V2))]
        out.append(hit.astype(np.int64) + lo)
    return np.concatenate(out)


def chain_record_starts(buf: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int, str]:
    """Record starts from ``start`` (a record start) on, until a record starts at or past ``stop``.

    Returns (positions, end position, how it ended: one of the ``CHAIN_*`` kinds). With :data:`CHAIN_BAD` the
    last position is the record whose TOTALSIZE cannot be followed: parsing it reports the problem. The records
    are not checked here beyond their magic code and TOTALSIZE (see :func:`~.codec.parse_records`).
    """
    size = len(buf)
    cands = magic_candidates(buf, start, stop)
    totals = _totals(buf, cands)
    nxt = cands + totals
    # a candidate is a chain member when it is the start or some candidate's successor
    j = np.searchsorted(cands, nxt)
    j_ok = j < len(cands)
    is_target = np.zeros(len(cands), dtype=bool)
    is_target[j[j_ok][cands[j[j_ok]] == nxt[j_ok]]] = True
    runs, pos = [], start
    while pos < stop:
        i = int(np.searchsorted(cands, pos))
        if i >= len(cands) or cands[i] != pos:
            break
        idx = i + np.flatnonzero(is_target[i:])
        if not len(idx) or idx[0] != i:
            idx = np.concatenate(([i], idx))
        links = cands[idx[1:]] == nxt[idx[:-1]]
        cut = int(np.argmin(links)) if len(links) and not links.all() else len(links)
        chain = idx[:cut + 1]
        runs.append(cands[chain])
        last = int(chain[-1])
        if totals[last] <= 0 or nxt[last] > size:
            return np.concatenate(runs), int(cands[last]), CHAIN_BAD
        pos = int(nxt[last])
    positions = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
    if pos >= stop:
        return positions, pos, CHAIN_STOP
    if pos + 8 > size:
        return positions, pos, CHAIN_BLANK
    magic = int(buf[pos + 4:pos + 8].view(">i4")[0])
    return positions, pos, CHAIN_BLANK if magic == L.BLANK_MAGIC_CODE else CHAIN_DATA


def _totals(buf: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """TOTALSIZE at each position (big-endian int32)."""
    if not len(positions):
        return np.zeros(0, dtype=np.int64)
    cells = buf[positions[:, None] + np.arange(4)]
    return np.ascontiguousarray(cells).view(">i4").reshape(-1).astype(np.int64)
