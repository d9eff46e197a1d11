"""Staging a write job's records (what each Spark task attempt does, in parallel, before the driver commits).

A task encodes each table it receives (:func:`.encoded_batch.encode_table`), reserving for it in the job's
reservation file (:mod:`.reservation`) room in the commit log, queue offsets and a store time, and writes the record
bytes at those offsets into ``.rocketstore/staging/<job>/commitlog/`` — files named and laid out as the store's
commit-log files would be, BLANK markers included, every record final (PHYSICALOFFSET, QUEUEOFFSET and
STORETIMESTAMP the reserved ones). The metadata (topics, queues, tags codes, index keys, offsets) goes
to ``<stem>.meta.npy`` files, one per up to ``rows_per_file`` messages. The store itself is never touched: a failed,
retried or speculative attempt leaves bytes only under ``staging/<job>/``, which the driver ignores unless Spark
committed that attempt, and :func:`discard_staged` (the abort) deletes."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np
import pyarrow as pa

from ...errors import DiskFullError
from ..files.disk_full import disk_full, is_disk_full, os_cause, with_advice
from ..files.known_end import known_end
from ..files.sizes import detect_sizes
from ..files.writable_window import WritableWindow
from ..format import layout as L
from ..format.encoder import ENCODE_PIECE_BYTES, UniqKeyFactory
from ..read.store_reader import StoreReader
from .encoded_batch import EncodedBatch, encode_table
from .queue_skeleton import SkeletonBuilder
from .reservation import JobReservation, close_job, staged_commitlog_dir
from .store_meta import meta_dir, remove_empty_dirs, staging_dir

STAGE_FILE_ROWS = 200_000  # messages per metadata file: bounds the metadata a task holds in memory


def stage(root, job_id: str, name: str, tables: Iterable[pa.Table], *, store_host: str,
          max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, rows_per_file: int = STAGE_FILE_ROWS,
          sizes: Optional[dict] = None, overwrite: bool = False,
          new_topic_queues: Optional[Callable[[], dict]] = None, now_ms: Optional[int] = None) -> list[str]:
    """Encode ``tables`` and stage them for job ``job_id``; returns the metadata stems, in order. The records'
    store time (where not given) is when they were reserved, or ``now_ms`` when given.

    A full disk raises :class:`~...errors.DiskFullError`: the store itself is untouched.
    """
    try:
        return _stage(root, job_id, name, tables, store_host=store_host, max_message_size=max_message_size,
                      rows_per_file=rows_per_file, sizes=sizes, overwrite=overwrite,
                      new_topic_queues=new_topic_queues, now_ms=now_ms)
    except (OSError, DiskFullError) as e:
        error = with_advice(e, f"the store was not touched; the job's staged files under "
                            f"{staging_dir(Path(root), job_id)} go when the job is aborted (or with `rocketstore "
                            f"staging {root} --remove {job_id}`); free space on that filesystem and run the job again",
                            "staged records")
        if error is None:
            raise
        raise error from os_cause(e)


def _stage(root, job_id: str, name: str, tables: Iterable[pa.Table], *, store_host: str,
           max_message_size: int, rows_per_file: int, sizes: Optional[dict], overwrite: bool,
           new_topic_queues: Optional[Callable[[], dict]], now_ms: Optional[int]) -> list[str]:
    """:func:`stage`, full-disk errors untranslated.

    Each table is encoded on its own (Spark hands over small Arrow batches: encoding them one by one avoids
    concatenating bodies) and is one reservation. ``sizes`` are the store's size options (used when the store
    has no files yet); ``overwrite`` stages against an empty store. ``new_topic_queues()`` (topic → number of
    queues, for the topics the store does not have, as seen so far) has the job's consume-queue skeleton of
    those topics made alongside (:mod:`.queue_skeleton`).
    """
    root = Path(root)
    job_dir = staging_dir(root, job_id)
    tables = iter(tables)
    first = next(tables, None)  # a task with no rows (or whose input fails first) leaves nothing on disk: it may
    if first is None:  # still run after its job was aborted (Spark aborts without waiting for its other tasks)
        return []
    tables = itertools.chain([first], tables)
    factory = UniqKeyFactory()
    stems: list[str] = []
    parts: list[EncodedBatch] = []
    rows = 0
    cq_file_size = lambda: detect_sizes(root, **(sizes or {})).consume_queue_file_size  # noqa: E731
    # records are encoded into it a piece at a time (reused; room for records up to a piece's size, see
    # piece_scratch_size: a batch with larger ones encodes into memory of its own)
    scratch = np.empty(4 * ENCODE_PIECE_BYTES, np.uint8)
    clock = None if now_ms is None else (lambda: now_ms)
    ends = _StoreEnds(root, sizes or {}, overwrite)
    with ends, JobReservation(job_dir) as reservation, _StagedFiles(staged_commitlog_dir(job_dir)) as files, \
            SkeletonBuilder(job_dir, cq_file_size) as skeleton:
        for table in tables:
            if table.num_rows == 0:
                continue
            placed = []

            def place(lengths, queues, placed=placed):
                """Reserve room, queue offsets and a store time for the records: they are encoded final, straight
                at their offsets."""
                placed.append(reservation.reserve(lengths, ends.start, queues=queues, queue_ends=ends, clock=clock))
                with reservation.writing():
                    files.reserved(placed[0].placement)
                return placed[0].placement.phy, placed[0].first_offsets, placed[0].stamp

            def write(at, data, placed=placed):
                """Write encoded records where they were reserved, while they are still in the CPU's cache."""
                with reservation.writing():
                    files.write(at, data, placed[0].placement.file_size)

            batch = encode_table(table, store_host=store_host, uniq_factory=factory,
                                 max_message_size=max_message_size, place=place, scratch=scratch, write=write)
            with reservation.writing():
                files.write_blanks(placed[0].placement)
            if new_topic_queues is not None:
                skeleton.add(batch, new_topic_queues())
            parts.append(batch)
            rows += len(batch)
            if rows >= rows_per_file:
                stems.append(_save_meta(job_dir / f"{name}-{len(stems):06d}", parts))
                parts, rows = [], 0
        if parts:
            stems.append(_save_meta(job_dir / f"{name}-{len(stems):06d}", parts))
    return stems


