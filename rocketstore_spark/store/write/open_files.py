"""The store files a writer keeps open while it writes: each created once at its full size, opened once, forced
to disk together and closed together. A write into thousands of queues keeps the most recently used files open,
not one descriptor per queue (the process's limit); a file let go is forced to disk first when flushes sync.

A MappedFileQueue file shorter than its size makes the whole directory unreadable (for the broker too), so a
file is never extended in place: :func:`~..files.store_files.create_full_size` makes it whole under a temporary
name first, whatever kills the process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ..files.store_files import create_full_size

MAX_OPEN_FILES = 256  # data files (commit log, consume queues) a writer keeps open at once


class OpenFiles:
    """File descriptors by path, for the commit-log and consume-queue writers of one store."""

    def __init__(self, max_open: Optional[int] = None):
        self._fds: dict[Path, int] = {}  # least recently used first
        self.max_open = MAX_OPEN_FILES if max_open is None else max_open
        self.sync_evicted = True  # SYNC_FLUSH: a file closed before the flush is forced to disk first

    def __contains__(self, path: Path) -> bool:
        return path in self._fds

    def fd(self, path: Path, size: int) -> int:
        """The descriptor of ``path``, creating the file at ``size`` bytes when it does not exist yet."""
        fd = self._fds.pop(path, None)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                create_full_size(path, size)  # never a short file in the store, whatever kills us
                fd = os.open(path, os.O_RDWR)
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            while len(self._fds) >= self.max_open:
                oldest = self._fds.pop(next(iter(self._fds)))
                if self.sync_evicted:
                    os.fsync(oldest)
                os.close(oldest)
        self._fds[path] = fd  # most recently used last
        return fd

    def forget(self, path: Path) -> None:
        """Close the descriptor of ``path``, if one is open, without forcing it: the file was replaced (renamed
        over), and a descriptor opened before reaches the old one."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def fsync_all(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)

    def close_all(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


__all__ = ["OpenFiles", "MAX_OPEN_FILES"]
