"""A job's staged commit-log files becoming the store's (the in-place publication).

Spark tasks wrote their records into ``.rocketstore/staging/<job>/commitlog/`` at the offsets the store gives them
(:mod:`.staging`), physical offsets included. When the job is published in place, :func:`patch_staged` fills in
what only the publisher knows — each record's queue offset and store time — through a memory map of pages still
in the page cache, and :func:`move_into_store` renames the files into ``commitlog/``. The store file its end was
in holds the store's records and the job's: the job's part is copied into it, or, when the commit forces the
files to disk anyway and the store's part is the smaller, the store's part into the staged file, which then
replaces the store's.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path

import numpy as np

from ...errors import StoreFormatError
from ..files.disk_full import disk_full
from ..files.store_files import fsync_path
from ..format import layout as L
from ..format.encoder import patch_records
from .encoded_batch import EncodedBatch

COPY_CHUNK_BYTES = 64 * 1024 * 1024


def patch_staged(staged: Path, file_size: int, chunks: list[EncodedBatch], stamps) -> None:
    """Fill in queue offset and store time of every staged record, in the staged files (the tasks wrote the
    physical offsets, which are final when the job is published in place)."""
    maps: dict[int, tuple] = {}
    try:
        for chunk, (queue_offset, store_ts) in zip(chunks, stamps):
            if not len(chunk):
                continue
            file_no = chunk.phy // file_size
            # a chunk's records lie in ascending order: each run of one file is a slice (no gathering)
            cuts = (np.flatnonzero(np.diff(file_no)) + 1).tolist()
            for lo, hi in zip([0, *cuts], [*cuts, len(file_no)]):
                f = int(file_no[lo])
                if f not in maps:
                    with open(staged / L.offset_to_file_name(f * file_size), "r+b") as fh:
                        mm = mmap.mmap(fh.fileno(), file_size)
                    maps[f] = (mm, np.frombuffer(mm, dtype=np.uint8))
                at = chunk.phy[lo:hi] - f * file_size
                _prefault(maps[f][1], int(at[0]), int(at[-1] + chunk.ts_pos[hi - 1]) + 8)  # up to the last store time
                patch_records(maps[f][1], at, queue_offset[lo:hi], chunk.ts_pos[lo:hi], store_ts[lo:hi],
                              path=str(staged / L.offset_to_file_name(f * file_size)))
    finally:
        for f in list(maps):
            mm = maps.pop(f)[0]  # the numpy view went with the tuple: the map can close
            mm.close()


MADV_POPULATE_WRITE = 23  # Linux >= 5.14: fault a range in writable with one call (not in Python 3.11's mmap)

#: the most :func:`_prefault` maps in one call: the call holds the process's memory-map lock, which the index
#: thread of the same commit needs to map a new index file
PREFAULT_STEP_BYTES = 32 * 1024 * 1024


def _libc_madvise():
    """``madvise(2)`` through ctypes, which releases the GIL during the call (``mmap.madvise`` holds it: a
    commit's index thread would stand still while the staged files are prefaulted); None where libc has none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError, TypeError):  # no libc to load (TypeError: a platform without dlopen(NULL))
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _libc_madvise()


def _prefault(view: np.ndarray, lo: int, hi: int) -> None:
    """Map the pages of bytes [lo, hi) of ``view`` (a staged file's writable map) writable, a system call per
    :data:`PREFAULT_STEP_BYTES` instead of a page fault per page (the patch writes into every record). Only the
    records' range: the staged file's holes must stay holes. The kernel only maps pages of the mapping: an
    address range it refuses (an older kernel: EINVAL) leaves the patch to fault the pages in one by one."""
    if _MADVISE is None:
        return
    lo -= lo % mmap.PAGESIZE
    hi = min(hi, len(view))
    base = view.ctypes.data  # page-aligned: a map's first byte
    for at in range(lo, hi, PREFAULT_STEP_BYTES):
        if _MADVISE(base + at, min(PREFAULT_STEP_BYTES, hi - at), MADV_POPULATE_WRITE) != 0:
            return


def move_into_store(staged: Path, commitlog: Path, start: int, end: int, file_size: int,
                    forced: bool) -> list[Path]:
    """Make the staged files the store's: rename each. The file the store's end was in (``start``) holds bytes
    on both sides, and the job's part is copied into the store's file; except that when the commit forces the
    store's files to disk anyway (``forced``: SYNC_FLUSH) and the store's part is the smaller, the store's
    records before ``start`` are copied into the staged file instead, which is forced and then replaces the
    store's (a crash leaves either file whole, the store's records on disk in both). Under ASYNC_FLUSH that
    force would be a cost of its own (the whole file written back inside the commit), so the job's part is
    copied. Returns the store files written."""
    commitlog.mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted(p for p in staged.iterdir() if p.is_file()):
        file_start = int(path.name)
        target = commitlog / path.name
        if target.exists():
            lo = max(start, file_start) - file_start  # the store's bytes end here, the job's begin
            hi = min(end, file_start + file_size) - file_start
            if forced and lo < hi - lo:
                _copy_range(target, path, 0, lo, "the staged commit log")
                with disk_full(path, "the staged commit log"):
                    fsync_path(path)  # the store's records must be on disk before their file is replaced
                os.replace(path, target)
            else:
                _copy_range(path, target, lo, hi, "the commit log")
                path.unlink()
        else:
            os.replace(path, target)
        out.append(target)
    return out


def _copy_range(source: Path, target: Path, lo: int, hi: int, what: str) -> None:
    """Copy bytes [lo, hi) of ``source`` to the same place in ``target`` (``what``: the target, for a full
    disk's error; in the kernel where it can)."""
    with open(source, "rb") as src, open(target, "r+b") as dst, disk_full(target, what):
        pos = lo
        while pos < hi:
            count = min(hi - pos, COPY_CHUNK_BYTES)
            try:
                done = os.copy_file_range(src.fileno(), dst.fileno(), count, pos, pos)
            except OSError as e:  # no in-kernel copy between these files: copy through memory
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                done = os.pwrite(dst.fileno(), os.pread(src.fileno(), count, pos), pos)
            if done <= 0:
                raise StoreFormatError(f"commit-log file ends early: expected bytes up to {hi}, found {pos}; the "
                                       "job was not published, run it again", str(source), pos)
            pos += done


__all__ = ["patch_staged", "move_into_store"]
