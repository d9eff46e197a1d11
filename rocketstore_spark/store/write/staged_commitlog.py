"""A job's staged commit-log files becoming the store's (the in-place publication).

Spark tasks wrote their records into ``.rocketstore/staging/<job>/commitlog/`` at the offsets the store gives them
(:mod:`.staging`), encoded final: physical and queue offsets and store times as their reservations gave them. When
the job is published in place, :func:`move_into_store` renames the files into ``commitlog/``. The store file its
end was in holds the store's records and the job's: the job's part is copied into it, or, when the commit forces the
files to disk anyway and the store's part is the smaller, the store's part into the staged file, which then
replaces the store's.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ...errors import StoreFormatError
from ..files.disk_full import disk_full
from ..files.store_files import fsync_path
from ..files.writable_window import allocate

COPY_CHUNK_BYTES = 64 * 1024 * 1024


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
    for path, target, copy in _moves(staged, commitlog, start, end, file_size, forced):
        if copy is None:
            os.replace(path, target)
        else:
            source, dest, lo, hi, what = copy
            _copy_range(source, dest, lo, hi, what)
            if dest == path:
                with disk_full(path, what):
                    fsync_path(path)  # the store's records must be on disk before their file is replaced
                os.replace(path, target)
            else:
                path.unlink()
        out.append(target)
    return out


def allocate_copies(staged: Path, commitlog: Path, start: int, end: int, file_size: int, forced: bool) -> None:
    """Give the ranges :func:`move_into_store` will copy their disk blocks now (``fallocate``), so that a full
    disk fails here, before anything else of the publication runs beside the move, rather than half-way through
    a copy."""
    for _, _, copy in _moves(staged, commitlog, start, end, file_size, forced):
        if copy is not None:
            _, dest, lo, hi, what = copy
            fd = os.open(dest, os.O_RDWR)
            try:
                with disk_full(dest, what):
                    allocate(fd, lo, hi - lo, dest)
            finally:
                os.close(fd)


def _moves(staged: Path, commitlog: Path, start: int, end: int, file_size: int, forced: bool):
    """``(staged file, store file, copy)`` for each staged file, in order: ``copy`` is None for a file renamed
    as it is, else ``(source, destination, lo, hi, what)``, the bytes [lo, hi) copied before the move (see
    :func:`move_into_store`; the destination is the staged file when it then replaces the store's)."""
    for path in sorted(p for p in staged.iterdir() if p.is_file()):
        file_start = int(path.name)
        target = commitlog / path.name
        copy = None
        if target.exists():
            lo = max(start, file_start) - file_start  # the store's bytes end here, the job's begin
            hi = min(end, file_start + file_size) - file_start
            if forced and lo < hi - lo:
                copy = (target, path, 0, lo, "the staged commit log")
            else:
                copy = (path, target, lo, hi, "the commit log")
        yield path, target, copy


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


__all__ = ["allocate_copies", "move_into_store"]
