"""The one seam between the store's file readers and where the bytes are: local files or a remote store.

Every reader in this package lists directories with :func:`scandir`, reads windows with :func:`open_file` and
indexes whole files through :func:`map_file`; paths come from :func:`as_path`. For a local path these are
``os.scandir``, ``pread`` and a memory map (whose :meth:`LocalFileMap.ensure` costs nothing); for a
:class:`~.remote_fs.RemotePath` they are the bucket's cached listing, ranged GETs and a
:class:`~.remote_map.RemoteFileMap`. The format and read layers above never ask which one they have: they call
``ensure`` before touching bytes of a mapped file, which is free locally and a fetch remotely.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Union

import numpy as np

from ...errors import StoreNotFoundError
from .file_reads import STATS, ClosingFile, OpenFile, close_map, count_mapped_file, release_pages
from .remote_fs import REMOTE_SCHEMES
from .remote_map import RemoteFileMap
from .remote_path import RemotePath

PathLike = Union[str, os.PathLike]


def _names_remote(text: str) -> bool:
    """Whether ``text`` is a remote URI (either spelling: a ``pathlib`` join turns ``s3://b/k`` into ``s3:/b/k``)."""
    if ":/" not in text:
        return False
    head = text.split(":/", 1)[0].lower()
    return head in REMOTE_SCHEMES and "/" not in head


def as_path(location: PathLike) -> Path:
    """``location`` as a path of the file layer: a :class:`RemotePath` for a remote URI, a local ``Path``
    otherwise (a local ``Path`` is returned as it is: opening 20,000 queues asks this ~80,000 times)."""
    if isinstance(location, RemotePath):
        return location
    text = os.fspath(location)
    if _names_remote(text):
        return RemotePath(text)
    return location if isinstance(location, Path) else Path(text)


def is_remote(location: PathLike) -> bool:
    return isinstance(location, RemotePath) or _names_remote(os.fspath(location))


def scandir(directory: PathLike) -> list:
    """The entries of ``directory`` (``os.DirEntry`` or :class:`~.remote_fs.RemoteEntry`: ``name``, ``path``,
    ``is_dir()``, ``is_file()``, ``stat().st_size``); empty when it is no directory."""
    if is_remote(directory):
        path = as_path(directory)
        return path.scandir() if path.is_dir() else []
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


class RemoteOpenFile(ClosingFile):
    """A remote object opened for windowed reads: the interface of :class:`~.file_reads.OpenFile`."""

    round_trips_cost = True  # searches read bigger windows in fewer requests (see unit_search.valid_prefix)

    def __init__(self, path: RemotePath):
        self.path = path
        self._rfs, self._key = path.filesystem_and_key()
        self._handle = self._rfs.open_input(self._key)
        self._size = path.stat().st_size
        STATS.files_opened += 1

    def close(self) -> None:
        self._handle = None

    def read_array(self, start: int, count: int, dtype: np.dtype) -> np.ndarray:
        """``count`` items of ``dtype`` from byte ``start`` (fewer at the object's end: the caller checks)."""
        length = max(min(count * dtype.itemsize, self._size - start), 0)
        if length <= 0:
            return np.empty(0, dtype=dtype)
        data = self._rfs.read_range(self._key, start, length, self._handle)
        STATS.reads += 1
        STATS.bytes_read += length
        return np.frombuffer(data, dtype=dtype, count=length // dtype.itemsize).copy()

    def data_end(self, length: int) -> int:
        """An object has no holes to report: its whole length."""
        return length


def open_file(location: PathLike):
    """The file at ``location`` opened for windowed reads (use it in a ``with``)."""
    return RemoteOpenFile(as_path(location)) if is_remote(location) else OpenFile(location)


class LocalFileMap:
    """A local file memory-mapped read-only; every range is always readable."""

    def __init__(self, path: Path):
        with open(path, "rb") as fh:
            self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.size = len(self._mm)
        self.array = np.frombuffer(self._mm, dtype=np.uint8)

    def ensure(self, start: int, end: int, ahead: int = 0, until: int = -1) -> None:
        """Local bytes are always there (the page cache fetches them on touch)."""

    def ensure_ranges(self, starts, ends) -> None:
        """Local bytes are always there."""

    def release(self, start: int, end: int) -> None:
        """Drop this process's pages of ``[start, end)``; the map stays valid (the page cache keeps them)."""
        release_pages(self._mm, start, end)

    def close(self) -> None:
        self.array = None
        close_map(self._mm)


def map_file(location: PathLike, size: int = -1):
    """The whole file at ``location`` as ``.array`` (uint8); read ``[a, b)`` after ``.ensure(a, b)``."""
    path = as_path(location)
    count_mapped_file()
    if isinstance(path, RemotePath):
        rfs, key = path.filesystem_and_key()
        if size < 0:
            size = path.stat().st_size
        return RemoteFileMap(rfs, key, size)
    try:
        return LocalFileMap(path)
    except FileNotFoundError as e:
        raise StoreNotFoundError(f"{path} vanished while the store was read (expired or deleted?)") from e


def glob_remote(pattern: PathLike) -> list[str]:
    """The directories a remote URI with glob characters (``s3://b/archive/*/store``) names, sorted; each level
    with a pattern is one listing."""
    import fnmatch
    import glob as globbing

    path = as_path(pattern)
    found = [path.parents[len(path.parts) - 3]]  # scheme and bucket/host never hold patterns
    for part in path.parts[2:]:
        if globbing.has_magic(part):
            found = [d / e.name for d in found for e in scandir(d) if e.is_dir() and fnmatch.fnmatchcase(e.name, part)]
        else:
            found = [d / part for d in found]
    return sorted(str(d) for d in found if d.is_dir())


def forget_listings(location: PathLike) -> None:
    """Let the next listing of a remote store see its objects as they are now (a no-op for local paths)."""
    path = as_path(location)
    if isinstance(path, RemotePath):
        path.filesystem_and_key()[0].forget()


__all__ = ["as_path", "is_remote", "scandir", "glob_remote", "open_file", "map_file", "forget_listings", "LocalFileMap",
           "RemotePath"]