class _StoreEnds:
    """Where a job's records begin in the store: :meth:`start` for the commit log, a call for queues. The store is
    opened once, when first asked (never when overwriting, nor for a store without files of that kind), and its
    end is the last writer's where the files are as it left them (see :mod:`..files.known_end`)."""

    def __init__(self, root: Path, sizes: dict, overwrite: bool):
        self.root, self.sizes, self.overwrite = root, sizes, overwrite
        self._reader: Optional[StoreReader] = None

    def _store(self) -> StoreReader:
        if self._reader is None:
            detected = detect_sizes(self.root, **self.sizes)
            self._reader = StoreReader(self.root, detected, valid_end=known_end(self.root, detected),
                                       lazy_queues=True)
        return self._reader

    def start(self) -> tuple[int, int]:
        """The store's commit-log end (0 when overwriting), and its file size."""
        detected = detect_sizes(self.root, **self.sizes)
        if self.overwrite or not (self.root / L.COMMITLOG_DIR).is_dir():
            return 0, detected.commit_log_file_size
        known = known_end(self.root, detected)  # the last writer's end while the files are as it left them
        if known is not None:
            return known, detected.commit_log_file_size
        return self._store().max_phy_offset(), detected.commit_log_file_size

    def __call__(self, keys: list) -> np.ndarray:
        """The next offset of each queue of ``keys`` ((topic, queue id) pairs; 0 for a queue the store lacks)."""
        if self.overwrite or not (self.root / L.CONSUMEQUEUE_DIR).is_dir():
            return np.zeros(len(keys), dtype=np.int64)
        queues = self._store().queues
        return np.array([cq.max_offset if (cq := queues.get(topic, int(qid))) is not None else 0
                         for topic, qid in keys], dtype=np.int64)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _save_meta(stem: Path, parts: list[EncodedBatch]) -> str:
    # no fsync: the metadata is read back by this job's driver only, through the same page cache, and is
    # worthless after a machine crash (the job is rolled back); durability starts at the commit's flush
    EncodedBatch.save_meta(parts, stem)
    return str(stem)


