"""A job's commit-log reservations: Spark tasks stage their records at the offsets they will have in the store.

Every task attempt of a write job reserves room for each encoded batch in one shared, job-private file,
``.rocketstore/staging/<job>/reservation``, under an exclusive POSIX record lock (``fcntl.lockf``: it works
across the Python workers of one machine and over NFS). The first reservation records where the job expects to
start: the store's commit-log end (0 for an overwrite) and its commit-log file size. Records are then written
into ``staging/<job>/commitlog/`` at exactly the offsets and in the file names the store would give them, so
when nothing else was published meanwhile and no attempt left a hole, the driver's commit only patches queue
offsets and store times in place and moves the files into the store (see :mod:`.publish`).

Zombie attempts (a speculative or failed attempt still running after the job committed) must not write into
files that have become the store's: writing holds a *shared* lock and first checks that the job is open;
``close`` (commit or abort) takes that lock *exclusively*, so it waits for writes in flight and every later
write sees the job closed and fails instead. Reserving and writing lock different bytes past the record
(:data:`RESERVE_LOCK_BYTE`, :data:`WRITE_LOCK_BYTE`): one task's reservation does not wait for another task's
write of a batch in flight (with one whole-file lock, each task of a two-task job spent ~0.1 s of ~3 s waiting);
``close`` takes both, always in that order.

A reservation also hands out what the broker would assign when it appends the records, so that tasks encode them
final and a commit in place only renames files: each queue's next offsets (consecutive per queue, in reservation
order) and the store time of the reservation's records (the clock when reserved, never below an earlier
reservation's: store times grow along the commit log). The queue offsets are kept in a second file,
``staging/<job>/queues``, an append-only log of blocks (see :class:`QueueLog`). The commit checks that the
offsets a job was staged with are the ones the store gives it then (it publishes by copy, assigning afresh,
otherwise).

Reservation file (big-endian)::

    offset  bytes  field
    0       8      start_phy        the commit-log end the job was staged against
    8       8      next_phy         the end of everything reserved so far
    16      8      file_size        the commit-log file size the layout uses
    24      1      closed           1 once the job was committed or aborted
    25      8      last_stamp       the store time (ms) the last reservation gave its records
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ...errors import JobClosedError
from ..files.disk_full import disk_full
from .placement import Placement, place_records

RESERVATION = struct.Struct(">qqqBq")
RESERVATION_FILE = "reservation"
QUEUE_LOG_FILE = "queues"
CLOSED_FLAG_OFFSET = 24  # the ``closed`` byte of RESERVATION
RESERVE_LOCK_BYTE = 64  # locked exclusively while reserving (POSIX locks may cover bytes past the end of file)
WRITE_LOCK_BYTE = 65  # locked shared while writing reserved bytes, exclusively while closing


class JobReservation:
    """The reservation file of one job directory; open it in each process that reserves or writes."""

    def __init__(self, job_dir: Path):
        self.job_dir = Path(job_dir)
        self.path = self.job_dir / RESERVATION_FILE
        self.queue_log = QueueLog(self.job_dir / QUEUE_LOG_FILE)
        for attempt in range(3):  # another job's clean-up may remove the empty parent directories meanwhile
            self.job_dir.mkdir(parents=True, exist_ok=True)
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise

    def close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close_fd()

    def _read(self):
        raw = os.pread(self._fd, RESERVATION.size, 0)
        return RESERVATION.unpack(raw) if len(raw) == RESERVATION.size else None

    def _write(self, start: int, next_phy: int, file_size: int, closed: int, last_stamp: int) -> None:
        with disk_full(self.path, "the job's reservation"):
            os.pwrite(self._fd, RESERVATION.pack(start, next_phy, file_size, closed, last_stamp), 0)

    @contextmanager
    def _locked(self, byte: int, exclusive: bool):
        fcntl.lockf(self._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, 1, byte)
        try:
            yield
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, byte)

    def _check_open(self, closed: bool) -> None:
        if closed:
            raise JobClosedError(f"the write job of {self.job_dir} was already committed or aborted; this task "
                                 "attempt's output is discarded (expected an open job, found it closed)")

    def reserve(self, lengths: np.ndarray, start: Callable[[], tuple[int, int]],
                queues: Optional[tuple[list, np.ndarray]] = None,
                queue_ends: Optional[Callable[[list], np.ndarray]] = None,
                clock: Optional[Callable[[], int]] = None) -> "Reservation":
        """Place records of ``lengths`` after everything reserved so far. ``start()`` gives (store end, file
        size) for the job's first reservation. ``queues`` — ``(keys, counts)``: the (topic, queue id) pairs the
        records are dispatched to and how many go to each — get their first offsets, each queue continuing where
        the job's last reservation for it ended, or for a queue new to the job at ``queue_ends(keys)`` (the
        store's ends). ``clock()`` (ms; the system clock by default) gives the store time."""
        with self._locked(RESERVE_LOCK_BYTE, exclusive=True):
            state = self._read()
            self._check_open(state is not None and bool(state[3]))
            if state is None:
                begin, file_size = start()
                state = (begin, begin, file_size, 0, 0)
            placement = place_records(state[1], lengths, state[2])
            first_offsets = None
            if queues is not None:
                first_offsets = self.queue_log.take(queues[0], np.asarray(queues[1], dtype=np.int64),
                                                    queue_ends or _store_starts_empty)
            stamp = max(int(time.time() * 1000) if clock is None else int(clock()), state[4])
            self._write(state[0], placement.end, state[2], 0, stamp)
            return Reservation(placement, first_offsets, stamp)

    @contextmanager
    def writing(self):
        """Hold while writing reserved bytes: the job cannot be closed meanwhile, and a closed job refuses."""
        with self._locked(WRITE_LOCK_BYTE, exclusive=False):
            # only the closed flag: a reservation may be rewriting the offsets meanwhile (it writes closed = 0,
            # and nothing sets it to 1 while this lock is held)
            self._check_open(os.pread(self._fd, 1, CLOSED_FLAG_OFFSET) == b"\x01")
            yield

    def close(self) -> tuple[int, int, int] | None:
        """Close the job (waits for writes in flight); returns (start_phy, next_phy, file_size) or None when
        nothing was ever reserved."""
        with self._locked(RESERVE_LOCK_BYTE, exclusive=True), self._locked(WRITE_LOCK_BYTE, exclusive=True):
            state = self._read()
            if state is None:
                self._write(0, 0, 0, 1, 0)
                return None
            self._write(state[0], state[1], state[2], 1, state[4])
            return state[0], state[1], state[2]


