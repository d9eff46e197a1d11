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

Reservation file (big-endian)::

    offset  bytes  field
    0       8      start_phy        the commit-log end the job was staged against
    8       8      next_phy         the end of everything reserved so far
    16      8      file_size        the commit-log file size the layout uses
    24      1      closed           1 once the job was committed or aborted
"""

from __future__ import annotations

import fcntl
import os
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

from ...errors import JobClosedError
from ..files.disk_full import disk_full
from .placement import Placement, place_records

RESERVATION = struct.Struct(">qqqB")
RESERVATION_FILE = "reservation"
CLOSED_FLAG_OFFSET = 24  # the ``closed`` byte of RESERVATION
RESERVE_LOCK_BYTE = 64  # locked exclusively while reserving (POSIX locks may cover bytes past the end of file)
WRITE_LOCK_BYTE = 65  # locked shared while writing reserved bytes, exclusively while closing


class JobReservation:
    """The reservation file of one job directory; open it in each process that reserves or writes."""

    def __init__(self, job_dir: Path):
        self.job_dir = Path(job_dir)
        self.path = self.job_dir / RESERVATION_FILE
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

    def _write(self, start: int, next_phy: int, file_size: int, closed: int) -> None:
        with disk_full(self.path, "the job's reservation"):
            os.pwrite(self._fd, RESERVATION.pack(start, next_phy, file_size, closed), 0)

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

    def reserve(self, lengths: np.ndarray, start: Callable[[], tuple[int, int]]) -> Placement:
        """Place records of ``lengths`` after everything reserved so far. ``start()`` gives (store end, file
        size) for the job's first reservation."""
        with self._locked(RESERVE_LOCK_BYTE, exclusive=True):
            state = self._read()
            self._check_open(state is not None and bool(state[3]))
            if state is None:
                begin, file_size = start()
                state = (begin, begin, file_size, 0)
            placement = place_records(state[1], lengths, state[2])
            self._write(state[0], placement.end, state[2], 0)
            return placement

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
                self._write(0, 0, 0, 1)
                return None
            self._write(state[0], state[1], state[2], 1)
            return state[0], state[1], state[2]


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


__all__ = ["JobReservation", "RESERVATION", "close_job", "reservation_closed", "staged_commitlog_dir"]
