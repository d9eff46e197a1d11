"""``MappedFileQueue``: a directory of fixed-size files named by the byte offset of their first byte.

Used for the commit log (one directory) and for every consume queue (one directory per topic/queue).
The commit log's files are mapped read-only on demand (:func:`~.byte_source.map_file`: a memory map locally,
fetched ranges remotely; readers call :meth:`MappedFileQueue.ensure` before touching bytes); consume queues read
windows of theirs through :meth:`MappedFileQueue.open_file` instead. Nothing here ever writes.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import StoreConfigError, StoreFormatError
from ..format import layout as L
from ..format.layout import FILE_NAME_DIGITS
from .byte_source import LocalFileMap, as_path, is_remote, map_file, open_file, scandir
from .file_reads import PAGE_SIZE, read_ranges
from .remote_map import SEQUENTIAL_STEP
from .strays import note, stray_reason

log = logging.getLogger("rocketstore_spark")

MAX_REMOTE_MAPS = 4  # remote files a queue keeps fetched data of (recovery walks the last three)
RESIDENT_BUDGET = 64 << 20  # mapped store bytes a reader holds before letting their pages go
RESIDENT_CHECK_BYTES = 8 << 20  # bytes read between looks at the resident size


def resident_file_bytes() -> Optional[int]:
    """File-backed bytes resident in this process (Linux ``/proc/self/statm``), None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[2]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class MappedFileInfo:
    """One file of a queue: its location, the absolute offset of its first byte and its length on disk."""

    location: str  # the path as text: a listing of 20,000 queues builds no Path objects until one is needed
    from_offset: int
    length: int

    @property
    def path(self) -> Path:
        return as_path(self.location)


def list_offset_files(directory: Path, strays: Optional[list] = None) -> list[MappedFileInfo]:
    """The files of ``directory`` sorted by start offset. Entries that cannot be store files (hidden names, names
    that are not offsets, sub-directories) and zero-length files at the end of the sequence (``MappedFileQueue``
    deletes such a last file when it loads) are skipped and appended to ``strays`` when given."""
    infos = []
    for entry in scandir(directory):
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


def list_offset_files_in(directories, strays: Optional[list] = None) -> list[MappedFileInfo]:
    """The files of several directories of one queue (a commit log split across paths, as a broker's
    ``MultiPathMappedFileQueue`` loads it) sorted by start offset; one offset in two directories is an error."""
    if len(directories) == 1:
        return list_offset_files(directories[0], strays)
    by_offset: dict = {}
    for directory in directories:
        for f in list_offset_files(directory, strays):
            if f.from_offset in by_offset:
                raise StoreFormatError(f"commit-log file {f.path.name} is in two of the commit-log paths "
                                       f"({by_offset[f.from_offset].location} and {f.location}); keep one copy",
                                       f.path)
            by_offset[f.from_offset] = f
    infos = [by_offset[k] for k in sorted(by_offset)]
    while infos and infos[-1].length == 0:
        note(strays, infos[-1].path, "zero-length file at the end of the queue (a broker deletes it on loading)")
        infos.pop()
    return infos


def missing_file_names(missing: list[tuple[int, int]], file_size: int) -> list[str]:
    """The names of the files of ``missing`` ranges (``MappedFileQueue.missing``), oldest first."""
    return [L.offset_to_file_name(at) for start, end in missing for at in range(start, end, file_size)]


def detect_file_size(files: list[MappedFileInfo], configured: Optional[int], what: str,
                     option: str, cut_last: bool = False) -> Optional[int]:
    """The common length of ``files``: every file of a MappedFileQueue has the configured size.
    ``cut_last``: the last file may be a cut copy, shorter than the size (see :func:`_cut_last_file`).

    Returns ``configured`` (or None) when there are no files; raises when lengths differ or contradict it.
    """
    if not files:
        return configured
    if cut_last:
        cut = _cut_last_file(files, configured, what, option)
        if cut is not None:
            return cut
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


