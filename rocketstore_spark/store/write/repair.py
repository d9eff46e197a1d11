"""Bringing a crashed store (``abort`` present) to the state the real store's recovery leaves it in.

Run before appending to such a store: the commit log is cut at its valid end, consume queues are cut to
match and get the units re-dispatch would add, index files newer than the checkpoint are dropped and the
records they covered are indexed again (``IndexService.load`` + re-dispatch). Bytes past every cut are zeroed
so that stale records can never be mistaken for data by a later recovery.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from ..files.index_file import list_index_files
from ..files.sizes import StoreSizes
from ..format import layout as L
from ..format.java_hash import java_string_hashes
from ..read.recovery import index_keys_after
from ..read.store_reader import StoreReader
from .index_writer import IndexWriter

ZERO_CHUNK = 1 << 20


def zero_from(path: Path, position: int) -> None:
    """Zero ``path`` from ``position`` to its end, writing only the chunks that are not zero already."""
    with open(path, "r+b") as fh:
        length = os.fstat(fh.fileno()).st_size
        if position >= length:
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            view = np.frombuffer(mm, dtype=np.uint8)
            pos = position
            while pos < length:
                end = min(length, (pos // ZERO_CHUNK + 1) * ZERO_CHUNK)
                if view[pos:end].any():
                    os.pwrite(fh.fileno(), bytes(end - pos), pos)
                pos = end
            del view
        finally:
            mm.close()


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
