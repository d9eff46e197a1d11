"""``MappedFileQueue``: a directory of fixed-size files named by the byte offset of their first byte.

Used for the commit log (one directory) and for every consume queue (one directory per topic/queue).
The commit log's files are memory-mapped read-only on demand; consume queues read windows of theirs through
:meth:`MappedFileQueue.open_file` instead (see :mod:`.file_reads`). Nothing here ever writes.
"""

from __future__ import annotations

import mmap
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import StoreConfigError, StoreFormatError
from ..format.layout import FILE_NAME_DIGITS
from .file_reads import OpenFile, count_mapped_file
from .strays import note, stray_reason

RESIDENT_BUDGET = 128 << 20  # bytes a reader reads through one file's map before letting its pages go


@dataclass(frozen=True)
class MappedFileInfo:
    """One file of a queue: its location, the absolute offset of its first byte and its length on disk."""

    location: str  # the path as text: a listing of 20,000 queues builds no Path objects until one is needed
    from_offset: int
    length: int

    @property
    def path(self) -> Path:
        return Path(self.location)


def list_offset_files(directory: Path, strays: Optional[list] = None) -> list[MappedFileInfo]:
    """The files of ``directory`` sorted by start offset. Entries that cannot be store files (hidden names, names
    that are not offsets, sub-directories) and zero-length files at the end of the sequence (``MappedFileQueue``
    deletes such a last file when it loads) are skipped and appended to ``strays`` when given."""
    infos = []
    if not os.path.isdir(directory):
        return infos
    for entry in os.scandir(directory):
        reason = stray_reason(entry, FILE_NAME_DIGITS)
        if reason:
            note(strays, entry.path, reason)
            continue
        infos.append(MappedFileInfo(entry.path, int(entry.name), entry.stat().st_size))
    infos.sort(key=lambda f: f.from_offset)
    while infos and infos[-1].length == 0:
        note(strays, infos[-1].path, "zero-length file at the end of the queue (a broker deletes it on loading)")
        infos.pop()
    return infos


def detect_file_size(files: list[MappedFileInfo], configured: Optional[int], what: str,
                     option: str) -> Optional[int]:
    """The common length of ``files``: every file of a MappedFileQueue has the configured size.

    Returns ``configured`` (or None) when there are no files; raises when lengths differ or contradict it.
    """
    if not files:
        return configured
    lengths = Counter(f.length for f in files)
    if len(lengths) != 1:
        # the most common length is the configured one: name a file that differs from it
        usual = max(lengths, key=lambda n: (lengths[n], n))
        odd = next(f for f in files if f.length != usual)
        raise StoreConfigError(
            f"{what} files must all have the same length: expected {usual} bytes like "
            f"{next(f for f in files if f.length == usual).path}, found {odd.length} bytes in {odd.path} "
            "(a truncated or half-copied file?)")
    size = next(iter(lengths))
    if size <= 0:
        raise StoreConfigError(f"{what} file {files[0].path} is empty; expected a preallocated file")
    if configured is not None and configured != size:
        raise StoreConfigError(
            f"{option}={configured} contradicts the {what} files, which are {size} bytes long "
            f"(e.g. {files[0].path}); drop the option or pass {option}={size}")
    return size


class MappedFileQueue:
    """Read-only view of one MappedFileQueue directory (``commitlog/`` or ``consumequeue/<topic>/<id>/``)."""

    def __init__(self, directory: Path, file_size: int, files: Optional[list[MappedFileInfo]] = None,
                 strays: Optional[list] = None):
        self._directory = directory
        self.file_size = file_size
        self.files = list_offset_files(self.directory, strays) if files is None else files
        self._maps: dict[int, tuple[mmap.mmap, np.ndarray]] = {}
        self._touched: dict[int, int] = {}  # bytes read through each map since its pages were last released
        for i, f in enumerate(self.files):
            if f.length != file_size:
                raise StoreConfigError(
                    f"{f.path} is {f.length} bytes long; every file of this queue must be {file_size} bytes")
            if f.from_offset % file_size:
                raise StoreFormatError(
                    f"file name {f.path.name} is not a multiple of the file size {file_size}", f.path)
            if i and f.from_offset != self.files[i - 1].from_offset + file_size:
                raise StoreFormatError(
                    f"gap in {self.directory}: expected a file starting at "
                    f"{self.files[i - 1].from_offset + file_size}, found {f.path.name}", f.path)

    @property
    def directory(self) -> Path:
        if not isinstance(self._directory, Path):
            self._directory = Path(self._directory)
        return self._directory

    @property
    def min_offset(self) -> int:
        """Start offset of the first file (0 when there is none)."""
        return self.files[0].from_offset if self.files else 0

    @property
    def end_offset(self) -> int:
        """Offset just past the last file."""
        return self.files[-1].from_offset + self.file_size if self.files else 0

    def index_of(self, offset: int) -> int:
        """Index of the file holding absolute ``offset``, or -1 when no file holds it."""
        if not self.files or offset < self.min_offset or offset >= self.end_offset:
            return -1
        return (offset - self.min_offset) // self.file_size

    def buffer(self, index: int) -> np.ndarray:
        """The whole file ``index`` as a read-only uint8 array backed by a memory map."""
        cached = self._maps.get(index)
        if cached is None:
            info = self.files[index]
            with open(info.path, "rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            count_mapped_file()
            cached = (mm, np.frombuffer(mm, dtype=np.uint8))
            self._maps[index] = cached
        return cached[1]

    def release(self, index: int, start: int, end: int) -> None:
        """Drop this process's pages of file ``index`` in ``[start, end)`` (``MADV_DONTNEED``): the map stays
        valid and its bytes come back from the page cache when touched again, but a walk over a whole 1 GiB
        file no longer keeps the file resident in the process."""
        cached = self._maps.get(index)
        if cached is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        first = start - start % mmap.PAGESIZE
        last = min(end - end % mmap.PAGESIZE, len(cached[0]))
        if last > first:
            cached[0].madvise(mmap.MADV_DONTNEED, first, last - first)

    def note_read(self, index: int, nbytes: int) -> None:
        """Count ``nbytes`` read from file ``index`` through its map; past :data:`RESIDENT_BUDGET` the file's
        pages are released (they stay in the page cache), so a reader scanning gigabytes holds a bounded part."""
        self._touched[index] = self._touched.get(index, 0) + nbytes
        if self._touched[index] >= RESIDENT_BUDGET:
            self._touched[index] = 0
            self.release(index, 0, self.file_size)

    def open_file(self, index: int) -> OpenFile:
        """File ``index`` opened for windowed reads (counted; close it, or use it in a ``with``)."""
        return OpenFile(self.files[index].location)

    def close(self) -> None:
        """Drop the maps (arrays handed out keep their own reference alive)."""
        self._maps.clear()
