"""Appending key-index entries (``IndexService.buildIndex`` / ``IndexFile.putKey``), many at a time.

Entries are numbered from 1 in each file; the slot of a bucket holds its newest entry and every entry links
to the previous one of its bucket. A file is full when ``indexCount >= maxIndexNum``; the next file is named
by the local wall-clock time (``yyyyMMddHHmmssSSS``) and inherits the full file's end values as its begin.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from pathlib import Path

import numpy as np

from ..files.disk_full import disk_full
from ..files.index_file import IndexHeader, index_file_size, list_index_files, put_keys
from ..files.store_files import create_full_size, fsync_path
from ..format import layout as L


def index_file_name(now_ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local time as yyyyMMddHHmmssSSS."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"


class IndexWriter:
    """Writes index entries into ``index/``, continuing the newest file while it has room."""

    def __init__(self, directory: Path, slots: int, max_entries: int):
        self.directory = Path(directory)
        self.slots = slots
        self.max_entries = max_entries
        self.size = index_file_size(slots, max_entries)
        self.directory.mkdir(parents=True, exist_ok=True)
        names = [p.name for p in list_index_files(self.directory)]  # stray entries are never continued
        self.last_full_end_timestamp = 0  # what the checkpoint's indexMsgTimestamp records
        self._path = None
        self._mm = None
        self._fd = -1
        self._header = None
        self._unflushed: list[Path] = []  # files that filled up since the last flush
        if names:
            self._open(self.directory / names[-1])

    def _open(self, path: Path) -> None:
        if self._mm is not None:
            self._unflushed.append(self._path)  # a full file: forced to disk by the next flush()
        self.close()
        self._path = path
        with open(path, "r+b") as fh:
            self._mm = mmap.mmap(fh.fileno(), self.size)
            self._fd = os.dup(fh.fileno())  # allocates the pages the map touches (see _allocate)
        self._header = IndexHeader(*L.INDEX_HEADER.unpack_from(self._mm, 0))

    def _roll(self, now_ms: int) -> None:
        """Start a new file; its begin values are the full file's end values (0 for the first file)."""
        begin_ts = begin_phy = 0
        if self._header is not None:
            begin_ts, begin_phy = self._header.end_timestamp, self._header.end_phy_offset
            self.last_full_end_timestamp = self._header.end_timestamp
        existing = [p.name for p in list_index_files(self.directory)]
        name = index_file_name(now_ms)
        while existing and name <= existing[-1] or (self.directory / name).exists():
            now_ms += 1
            name = index_file_name(now_ms)
        path = self.directory / name
        create_full_size(path, self.size, L.INDEX_HEADER.pack(begin_ts, begin_ts, begin_phy, begin_phy, 0, 1))
        self._open(path)

    def put(self, key_hashes: np.ndarray, phy_offsets: np.ndarray, store_timestamps: np.ndarray) -> None:
        """Append entries in the given order (key hashes already ``abs``-ed as ``indexKeyHashMethod``), one key
        per record."""
        self.put_parts([(key_hashes, None, phy_offsets, store_timestamps)])

    def put_parts(self, parts: list) -> None:
        """Append the keys of ``parts`` in order (see :func:`~..files.index_file.put_keys` for a part's
        columns), rolling to a new file whenever one fills up."""
        parts = [part for part in parts if len(part[0])]
        while parts:
            if self._header is None or self._header.index_count >= self.max_entries:
                self._roll(int(time.time() * 1000))
            head, parts = _cut(parts, self.max_entries - self._header.index_count)
            self._put_in_file(head)

    def _put_in_file(self, parts: list) -> None:
        """Entries numbered on from the header's count, each linked to its bucket's previous newest (the native
        ``putKey`` kernel); the pages it will touch are allocated first."""
        first = self._header.index_count
        k = sum(len(part[0]) for part in parts)
        entry_base = L.INDEX_HEADER_SIZE + self.slots * L.INDEX_SLOT_SIZE
        start = entry_base + first * L.INDEX_ENTRY_SIZE
        self._allocate(parts, start, start + k * L.INDEX_ENTRY_SIZE)
        put, self._header = put_keys(self._mm, self.slots, self.max_entries, parts, self._path)
        if put != k:  # an internal invariant: put() hands over no more keys than the file has room for
            raise AssertionError(f"index file took {put} of {k} keys")

    def _allocate(self, parts: list, lo: int, hi: int) -> None:
        """Give the file blocks for the pages of the slots the keys of ``parts`` use and of bytes [lo, hi) before
        the map touches them: the file is sparse, and a page the filesystem cannot allocate then would kill the
        process (SIGBUS, on any access on tmpfs); here a full disk is a :class:`~...errors.DiskFullError`. Only
        the slot pages the keys use get blocks (keys such as generated uniq keys hash to a few neighbourhoods)."""
        page = mmap.PAGESIZE
        touched = np.zeros(-(-self.size // page), dtype=bool)  # a flag per page of the file: no sort of the slots
        for hashes, _, _, _ in parts:
            # the page of each key's slot, in place in one array (slots < 2^29: the byte offsets fit 32 bits)
            at = np.remainder(np.asarray(hashes, dtype=np.int64 if self.slots >= 1 << 29 else np.int32),
                              self.slots)
            at *= L.INDEX_SLOT_SIZE
            at += L.INDEX_HEADER_SIZE
            at //= page
            touched[at] = True
        touched[lo // page:(hi + page - 1) // page] = True
        pages = np.flatnonzero(touched)
        cuts = np.flatnonzero(np.diff(pages) != 1) + 1
        with disk_full(self._path, "the index"):
            for run in np.split(pages, cuts):
                if len(run):
                    at = int(run[0]) * page
                    try:  # never past the file's end: allocating there would lengthen the file
                        os.posix_fallocate(self._fd, at, min(len(run) * page, self.size - at))
                    except OSError as e:
                        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                            raise
                        return  # a filesystem without allocation: written through the map as before

    @property
    def end_phy_offset(self) -> int:
        """End physical offset of the newest file (what ``buildIndex`` compares to skip re-indexing)."""
        return self._header.end_phy_offset if self._header else 0

    def flush(self) -> None:
        """Force the index to disk: the files that filled up since the last flush, then the newest."""
        for path in self._unflushed:
            fsync_path(path)
        self._unflushed.clear()
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        """Unmap the newest file. Its written pages stay in the page cache (a shared mapping), visible to every
        process; forcing them to disk is :meth:`flush`'s job, asked for under SYNC_FLUSH only."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _cut(parts: list, n: int) -> tuple[list, list]:
    """``parts`` as (the first ``n`` keys, the rest), each as parts."""
    head, rest = [], []
    for part in parts:
        hashes, rows, phy, ts = part
        if n <= 0:
            rest.append(part)
        elif len(hashes) <= n:
            head.append(part)
            n -= len(hashes)
        else:
            if rows is None:  # one record per key: the records are cut with the keys
                head.append((hashes[:n], None, phy[:n], ts[:n]))
                rest.append((hashes[n:], None, phy[n:], ts[n:]))
            else:
                head.append((hashes[:n], rows[:n], phy, ts))
                rest.append((hashes[n:], rows[n:], phy, ts))
            n = 0
    return head, rest


__all__ = ["IndexWriter", "index_file_name"]
