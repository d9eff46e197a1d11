"""Searching consume-queue units without reading whole files.

A consume queue's units are written strictly in order, so in every file the valid units
(``ConsumeQueue.recover``: ``phy_offset >= 0 and size > 0``) are a prefix, followed by the preallocated zeros;
and the units' commit-log offsets never decrease (blank filler units at the start of a queue point at 0). Both
properties make a queue's end and any "first unit at or past a commit-log offset" a binary search: a handful of
20-byte probes, then one small window read, instead of the 6 MB a preallocated file holds.

The broker's recovery scans forward and stops at the first invalid unit; on a queue whose valid units are a
prefix (everything the broker or this package writes, a torn tail included) the search finds the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ... import _native
from ..format import layout as L
from .file_reads import OpenFile

WINDOW_UNITS = 1024  # when the search range is this small (20 KiB), read it in one go and finish with numpy
REMOTE_FIRST_WINDOW = 4096  # units (80 KiB) an object-store queue's end search reads first


def valid_units(units: np.ndarray) -> np.ndarray:
    """The units recovery keeps (``offset >= 0 && size > 0``)."""
    out = np.empty(len(units), dtype=np.uint8)
    _native.valid_units(L.unit_bytes(units), out)
    return out.view(bool)


def _first_true(read: Callable[[int, int], np.ndarray], test: Callable[[np.ndarray], np.ndarray],
                lo: int, hi: int) -> int:
    """The first index in ``[lo, hi)`` whose unit passes ``test`` (``hi`` when none), for a test that is false
    up to some index and true from there on; ``read(a, b)`` gives the units of ``[a, b)``."""
    while hi - lo > WINDOW_UNITS:
        mid = (lo + hi) // 2
        if test(read(mid, mid + 1))[0]:
            hi = mid  # the unit at mid passes: the answer is at most mid
        else:
            lo = mid + 1
    if lo >= hi:
        return hi
    hits = np.flatnonzero(test(read(lo, hi)))
    return lo + int(hits[0]) if len(hits) else hi


def file_units_reader(handle: OpenFile) -> Callable[[int, int], np.ndarray]:
    """``read(a, b)``: units ``[a, b)`` of an open consume-queue file (positions local to the file)."""

    def read(a: int, b: int) -> np.ndarray:
        return handle.read_array(a * L.CQ_STORE_UNIT_SIZE, b - a, L.CQ_UNIT_DTYPE)

    return read


@dataclass(frozen=True)
class FilePrefix:
    """What the end search learnt about one file: its count of valid units, the last of them (commit-log offset
    and size; None when there is none), and the largest commit-log offset among them when the search happened
    to read them all (a young queue's few units: recovery's truncation then needs no second read)."""

    count: int
    last: Optional[tuple[int, int]]
    max_phy: Optional[int]
    phy: Optional[np.ndarray] = None  # the valid units' commit-log offsets, when the search read them all


def valid_prefix(handle: OpenFile, units_per_file: int) -> FilePrefix:
    """How many units at the start of the file are valid: where ``ConsumeQueue.recover`` stops in this file.

    The filesystem's first hole bounds the search (a preallocated file is sparse past its written units); the
    unit just past that bound is read too, so a filesystem that cannot report holes truthfully costs only
    the longer search, never a wrong end.
    """
    read = file_units_reader(handle)
    size = units_per_file * L.CQ_STORE_UNIT_SIZE
    bound = min(units_per_file, -(-handle.data_end(size) // L.CQ_STORE_UNIT_SIZE))
    if bound == units_per_file and getattr(handle, "round_trips_cost", False):
        # an object store reports no holes and every probe is a round trip: a young queue (most of thousands)
        # ends within the first window, found by one read
        units = read(0, min(REMOTE_FIRST_WINDOW, units_per_file))
        bad = np.flatnonzero(~valid_units(units))
        if len(bad) or len(units) == units_per_file:
            return _prefix_of(units, int(bad[0]) if len(bad) else len(units))
    if bound <= WINDOW_UNITS:  # a young queue: everything up to the hole and one unit past it, in one read
        units = read(0, min(bound + 1, units_per_file))
        ok = valid_units(units)
        if bound == len(units) or not ok[bound]:
            bad = np.flatnonzero(~ok)
            return _prefix_of(units, int(bad[0]) if len(bad) else len(units))
        bound = units_per_file  # data past the reported hole: search the whole file
    elif bound < units_per_file and valid_units(read(bound, bound + 1))[0]:
        bound = units_per_file
    count = bound
    if not bound or not valid_units(read(bound - 1, bound))[0]:  # a full file costs just that one probe
        count = _first_true(read, lambda u: ~valid_units(u), 0, bound)
    last = read(count - 1, count) if count else None
    return FilePrefix(count, (int(last["phy_offset"][0]), int(last["size"][0])) if count else None, None)


def _prefix_of(units: np.ndarray, count: int) -> FilePrefix:
    """The prefix of ``count`` valid units, all read (``units`` starts at the file's first unit)."""
    last = (int(units["phy_offset"][count - 1]), int(units["size"][count - 1])) if count else None
    phy = units["phy_offset"][:count].astype(np.int64)
    return FilePrefix(count, last, int(phy.max()) if count else None, phy)


def first_at_or_past(read: Callable[[int, int], np.ndarray], lo: int, hi: int, phy_offset: int) -> int:
    """The first queue offset in ``[lo, hi)`` whose unit points at or past commit-log ``phy_offset`` (``hi``
    when none); ``read(a, b)`` gives the units of queue offsets ``[a, b)``.

    A queue's units point forward through the commit log at a fairly steady pace, so the search interpolates:
    it reads the window of :data:`WINDOW_UNITS` units where the offset should be, which usually holds the
    answer (two or three reads in all: each is a round trip on an object store), and halves the range
    whenever a guess fails to, so it never costs more than a binary search's probes plus the windows."""
    def phy_at(i: int) -> int:
        return int(read(i, i + 1)["phy_offset"][0])

    if lo >= hi:
        return hi
    phy_lo = phy_at(lo)
    if phy_lo >= phy_offset:
        return lo
    lo += 1  # units before lo point before phy_offset
    if lo >= hi:
        return hi
    phy_hi = phy_at(hi - 1)
    if phy_hi < phy_offset:
        return hi
    guess_next = True
    while hi - lo > WINDOW_UNITS:
        if guess_next:
            span = max(phy_hi - phy_lo, 1)
            centre = lo + int((phy_offset - phy_lo) / span * (hi - lo))
            a = min(max(centre - WINDOW_UNITS // 2, lo), hi - WINDOW_UNITS)
            window = read(a, a + WINDOW_UNITS)["phy_offset"]
            if not len(window):
                break
            hits = np.flatnonzero(window >= phy_offset)
            if len(hits) and hits[0] > 0:
                return a + int(hits[0])  # the crossing lies inside the window
            before = hi - lo
            if len(hits):  # the whole window is at or past: the answer is at most a
                if a == lo:
                    return lo
                hi, phy_hi = a + 1, int(window[0])
            else:
                lo, phy_lo = a + len(window), int(window[-1])
            guess_next = hi - lo <= before // 2  # a guess that did not halve the range: bisect next
        else:
            mid = (lo + hi) // 2
            at = phy_at(mid)
            if at >= phy_offset:
                hi, phy_hi = mid + 1, at
            else:
                lo, phy_lo = mid + 1, at
            guess_next = True
    if lo >= hi:
        return hi
    hits = np.flatnonzero(read(lo, hi)["phy_offset"] >= phy_offset)
    return lo + int(hits[0]) if len(hits) else hi


__all__ = ["FilePrefix", "valid_prefix", "first_at_or_past", "valid_units", "WINDOW_UNITS"]
