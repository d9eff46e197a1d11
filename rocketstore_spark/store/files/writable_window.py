"""A byte range of a file, its disk space allocated, mapped writable: how staged records are written.

Several Spark tasks of one job write their reservations into the same staged commit-log file at once. Buffered
``pwrite`` calls on one file take its inode lock in turn, and each copies page by page through the filesystem's
write path; the tasks' copies then run one after another (measured on ext4, two processes writing 512 MiB each in
interleaved 32 MiB ranges of one file: 1.7-2.3 s with ``pwrite``, 0.27-0.36 s through maps of allocated
ranges; separate files with ``pwrite``: 0.6-1.3 s). Stores through a shared map take no file lock.

A store through a map into a file whose blocks are not allocated would meet a full disk as ``SIGBUS``, which
kills the process. The range is therefore allocated first with ``fallocate(2)`` (mode 0: holes get blocks,
bytes already written stay), which reports a full disk as ``ENOSPC`` like any write. Where the filesystem cannot
allocate ahead (``EOPNOTSUPP``: some network and FUSE filesystems), or libc has no ``fallocate``, no window is
made and the caller writes with ``pwrite``. glibc's ``posix_fallocate`` is not used: where the filesystem lacks
``fallocate`` it writes a zero byte into every block, over what another task may just have written there.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Optional

import numpy as np

#: errors of ``fallocate(2)`` that mean "this filesystem (or file) cannot allocate ahead", not a failure
_NOT_SUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENODEV})


def _libc_fallocate():
    """``fallocate(2)`` through ctypes (it releases the GIL during the call); None where libc has none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError, TypeError):  # no libc to load, or no fallocate in it (not Linux)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_FALLOCATE = _libc_fallocate()


def allocate(fd: int, offset: int, length: int, path=None) -> bool:
    """Give bytes ``[offset, offset + length)`` of ``fd`` disk blocks (mode 0: holes only, data kept, the file's
    size grows when the range runs past it). False where the filesystem cannot; a full disk raises ``OSError``
    (``ENOSPC``/``EDQUOT``) naming ``path``."""
    if _FALLOCATE is None or length <= 0:
        return _FALLOCATE is not None
    while True:
        if _FALLOCATE(fd, 0, offset, length) == 0:
            return True
        code = ctypes.get_errno()
        if code == errno.EINTR:
            continue
        if code in _NOT_SUPPORTED:
            return False
        raise OSError(code, os.strerror(code), None if path is None else os.fspath(path))


class WritableWindow:
    """Bytes ``[lo, hi)`` of an open file, allocated on disk and mapped writable (see the module docstring).

    ``view`` is a uint8 array over them (``view[0]`` is byte ``lo``). Close it (or use it as a context manager)
    to unmap; the bytes stored stay in the page cache as the file's, written back by the kernel."""

    def __init__(self, mapping: mmap.mmap, skip: int, lo: int, hi: int):
        self._mapping = mapping
        self.lo, self.hi = lo, hi
        self.view = np.frombuffer(mapping, dtype=np.uint8, count=hi - lo, offset=skip)

    @classmethod
    def open(cls, fd: int, lo: int, hi: int, path=None) -> Optional["WritableWindow"]:
        """Allocate and map ``[lo, hi)`` of ``fd`` (which must reach ``hi`` after allocating); None where the
        filesystem cannot allocate ahead (write with ``pwrite`` then). A full disk raises ``OSError``."""
        if not allocate(fd, lo, hi - lo, path):
            return None
        start = lo - lo % mmap.ALLOCATIONGRANULARITY  # a map begins on a page
        return cls(mmap.mmap(fd, hi - start, offset=start), lo - start, lo, hi)

    def write(self, at: int, data) -> None:
        """Store ``data`` at file offset ``at`` (inside the window)."""
        size = len(data)
        if at < self.lo or at + size > self.hi:
            raise ValueError(f"bytes [{at}, {at + size}) lie outside the window [{self.lo}, {self.hi})")
        self.view[at - self.lo:at - self.lo + size] = np.frombuffer(data, dtype=np.uint8)

    def close(self) -> None:
        if self._mapping is not None:
            self.view = None  # the array exports the map's buffer: it must go before the map can close
            self._mapping.close()
            self._mapping = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["WritableWindow", "allocate"]