@dataclass(frozen=True)
class Reservation:
    """What :meth:`JobReservation.reserve` gave a batch of records."""

    placement: Placement  # where its records go in the commit log
    first_offsets: Optional[np.ndarray]  # int64: the first queue offset of each queue asked for (None: none asked)
    stamp: int  # the store time of its records (ms)


def _store_starts_empty(keys: list) -> np.ndarray:
    return np.zeros(len(keys), dtype=np.int64)


class QueueLog:
    """The queue offsets a job's reservations took: an append-only file of blocks, one per reservation that
    dispatches records, read and written under the reservation lock. Each process replays the blocks it has not
    seen yet, so every reservation costs the queues it names plus the blocks written since, never the whole log.

    Block (big-endian)::

        offset  bytes  field
        0       4      size           bytes of the block after this field
        4       4      new_queues     queues the job names for the first time
        8       4      entries        queues this reservation takes offsets of
        12      ...    new_queues ×   [2: topic length][topic, UTF-8][4: queue id][8: first offset]
        ...     4 × entries           queue numbers (in order of first naming, from 0)
        ...     8 × entries           offsets taken
    """

    HEADER = struct.Struct(">III")
    NEW_QUEUE = struct.Struct(">iq")

    def __init__(self, path: Path):
        self.path = Path(path)
        self._numbers: dict = {}  # (topic, queue id) → its number
        self._next = np.zeros(0, dtype=np.int64)  # by number: the queue's next offset
        self._seen = 0  # bytes of the log replayed

    def take(self, keys: list, counts: np.ndarray, queue_ends: Callable[[list], np.ndarray]) -> np.ndarray:
        """The first offsets of ``counts`` records for each queue of ``keys``, recorded; call under the lock."""
        self._replay()
        new = [k for k in dict.fromkeys(keys) if k not in self._numbers]
        ends = np.asarray(queue_ends(new), dtype=np.int64) if new else np.zeros(0, np.int64)
        defined = b"".join(_queue_entry(topic, int(qid), int(end)) for (topic, qid), end in zip(new, ends.tolist()))
        self._define(new, ends)
        numbers = np.fromiter((self._numbers[k] for k in keys), dtype=np.int64, count=len(keys))
        first = self._next[numbers].copy()
        np.add.at(self._next, numbers, counts)
        body = (self.HEADER.pack(0, len(new), len(keys))[4:] + defined + numbers.astype(">i4").tobytes()
                + counts.astype(">i8").tobytes())
        block = struct.pack(">I", len(body)) + body
        with disk_full(self.path, "the job's reservation"):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                _write_whole(fd, block, self._seen)
            finally:
                os.close(fd)
        self._seen += len(block)
        return first

    def _define(self, keys: list, ends: np.ndarray) -> None:
        for k in keys:
            self._numbers[k] = len(self._numbers)
        self._next = np.concatenate((self._next, ends))

    def _replay(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._seen)
                data = fh.read()
        except FileNotFoundError:
            return
        pos = 0
        while pos + 4 <= len(data):
            (size,) = struct.unpack_from(">I", data, pos)
            if pos + 4 + size > len(data):
                break  # a block cut short by a writer that died: the offsets it took are not counted again
            _, new_count, entries = self.HEADER.unpack_from(data, pos)
            at = pos + self.HEADER.size
            keys, ends = [], []
            for _ in range(new_count):
                (length,) = struct.unpack_from(">H", data, at)
                topic = data[at + 2:at + 2 + length].decode("utf-8")
                qid, end = self.NEW_QUEUE.unpack_from(data, at + 2 + length)
                keys.append((topic, qid))
                ends.append(end)
                at += 2 + length + self.NEW_QUEUE.size
            self._define(keys, np.array(ends, dtype=np.int64))
            numbers = np.frombuffer(data, dtype=">i4", count=entries, offset=at).astype(np.int64)
            counts = np.frombuffer(data, dtype=">i8", count=entries, offset=at + 4 * entries).astype(np.int64)
            np.add.at(self._next, numbers, counts)
            pos += 4 + size
        self._seen += pos


