"""Writing records into the store's commit-log files at their placement (the bytes of ``CommitLog.doAppend``).

The encoded records already hold everything but three longs that only the publisher knows: each record's
queue offset, physical offset and store time are patched into a reused scratch buffer on the way to the file.
Files that were filled elsewhere (staged records an in-place publication renamed into ``commitlog/``) are adopted,
so that they are forced to disk with the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from ..files.disk_full import disk_full
from ..format import layout as L
from ..format.encoder import ENCODE_PIECE_BYTES, patch_records
from .encoded_batch import EncodedBatch
from .open_files import OpenFiles
from .placement import Placement

PATCH_CHUNK_BYTES = ENCODE_PIECE_BYTES  # records go through the scratch buffer this much at a time (in cache)


class CommitLogWriter:
    """The commit log of one store opened for appending."""

    def __init__(self, root: Path, file_size: int, files: OpenFiles):
        self.directory = Path(root) / L.COMMITLOG_DIR
        self.file_size = file_size
        self._files = files
        self._scratch: Optional[np.ndarray] = None  # reused for every chunk copied into the commit log

    def _fd(self, file_start: int) -> int:
        return self._files.fd(self.directory / L.offset_to_file_name(file_start), self.file_size)

    def write(self, batch: EncodedBatch, placement: Placement, queue_offset: np.ndarray,
              store_ts: np.ndarray) -> None:
        """Copy ``batch``'s records to ``placement``, patching queue offset, physical offset and store time, and
        write the BLANK markers that close the files the placement left."""
        size = self.file_size
        phy, rec_off = placement.phy, batch.record_offsets
        file_no = phy // size
        bounds = np.flatnonzero(np.diff(file_no)) + 1
        for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(phy)]))):
            for a, b in _byte_bounded(rec_off, int(lo), int(hi), PATCH_CHUNK_BYTES):
                need = int(rec_off[b] - rec_off[a])
                if self._scratch is None or len(self._scratch) < need:
                    self._scratch = np.empty(max(need, PATCH_CHUNK_BYTES), dtype=np.uint8)
                chunk = batch.read_into(int(rec_off[a]), int(rec_off[b]), self._scratch)
                rel = rec_off[a:b] - rec_off[a]
                patch_records(chunk, rel, queue_offset[a:b], batch.ts_pos[a:b], store_ts[a:b], phy[a:b])
                start = int(file_no[a]) * size
                with disk_full(self.directory / L.offset_to_file_name(start), "the commit log"):
                    os.pwrite(self._fd(start), memoryview(chunk), int(phy[a] % size))
        for pos, length in placement.blanks:
            with disk_full(self.directory / L.offset_to_file_name(pos - pos % size), "the commit log"):
                os.pwrite(self._fd(pos - pos % size), L.BLANK_MARKER.pack(length, L.BLANK_MAGIC_CODE), pos % size)

    def adopt(self, path: Path) -> None:
        """A commit-log file written outside this writer (moved in by a publication, perhaps over a file this
        writer had open): flushed with the rest."""
        self._files.forget(Path(path))
        self._files.fd(Path(path), self.file_size)


def _byte_bounded(offsets: np.ndarray, lo: int, hi: int, limit: int):
    """Split rows [lo, hi) into runs of at most ``limit`` bytes (at least one row each)."""
    while lo < hi:
        stop = int(np.searchsorted(offsets, offsets[lo] + limit, side="right")) - 1
        stop = min(max(stop, lo + 1), hi)
        yield lo, stop
        lo = stop


__all__ = ["CommitLogWriter"]
