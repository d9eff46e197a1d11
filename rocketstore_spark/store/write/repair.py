"""Bringing a crashed store (``abort`` present) to the state the real store's recovery leaves it in.

Run before appending to such a store: the commit log is cut at its valid end, consume queues are cut to
match and get the units re-dispatch would add, index files newer than the checkpoint are dropped and the
records they covered are indexed again (``IndexService.load`` + re-dispatch). Bytes past every cut are zeroed
so that stale records can never be mistaken for data by a later recovery.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import numpy as np

from ..files.disk_full import disk_full
from ..files.index_file import list_index_files
from ..files.sizes import StoreSizes
from ..format import layout as L
from ..format.java_hash import java_string_hashes
from ..read.recovery import index_keys_after
from ..read.store_reader import StoreReader
from .index_writer import IndexWriter

ZERO_CHUNK = 1 << 20


def zero_from(path: Path, position: int) -> None:
    """Zero ``path`` from ``position`` to its end, writing only the pages that are not zero already.

    Reads with ``pread`` and skips holes: zeroing must work on a full disk (a rollback after ``ENOSPC``), and
    neither overwriting a page that holds data nor reading a hole allocates anything (a memory-mapped read of a
    hole would, on tmpfs, and kill the process when there is no room)."""
    with open(path, "r+b") as fh, disk_full(path, "zeros over a rolled-back tail"):
        fd = fh.fileno()
        length = os.fstat(fd).st_size
        pos = position
        while pos < length:
            pos = _next_data(fd, pos, length)
            if pos >= length:
                break
            end = min(length, (pos // ZERO_CHUNK + 1) * ZERO_CHUNK)
            write_changed_pages(fd, pos, os.pread(fd, end - pos, pos), bytes(end - pos))
            pos = end


def restore_file(path: Path, data: bytes) -> None:
    """Give ``path`` the content ``data`` again, rewriting only what changed (in place: on a full disk too)."""
    if not path.exists():
        path.write_bytes(data)
        return
    with open(path, "r+b") as fh, disk_full(path, "a file restored by a rollback"):
        old = fh.read()
        write_changed_pages(fh.fileno(), 0, old[:len(data)], data)
        if len(old) != len(data):
            fh.truncate(len(data))


def _next_data(fd: int, pos: int, length: int) -> int:
    """The first byte at or after ``pos`` that is not in a hole (``pos`` where the filesystem cannot tell)."""
    try:
        return os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        return length if e.errno == errno.ENXIO else pos


def write_changed_pages(fd: int, at: int, old: bytes, new: bytes) -> None:
    """Write ``new`` over ``old`` (the bytes at ``at``), only the pages where they differ: a page that changes
    holds data, so rewriting it needs no new block (a rollback after ``ENOSPC`` must not)."""
    page = mmap.PAGESIZE
    head = at % page
    size = -(-(head + len(new)) // page) * page
    a = np.zeros(size, np.uint8)
    b = np.zeros(size, np.uint8)
    a[head:head + len(old)] = np.frombuffer(old, np.uint8)
    b[head:head + len(new)] = np.frombuffer(new, np.uint8)
    changed = np.flatnonzero((a != b).reshape(-1, page).any(axis=1))
    for run in np.split(changed, np.flatnonzero(np.diff(changed) != 1) + 1) if len(changed) else []:
        lo = max(int(run[0]) * page - head, 0)
        hi = min((int(run[-1]) + 1) * page - head, len(new))
        os.pwrite(fd, new[lo:hi], at + lo)


def repair_store(root: Path, sizes: StoreSizes) -> int:
    """Apply recovery to the files of ``root``; returns the valid end of the commit log."""
    reader = StoreReader(root, sizes)
    try:
        valid_end = reader.recovery.valid_end
        for info in reader.commitlog.queue.files:
            if info.from_offset > valid_end:
                info.path.unlink()
            elif valid_end < info.from_offset + sizes.commit_log_file_size:
                zero_from(info.path, valid_end - info.from_offset)
        for cq in reader.queues.loaded_queues():
            _repair_queue(cq, sizes)
        kept = reader.index_files()
        kept_paths = {f.path for f in kept}
        indexed_end = max((f.header.end_phy_offset for f in kept), default=-1)
        index_dir = root / L.INDEX_DIR
        for path in list_index_files(index_dir):  # index files only: stray entries are the user's, not ours
            if path not in kept_paths:
                path.unlink()
        _reindex(reader, root, sizes, indexed_end)
        return valid_end
    finally:
        reader.close()


def _repair_queue(cq, sizes: StoreSizes) -> None:
    cut = cq.disk_max_offset * L.CQ_STORE_UNIT_SIZE
    for info in cq.files.files:
        if info.from_offset > cut:
            info.path.unlink()
        elif cut < info.from_offset + sizes.consume_queue_file_size:
            zero_from(info.path, cut - info.from_offset)
    if not len(cq.virtual):
        return
    cq.files.directory.mkdir(parents=True, exist_ok=True)
    for k, unit in enumerate(cq.virtual):
        byte = (cq.disk_max_offset + k) * L.CQ_STORE_UNIT_SIZE
        start = byte - byte % sizes.consume_queue_file_size
        path = cq.files.directory / L.offset_to_file_name(start)
        with open(path, "r+b" if path.exists() else "w+b") as fh:
            if os.fstat(fh.fileno()).st_size < sizes.consume_queue_file_size:
                fh.truncate(sizes.consume_queue_file_size)
            os.pwrite(fh.fileno(), unit.tobytes(), byte - start)


def _reindex(reader: StoreReader, root: Path, sizes: StoreSizes, indexed_end: int) -> None:
    """Index the keys of recovered records past the kept index files, as re-dispatch does."""
    writer = IndexWriter(root / L.INDEX_DIR, sizes.index_hash_slots, sizes.index_max_entries)
    try:
        entries = list(index_keys_after(reader.commitlog, reader.recovery, indexed_end))
        if entries:
            hashes = np.abs(java_string_hashes([f"{topic}#{key}" for topic, key, _phy, _ts in entries]))
            writer.put(np.where(hashes >= 1 << 31, 0, hashes), np.array([e[2] for e in entries]),
                       np.array([e[3] for e in entries]))
    finally:
        writer.close()
