"""Paths of a remote store: a ``pathlib`` path whose first part is the scheme (``s3:``), so that joining,
``name``, ``parent`` and pickling work as for local paths, while the filesystem questions (``exists``,
``is_dir``, ``iterdir``, ``stat``, ``open``) go to the bucket's :class:`~.remote_fs.RemoteFilesystem`.
``str()`` gives the URI; ``os`` functions given one fail loudly (no such local file) instead of reading a
local path by accident.
"""

from __future__ import annotations

import fnmatch
import io
from pathlib import PosixPath

from ...errors import UnsupportedLocationError
from .remote_fs import RemoteEntry, RemoteFilesystem, filesystem_of

OPEN_BUFFER_BYTES = 64 << 10  # what one read of an opened remote file fetches at least (headers are small)


class _RangeReader(io.RawIOBase):
    """A remote object as a seekable raw file: each read is one ranged GET (no download of the object)."""

    def __init__(self, rfs: RemoteFilesystem, key: str, size: int):
        self._rfs, self._key, self._size, self._pos = rfs, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def readinto(self, buffer) -> int:
        length = max(min(len(buffer), self._size - self._pos), 0)
        if length:
            memoryview(buffer).cast("B")[:length] = self._rfs.read_range(self._key, self._pos, length)
            self._pos += length
        return length


class RemotePath(PosixPath):
    """A file or directory of a remote store (see the module docstring); ``str()`` gives its URI."""

    def filesystem_and_key(self) -> tuple[RemoteFilesystem, str]:
        """(the filesystem holding this path, its key there)."""
        parts = self.parts
        scheme = parts[0].rstrip(":").lower()
        return filesystem_of(scheme, parts[1]), "/".join(parts[2:])

    @property
    def uri(self) -> str:
        rfs, key = self.filesystem_and_key()
        return rfs.uri(key)

    def __str__(self) -> str:
        parts = self.parts
        return f"{parts[0].lower()}//" + "/".join(parts[1:])

    def __fspath__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def expanduser(self):
        return self

    def resolve(self, strict: bool = False):
        return self

    def stat(self, *, follow_symlinks: bool = True):
        rfs, key = self.filesystem_and_key()
        entry = rfs.entry(key)
        if entry is None:
            raise FileNotFoundError(2, "no such object", str(self))
        return entry.stat()

    def exists(self) -> bool:
        rfs, key = self.filesystem_and_key()
        return rfs.entry(key) is not None

    def is_dir(self) -> bool:
        rfs, key = self.filesystem_and_key()
        entry = rfs.entry(key)
        return entry is not None and entry.directory

    def is_file(self) -> bool:
        rfs, key = self.filesystem_and_key()
        entry = rfs.entry(key)
        return entry is not None and not entry.directory

    def scandir(self) -> list[RemoteEntry]:
        rfs, key = self.filesystem_and_key()
        listing = rfs.list_dir(key)
        if listing is None:
            raise FileNotFoundError(2, "no such directory", str(self))
        return list(listing.values())

    def iterdir(self):
        for entry in self.scandir():
            yield self / entry.name

    def glob(self, pattern: str):
        if "/" in pattern:
            raise NotImplementedError("remote glob of one directory level only")
        if not self.is_dir():
            return iter(())  # as pathlib's glob of a missing directory
        return (p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern))

    def open(self, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        if "w" in mode or "a" in mode or "+" in mode:
            raise UnsupportedLocationError(f"{self}: remote stores are read-only for rocketstore")
        rfs, key = self.filesystem_and_key()
        raw = io.BufferedReader(_RangeReader(rfs, key, self.stat().st_size), OPEN_BUFFER_BYTES)
        return raw if "b" in mode else io.TextIOWrapper(raw, encoding=encoding or "utf-8", errors=errors)

    def read_bytes(self) -> bytes:
        with self.open("rb") as fh:
            return fh.read()

    def read_text(self, encoding=None, errors=None) -> str:
        with self.open("r", encoding=encoding, errors=errors) as fh:
            return fh.read()

    def read_range(self, start: int, length: int) -> bytes:
        rfs, key = self.filesystem_and_key()
        return rfs.read_range(key, start, length)



__all__ = ["RemotePath"]