class _StagedFiles:
    """Writes reserved records into the staged commit-log files (sparse, full size, like the store's).

    Each reservation's bytes are allocated and mapped when it is made (:meth:`reserved`), then records are stored
    through the maps: the job's tasks write into the same files at once without taking turns on the files' locks
    (see :mod:`..files.writable_window`). Where the filesystem cannot allocate ahead, records go by ``pwrite``."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._fds: dict[int, int] = {}
        self._file_size = 0
        self._windows: list[tuple[int, WritableWindow]] = []  # (file start, window) of the current reservation

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._unmap()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _fd(self, file_start: int) -> int:
        fd = self._fds.get(file_start)
        if fd is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / L.offset_to_file_name(file_start), os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size < self._file_size:
                os.ftruncate(fd, self._file_size)
            self._fds[file_start] = fd
        return fd

    def reserved(self, placement) -> None:
        """Allocate and map the bytes of a new reservation (its records and the BLANK ends it closes files
        with): a full disk fails here, before any record is stored. The last reservation's maps go."""
        self._unmap()
        size = self._file_size = placement.file_size
        starts = [int(placement.phy[0])] if len(placement.phy) else []
        pos = min(starts + [int(b[0]) for b in placement.blanks[:1]], default=placement.end)
        while pos < placement.end:
            file_start = pos - pos % size
            hi = min(placement.end, file_start + size)
            path = self.directory / L.offset_to_file_name(file_start)
            with disk_full(path, "staged records"):
                window = WritableWindow.open(self._fd(file_start), pos - file_start, hi - file_start, path)
            if window is None:  # the filesystem cannot allocate ahead: pwrite
                self._unmap()
                return
            self._windows.append((file_start, window))
            pos = hi

    def write(self, at: int, data: np.ndarray, file_size: int) -> None:
        """Write ``data``, reserved records' bytes that belong at commit-log offset ``at`` (in one file of
        ``file_size``), encoded at their reserved offsets (their PHYSICALOFFSET is final when the commit publishes
        in place, which then patches only queue offsets and store times)."""
        self._file_size = file_size
        self._store(at - at % file_size, data, at % file_size)

    def write_blanks(self, placement) -> None:
        """The BLANK markers closing the files ``placement`` filled."""
        size = placement.file_size
        for pos, length in placement.blanks:
            self._store(pos - pos % size, L.BLANK_MARKER.pack(length, L.BLANK_MAGIC_CODE), pos % size)

    def _store(self, file_start: int, data, at: int) -> None:
        for start, window in self._windows:
            if start == file_start and window.lo <= at and at + len(data) <= window.hi:
                window.write(at, data)
                return
        with disk_full(self.directory / L.offset_to_file_name(file_start), "staged records"):
            os.pwrite(self._fd(file_start), memoryview(data), at)

    def _unmap(self) -> None:
        for _, window in self._windows:
            window.close()
        self._windows.clear()


def discard_staged(root, job_id: str) -> None:
    """Abort: close the job's reservation (a zombie attempt can no longer write) and remove its staging
    directory; the store itself was never touched."""
    job_dir = staging_dir(Path(root), job_id)
    try:
        close_job(job_dir)
    except (OSError, DiskFullError) as e:  # a full disk must not keep an abort from freeing the job's space
        if not is_disk_full(os_cause(e)):  # (removed right after)
            raise
    shutil.rmtree(job_dir, ignore_errors=True)
    remove_empty_dirs(meta_dir(Path(root)))


__all__ = ["stage", "discard_staged", "STAGE_FILE_ROWS"]