def _cut_last_file(files: list[MappedFileInfo], configured: Optional[int], what: str, option: str
                   ) -> Optional[int]:
    """The file size of a queue whose last file is cut (a copy stopped early: the broker preallocates every file
    to the full size), with a warning naming the file; None when the last file is not recognisably cut. A last
    file is cut when it is shorter than its siblings or than ``configured``; a lone file when its length is no
    whole number of pages (no broker size is), its size then taken as ``configured`` or the broker's default."""
    last = files[-1]
    others = {f.length for f in files[:-1]}
    if len(others) > 1 or last.length <= 0:
        return None
    if others:
        size = next(iter(others))
        if configured is not None and configured != size or last.length >= size:
            return None
    elif configured is not None:
        if last.length >= configured:
            return None
        size = configured
    elif last.length % PAGE_SIZE == 0 or last.length >= L.DEFAULT_COMMIT_LOG_FILE_SIZE:
        return None
    else:
        size = L.DEFAULT_COMMIT_LOG_FILE_SIZE
    guessed = not others and configured is None
    log.warning("%s file %s is cut: %d bytes where the broker writes files of %d%s; it is read as a cut copy "
                "(what lay past its end is lost)%s", what, last.path, last.length, size,
                " (the broker's default)" if guessed else "",
                f"; pass {option} if the broker wrote files of another size" if guessed else "")
    return size


