"""The store files a writer keeps open while it writes: each created once at its full size, opened once, forced
to disk together and closed together.

A MappedFileQueue file shorter than its size makes the whole directory unreadable (for the broker too), so a
file is never extended in place: :func:`~..files.store_files.create_full_size` makes it whole under a temporary
name first, whatever kills the process.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..files.store_files import create_full_size


class OpenFiles:
    """File descriptors by path, for the commit-log and consume-queue writers of one store."""

    def __init__(self):
        self._fds: dict[Path, int] = {}

    def fd(self, path: Path, size: int) -> int:
        """The descriptor of ``path``, creating the file at ``size`` bytes when it does not exist yet."""
        fd = self._fds.get(path)
        if fd is None:
            if not path.exists():
                create_full_size(path, size)  # never a short file in the store, whatever kills us
            fd = os.open(path, os.O_RDWR, 0o644)
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self._fds[path] = fd
        return fd

    def fsync_all(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)

    def close_all(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def fsync_directory(directory: Path) -> None:
    """Force a directory's entries (renames into it) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["OpenFiles", "fsync_directory"]
