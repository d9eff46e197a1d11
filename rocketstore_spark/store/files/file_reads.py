"""Windowed reads of store files, counted.

Consume-queue files are 6 MB preallocated files that are mostly zeros on a young queue; a reader over thousands
of them must touch only the units it needs. :class:`OpenFile` reads byte ranges with ``pread`` into fresh
arrays (nothing stays mapped, so a process holds only what it asked for), and every file opened, read or mapped
is counted in :data:`STATS`, so tests assert what an operation cost by counting, never by timing.
"""

from __future__ import annotations

import mmap
import os
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ... import _native
from ...errors import CorruptRecordError

PAGE_SIZE = 4096


@dataclass
class ReadStats:
    """Counters of file access through the file layer (process-wide; executors each count their own)."""

    files_opened: int = 0  # consume-queue (and other windowed) files opened for reading
    reads: int = 0  # pread calls
    bytes_read: int = 0  # bytes returned by them
    pages_read: int = 0  # distinct 4 KiB pages each read touched, summed over reads
    files_mapped: int = 0  # whole files memory-mapped (the commit log, index files)
    remote_requests: int = 0  # ranged GETs of a remote store's objects (retries not counted)
    remote_bytes: int = 0  # bytes those returned

    def snapshot(self) -> "ReadStats":
        return ReadStats(**{f.name: getattr(self, f.name) for f in fields(self)})

    def minus(self, other: "ReadStats") -> "ReadStats":
        return ReadStats(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


STATS = ReadStats()


@contextmanager
def counting():
    """``with counting() as cost: ...``: afterwards ``cost`` holds what the block read (a :class:`ReadStats`)."""
    before = STATS.snapshot()
    delta = ReadStats()
    try:
        yield delta
    finally:
        for f in fields(ReadStats):
            setattr(delta, f.name, getattr(STATS, f.name) - getattr(before, f.name))


def _pages(start: int, length: int) -> int:
    return 0 if length <= 0 else (start + length - 1) // PAGE_SIZE - start // PAGE_SIZE + 1


class ClosingFile:
    """A context manager that closes the file it is (``with open_file(p) as f``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class OpenFile(ClosingFile):
    """One file opened for ``pread``; use as a context manager so the descriptor never outlives the read."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(self.path, os.O_RDONLY)
        STATS.files_opened += 1

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read_array(self, start: int, count: int, dtype: np.dtype) -> np.ndarray:
        """``count`` items of ``dtype`` from byte ``start`` (a short file gives fewer: the caller checks)."""
        out = np.empty(max(count, 0), dtype=dtype)
        if count <= 0:
            return out
        got = os.preadv(self.fd, [out.view(np.uint8)], start)
        STATS.reads += 1
        STATS.bytes_read += got
        STATS.pages_read += _pages(start, got)
        return out[:got // dtype.itemsize]

    def data_end(self, length: int) -> int:
        """Where the file's data ends as far as the filesystem knows: the first hole (a preallocated sparse file
        holds zeros from there on). ``length`` when there is no hole or the filesystem cannot tell."""
        try:
            return min(os.lseek(self.fd, 0, os.SEEK_HOLE), length)
        except (OSError, AttributeError):
            return length


def read_spans(spans, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Items of many short spans of local files, read into one array: ``spans`` holds ``(path, first byte, item
    count)`` each. Returns ``(items, complete)``: ``complete[i]`` tells whether span ``i`` was read whole; the
    items of a span whose file is missing or too short are undefined (the caller reads those another way).

    One open, one read and one close per span, with no object per file (one native call for all of them): a
    task over thousands of short consume-queue ranges spends more on opening files one by one than on the few
    units it reads of each."""
    counts = np.fromiter((count for _, _, count in spans), dtype=np.int64, count=len(spans))
    out = np.empty(int(counts.sum()), dtype=dtype)
    starts = np.fromiter((start for _, start, _ in spans), dtype=np.int64, count=len(spans))
    want = counts * out.dtype.itemsize
    got = np.empty(len(spans), dtype=np.int64)
    # a file gone, or no longer a file, gives -1: the caller's own read reports it
    _native.read_spans([os.fspath(path) for path, _, _ in spans], starts, want, out.view(np.uint8), got)
    opened = got >= 0
    complete = got == want
    read = got[opened & (got > 0)]
    first = starts[opened & (got > 0)]
    STATS.files_opened += int(opened.sum())
    STATS.reads += int(opened.sum())
    STATS.bytes_read += int(read.sum())
    STATS.pages_read += int(((first + read - 1) // PAGE_SIZE - first // PAGE_SIZE + 1).sum())
    return out, complete


def read_ranges(path, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes of ranges ``[start, start + length)`` of one local file, back to back in one array, with one
    read per run of adjacent ranges. For records a selective read picks from all over a 1 GiB commit-log file:
    a read copies the few hundred bytes asked for, where touching a memory map maps a window of pages around
    each record and grows the process's resident set until it is released again. A file shorter than a range
    is a :class:`~rocketstore_spark.errors.CorruptRecordError` naming it and the offset."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    bad = np.flatnonzero((starts < 0) | (lengths < 0))
    if len(bad):  # sizes and offsets come from consume-queue units: a damaged one must not size the copy
        at = int(bad[0])
        raise CorruptRecordError(f"expected a range of at least 0 bytes at a byte offset of at least 0, found "
                                 f"{int(lengths[at])} bytes at byte {int(starts[at])}", path, max(int(starts[at]), 0))
    ends = starts + lengths
    out = np.empty(int((ends - starts).sum()), dtype=np.uint8)
    if not len(out):
        return out
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_start = starts[np.concatenate(([0], breaks))]
    run_length = ends[np.append(breaks, len(starts)) - 1] - run_start
    run, got = _native.read_ranges(os.fspath(path), run_start, run_length, out)  # one read per run, GIL released
    if run >= 0:
        start, length = int(run_start[run]), int(run_length[run])
        raise CorruptRecordError(f"expected {length} bytes of records at byte {start}, the file ends after {got} "
                                 "(truncated under the read?)", path, start + got)
    STATS.files_opened += 1
    STATS.reads += len(run_start)
    STATS.bytes_read += len(out)
    pages = (run_start + run_length - 1) // PAGE_SIZE - run_start // PAGE_SIZE + 1
    STATS.pages_read += int(pages[run_length > 0].sum())
    return out


def release_pages(mm: mmap.mmap, start: int, end: int) -> None:
    """Drop this process's pages of ``mm`` in ``[start, end)`` (``MADV_DONTNEED``): the map stays valid and its
    bytes come back from the file when touched again."""
    first = start - start % mmap.PAGESIZE
    last = min(end - end % mmap.PAGESIZE, len(mm))
    if last > first and hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED, first, last - first)


def close_map(mm: mmap.mmap) -> None:
    """Close ``mm`` unless arrays still use it (then it closes with the last of them)."""
    try:
        mm.close()
    except BufferError:
        pass


def count_mapped_file() -> None:
    """Record that a whole file was memory-mapped (see :class:`ReadStats`)."""
    STATS.files_mapped += 1


__all__ = ["ReadStats", "STATS", "counting", "ClosingFile", "OpenFile", "count_mapped_file", "read_ranges",
           "read_spans", "release_pages", "close_map", "PAGE_SIZE"]