class MappedFileQueue:
    """Read-only view of one MappedFileQueue directory (``commitlog/`` or ``consumequeue/<topic>/<id>/``)."""

    def __init__(self, directory: Path, file_size: int, files: Optional[list[MappedFileInfo]] = None,
                 strays: Optional[list] = None, cut_last: bool = False, gaps: bool = False):
        self._directory = directory
        self.file_size = file_size
        self.files = list_offset_files(directory, strays) if files is None else files
        # ``gaps``: files may be missing between the first and the last (a commit log copied with holes: the
        # broker's ``MappedFileQueue.checkSelf`` logs such a gap and reads around it); ``missing`` lists the
        # absolute ranges ``[start, end)`` no file holds, oldest first
        self.missing: list[tuple[int, int]] = []
        self._maps: dict = {}  # file index -> LocalFileMap or RemoteFileMap
        self.remote = is_remote(directory)
        self._touched = 0  # bytes read through the maps since the resident size was last looked at
        self._counted = 0  # ... since the pages were last released
        # resident file pages when the counting started or after the last release (looked up at the first check:
        # a store opens thousands of consume queues, which are never mapped)
        self._resident_base: Optional[int] = None
        for i, f in enumerate(self.files):
            if f.length != file_size and not (cut_last and i == len(self.files) - 1 and 0 < f.length < file_size):
                raise StoreConfigError(
                    f"{f.path} is {f.length} bytes long; every file of this queue must be {file_size} bytes")
            if f.from_offset % file_size:
                raise StoreFormatError(
                    f"file name {f.path.name} is not a multiple of the file size {file_size}", f.path)
            expected = self.files[i - 1].from_offset + file_size if i else f.from_offset
            if f.from_offset != expected:
                if not gaps:
                    raise StoreFormatError(
                        f"gap in {self.directory}: expected a file starting at {expected}, found {f.path.name}",
                        f.path)
                self.missing.append((expected, f.from_offset))
        # file start offsets, for finding the file of an offset when files are missing in between
        self._starts = np.fromiter((f.from_offset for f in self.files), np.int64, len(self.files))
        if self.missing:
            log.warning("%s: %s missing between %s and %s (a copy with holes?); the other files are read, and "
                        "messages whose consume-queue units point into the missing ones are reported lost",
                        self.location,
                        ", ".join(missing_file_names(self.missing, file_size)),
                        self.files[0].path.name, self.files[-1].path.name)

    @property
    def directory(self) -> Path:
        if not isinstance(self._directory, Path):
            self._directory = as_path(self._directory)
        return self._directory

    @property
    def location(self) -> str:
        """The directory as text, made into no path object (a planner asks this of every one of 20,000 queues)."""
        return os.fspath(self._directory)

    @property
    def min_offset(self) -> int:
        """Start offset of the first file (0 when there is none)."""
        return self.files[0].from_offset if self.files else 0

    @property
    def end_offset(self) -> int:
        """Offset just past the last file."""
        return self.files[-1].from_offset + self.file_size if self.files else 0

    def index_of(self, offset: int) -> int:
        """Index of the file holding absolute ``offset``, or -1 when no file holds it (before the first file,
        past the last, or in a missing one)."""
        if not self.files or offset < self.min_offset or offset >= self.end_offset:
            return -1
        if not self.missing:  # the usual queue: arithmetic (a planner asks this of thousands of queues)
            return (offset - self.min_offset) // self.file_size
        return int(self.indexes_of(np.array([offset], dtype=np.int64))[0])

    def indexes_of(self, offsets: np.ndarray) -> np.ndarray:
        """:meth:`index_of` of every one of ``offsets`` (int64)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if not self.files:
            return np.full(len(offsets), -1, dtype=np.int64)
        if not self.missing:
            inside = (offsets >= self.min_offset) & (offsets < self.end_offset)
            return np.where(inside, (offsets - self.min_offset) // self.file_size, -1).astype(np.int64)
        at = np.searchsorted(self._starts, offsets, side="right") - 1
        held = (at >= 0) & (offsets < self._starts[np.maximum(at, 0)] + self.file_size)
        return np.where(held, at, -1).astype(np.int64)

    def in_missing(self, offsets: np.ndarray) -> np.ndarray:
        """Whether each of ``offsets`` lies in a file missing between the first and the last (see ``missing``)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.zeros(len(offsets), dtype=bool)
        for start, end in self.missing:
            out |= (offsets >= start) & (offsets < end)
        return out

    def buffer(self, index: int) -> np.ndarray:
        """The whole file ``index`` as a read-only uint8 array; bytes in a range are valid once :meth:`ensure`-d
        (always, for a local file: it is a memory map)."""
        return self._map(index).array

    def _map(self, index: int):
        mapped = self._maps.get(index)
        if mapped is None:
            info = self.files[index]
            mapped = self._maps[index] = map_file(info.location, info.length)
            if self.remote and len(self._maps) > MAX_REMOTE_MAPS:
                # a remote file's map holds what was fetched (on local disk): a reader that moved on lets the
                # oldest go (arrays handed out keep their bytes; a later read fetches again)
                self._maps.pop(next(iter(self._maps))).close()
        return mapped

    def records_ensurer(self, index: int):
        """``ensure(positions)`` for file ``index``'s records, or None for a local queue (always readable)."""
        return None if not self.remote else lambda positions: self.ensure_records(index, positions)

    def ensure(self, index: int, start: int, end: int, ahead: int = 0, until: int = -1) -> None:
        """Make bytes ``[start, end)`` of file ``index`` readable through :meth:`buffer` (a fetch for a remote
        file; steps of ``ahead`` bytes short of ``until`` are prefetched for a sequential reader). Free for a
        local file."""
        self._map(index).ensure(start, end, ahead, until)

    def ensure_records(self, index: int, positions: np.ndarray, sizes=None) -> None:
        """Make the records starting at ``positions`` of file ``index`` readable; without their ``sizes``, each
        record's TOTALSIZE is read first (clipped to the file: a garbled length is the parser's to report)."""
        mapped = self._map(index)
        if isinstance(mapped, LocalFileMap) or len(positions) == 0:
            return
        starts = np.asarray(positions, dtype=np.int64)
        if sizes is None:
            mapped.ensure_ranges(starts, starts + 8)
            head = mapped.array
            valid = (starts >= 0) & (starts + 4 <= len(head))
            sizes = np.zeros(len(starts), np.int64)
            at = starts[valid]
            sizes[valid] = (head[at].astype(np.int64) << 24 | head[at + 1].astype(np.int64) << 16
                            | head[at + 2].astype(np.int64) << 8 | head[at + 3].astype(np.int64))
            sizes = np.where((sizes > 0) & (sizes < 1 << 31), sizes, 8)
        mapped.ensure_ranges(starts, starts + np.asarray(sizes, dtype=np.int64))

    def sequential(self, index: int, start: int) -> "SequentialFetch":
        """A forward reader's fetch window over file ``index`` from ``start`` (see :class:`SequentialFetch`)."""
        return SequentialFetch(self, index, start)

    def release(self, index: int, start: int, end: int) -> None:
        """Drop this process's pages of file ``index`` in ``[start, end)`` (``MADV_DONTNEED``): the map stays
        valid and its bytes come back when touched again, but a walk over a whole 1 GiB file no longer keeps the
        file resident in the process."""
        mapped = self._maps.get(index)
        if mapped is not None:
            mapped.release(start, end)

    def copy_ranges(self, index: int, starts: np.ndarray, lengths: np.ndarray) -> Optional[np.ndarray]:
        """Ranges of local file ``index`` copied back to back (:func:`~.file_reads.read_ranges`), for records
        scattered over the file; None for a remote file, whose map fetches the ranges it needs anyway."""
        if self.remote:
            return None
        return read_ranges(self.files[index].location, starts, lengths)

    def note_read(self, index: int, nbytes: int) -> None:
        """Count ``nbytes`` read through the maps (``index``: the file read). Every :data:`RESIDENT_CHECK_BYTES`
        the process's resident file pages are looked at (``/proc/self/statm``: the kernel maps whole large
        folios around a touched byte, so bytes read undercount what a scattered read holds); past
        :data:`RESIDENT_BUDGET` more than after the last release, the pages of every mapped file are released
        (they stay in the page cache), so a reader of gigabytes, in order or scattered, holds a bounded part.
        Without ``/proc`` the bytes read stand for the pages held."""
        self._touched += nbytes
        if self._touched < RESIDENT_CHECK_BYTES:
            return
        counted, self._touched = self._touched, 0
        resident = resident_file_bytes()
        if self._resident_base is None:  # the first check: what was resident before this reader's reads
            self._resident_base = 0 if resident is None else max(0, resident - counted)
        self._counted += counted
        grown = self._counted if resident is None else resident - self._resident_base
        if grown >= RESIDENT_BUDGET:
            for mapped in self._maps.values():
                mapped.release(0, self.file_size)
            self._counted = 0
            self._resident_base = resident_file_bytes() or 0

    def open_file(self, index: int):
        """File ``index`` opened for windowed reads (counted; close it, or use it in a ``with``)."""
        return open_file(self.files[index].location)

    def close(self) -> None:
        """Drop the maps (arrays handed out keep their own reference alive)."""
        maps, self._maps = self._maps, {}
        for mapped in maps.values():
            mapped.close()


class SequentialFetch:
    """What a walk going forward through one file may read: ``[start, ready)``. A walk checks ``ready`` before
    touching bytes past it and calls :meth:`need`; a local file is readable whole (``ready`` is its length), a
    remote one is fetched :data:`~.remote_map.SEQUENTIAL_STEP` at a time with the next step prefetched."""

    def __init__(self, queue: MappedFileQueue, index: int, start: int):
        self.queue, self.index = queue, index
        self.size = queue.files[index].length
        self.ready = start if queue.remote else self.size

    def need(self, upto: int) -> None:
        """Make everything before ``upto`` (clipped to the file) readable."""
        if upto > self.ready:
            end = min(max(upto, self.ready + SEQUENTIAL_STEP), self.size)
            self.queue.ensure(self.index, self.ready, end, ahead=SEQUENTIAL_STEP)
            self.ready = end