def _write_whole(fd: int, block: bytes, at: int) -> None:
    """Write ``block`` at ``at``, the log's end (under the lock nobody else appends); a write that fails (a
    full disk) or falls short takes its part back, so the log never ends in half a block."""
    try:
        written = os.pwrite(fd, block, at)
        if written != len(block):
            raise OSError(errno.ENOSPC, f"short write of a queue-log block: {written} of {len(block)} bytes")
    except BaseException:
        os.ftruncate(fd, at)
        raise


def _queue_entry(topic: str, qid: int, end: int) -> bytes:
    name = topic.encode("utf-8")
    return struct.pack(">H", len(name)) + name + QueueLog.NEW_QUEUE.pack(qid, end)


def close_job(job_dir: Path) -> tuple[int, int, int] | None:
    """Close the job of ``job_dir`` to its task attempts (commit or abort); (start_phy, next_phy, file_size) of
    what was reserved, or None when no attempt ever reserved anything."""
    if not (Path(job_dir) / RESERVATION_FILE).exists():
        return None
    with JobReservation(job_dir) as reservation:
        return reservation.close()


def reservation_closed(job_dir: Path) -> bool:
    """Whether the job of ``job_dir`` was committed or aborted (read without taking the lock)."""
    try:
        raw = (Path(job_dir) / RESERVATION_FILE).read_bytes()
    except FileNotFoundError:
        return False
    return len(raw) >= RESERVATION.size and bool(RESERVATION.unpack_from(raw)[3])


def staged_commitlog_dir(job_dir: Path) -> Path:
    return Path(job_dir) / "commitlog"


__all__ = ["JobReservation", "QueueLog", "Reservation", "RESERVATION", "close_job", "reservation_closed",
           "staged_commitlog_dir"]
