"""A remote file read as if memory-mapped: the byte ranges a reader asks for, fetched into a sparse local file.

The commit-log and index readers index a file's bytes as one array (a memory map, locally). For a remote file,
:class:`RemoteFileMap` maps a sparse, already-unlinked temporary file of the object's length and fills only the
ranges :meth:`RemoteFileMap.ensure` is asked for, by ranged GETs: a sequential walk in steps of
:data:`SEQUENTIAL_STEP` with the next step fetched in the background while the current one is decoded, scattered
records (a consume-queue-ordered read, a lookup) as exact ranges, neighbours closer than :data:`COALESCE_GAP`
joined into one request. Nothing is downloaded whole. Pages the reader has passed are dropped from the process
like local maps' (``MADV_DONTNEED``: they stay in the temporary file, which disappears with the map), so memory
stays bounded; the local disk holds what was fetched, at most the object's size.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .file_reads import close_map, release_pages

SEQUENTIAL_STEP = 32 << 20  # bytes a walk fetches per request (and prefetches ahead)
COALESCE_GAP = 16 << 10  # scattered ranges closer than this are fetched as one
PARALLEL_REQUESTS = 8  # scattered ranges in flight at once
PREFETCH_DEPTH = 2  # sequential steps fetched ahead of a walk (two requests in flight keep the link busy)
CACHE_DIR_ENV = "ROCKETSTORE_CACHE_DIR"  # where the sparse files live (default: the temp dir)

_POOL = ThreadPoolExecutor(max_workers=PARALLEL_REQUESTS, thread_name_prefix="rocketstore-fetch")


class RemoteFileMap:
    """One remote object as a uint8 array whose ranges are valid once :meth:`ensure`-d (see module docstring)."""

    def __init__(self, rfs, key: str, size: int):
        self._rfs, self._key, self.size = rfs, key, size
        self._handle = rfs.open_input(key)
        fd, name = tempfile.mkstemp(prefix="rocketstore-remote-", dir=os.environ.get(CACHE_DIR_ENV) or None)
        os.unlink(name)  # gone when the last map or array referring to it is
        try:
            os.ftruncate(fd, max(size, 1))
            self._mm = mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, mmap.PROT_READ)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd  # fetched bytes are written with pwrite (no page faults here); the map sees them
        self.array = np.frombuffer(self._mm, dtype=np.uint8)[:size]
        self.array.flags.writeable = False
        self._have: list[tuple[int, int]] = []  # fetched [start, end) ranges, sorted and disjoint
        self._lock = threading.Lock()
        self._pending: list[tuple[int, int, Future]] = []  # background fetches, in file order
        self._scheduled_to = 0  # where the background fetches end
        self.bytes_fetched = 0
        self.requests = 0

    # --- what is present -----------------------------------------------------------------------------

    def _missing(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps, at = [], start
        with self._lock:
            for a, b in self._have:
                if b <= at:
                    continue
                if a >= end:
                    break
                if a > at:
                    gaps.append((at, a))
                at = max(at, b)
                if at >= end:
                    break
        if at < end:
            gaps.append((at, end))
        return gaps

    def _add(self, start: int, end: int) -> None:
        with self._lock:
            merged = []
            for a, b in self._have:
                if b < start or a > end:
                    merged.append((a, b))
                else:
                    start, end = min(a, start), max(b, end)
            merged.append((start, end))
            merged.sort()
            self._have = merged

    # --- fetching ------------------------------------------------------------------------------------

    def _fetch(self, start: int, end: int) -> None:
        data = self._rfs.read_range(self._key, start, end - start, self._handle)
        os.pwrite(self._fd, data, start)
        self.bytes_fetched += end - start
        self.requests += 1
        self._add(start, end)

    def _wait_pending(self, start: int, end: int) -> None:
        for pending in [p for p in self._pending if p[0] < end and start < p[1]]:
            self._pending.remove(pending)
            pending[2].result()  # its error, if any, surfaces here

    def ensure(self, start: int, end: int, ahead: int = 0, until: int = -1) -> None:
        """Make ``[start, end)`` (clipped to the file) readable; with ``ahead``, fetch the following steps of
        ``ahead`` bytes, short of ``until`` (default: the file's end), in the background (a sequential reader
        asks for them next)."""
        start, end = max(start, 0), min(end, self.size)
        if end > start:
            self._wait_pending(start, end)
            # a long range (a whole stretch of a commit-log-ordered plan) comes in steps, several in flight
            self._fetch_all([(a, min(a + SEQUENTIAL_STEP, b)) for a, b in self._missing(start, end)
                             for a in range(a, b, SEQUENTIAL_STEP)])
        if ahead:
            self._pending = [p for p in self._pending if not p[2].done() or p[2].exception() is not None]
            limit = self.size if until < 0 else min(until, self.size)
            at = max(end, self._scheduled_to)
            while len(self._pending) < PREFETCH_DEPTH and at < limit:
                nxt = (at, min(at + ahead, limit))
                if self._missing(*nxt):
                    self._pending.append((nxt[0], nxt[1], _POOL.submit(self._fetch_missing, *nxt)))
                at = self._scheduled_to = nxt[1]

    def _fetch_missing(self, start: int, end: int) -> None:
        for a, b in self._missing(start, end):
            self._fetch(a, b)

    def ensure_ranges(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Make every ``[starts[i], ends[i])`` readable: missing ranges coalesced, fetched in parallel."""
        if len(starts) == 0:
            return
        order = np.argsort(starts, kind="stable")
        s = np.clip(np.asarray(starts, np.int64)[order], 0, self.size)
        e = np.clip(np.asarray(ends, np.int64)[order], 0, self.size)
        e = np.maximum.accumulate(e)
        # a new group starts where a range begins more than COALESCE_GAP past everything before it
        new = np.concatenate(([True], s[1:] > e[:-1] + COALESCE_GAP))
        group_start = s[new]
        group_end = np.maximum.reduceat(e, np.flatnonzero(new))
        self._fetch_all([g for a, b in zip(group_start.tolist(), group_end.tolist()) if b > a
                         for g in self._missing(a, b)])

    def _fetch_all(self, ranges: list) -> None:
        """Fetch ``ranges``: one in this thread, several in parallel (the first error surfaces)."""
        if len(ranges) == 1:
            self._fetch(*ranges[0])
        elif ranges:
            for f in [_POOL.submit(self._fetch, a, b) for a, b in ranges]:
                f.result()

    def release(self, start: int, end: int) -> None:
        """Drop this process's pages of ``[start, end)`` (the temporary file keeps the bytes)."""
        release_pages(self._mm, start, end)

    def close(self) -> None:
        pending, self._pending = self._pending, []
        for _, _, future in pending:
            future.cancel()
            try:
                future.result()
            except BaseException:  # noqa: BLE001 - the reader is done with the file; its error no longer matters
                pass
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.array = None
        close_map(self._mm)


__all__ = ["RemoteFileMap", "SEQUENTIAL_STEP", "CACHE_DIR_ENV"]
