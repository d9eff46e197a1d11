"""The job reservation's locks, across processes (POSIX record locks are per process, as Spark's workers are)."""

import multiprocessing
import time

import numpy as np
import pytest

from rocketstore_spark.errors import JobClosedError
from rocketstore_spark.store.write.reservation import JobReservation

FILE_SIZE = 1 << 20
CTX = multiprocessing.get_context("fork")


def _start():
    return 0, FILE_SIZE


def _hold_writing(job_dir, entered, release):
    """A task attempt in the middle of writing a reserved batch."""
    with JobReservation(job_dir) as reservation:
        reservation.reserve(np.array([100]), _start)
        with reservation.writing():
            entered.set()
            release.wait(30)


def _close(job_dir, result):
    with JobReservation(job_dir) as reservation:
        result.put(reservation.close())


@pytest.fixture
def writer_in_flight(tmp_path):
    entered, release = CTX.Event(), CTX.Event()
    proc = CTX.Process(target=_hold_writing, args=(tmp_path, entered, release))
    proc.start()
    assert entered.wait(30)
    yield tmp_path, release
    release.set()
    proc.join(30)


def test_a_reservation_does_not_wait_for_another_attempts_write(writer_in_flight):
    job_dir, _ = writer_in_flight
    with JobReservation(job_dir) as reservation:
        began = time.monotonic()
        placement = reservation.reserve(np.array([200, 300]), _start)
        assert time.monotonic() - began < 5  # the other process still holds its write lock
        assert placement.phy.tolist() == [100, 300]  # after the other attempt's 100 bytes


def test_closing_waits_for_writes_in_flight_and_then_refuses_every_attempt(writer_in_flight):
    job_dir, release = writer_in_flight
    result = CTX.Queue()
    closer = CTX.Process(target=_close, args=(job_dir, result))
    closer.start()
    closer.join(1.0)
    assert closer.is_alive()  # blocked behind the write in flight
    release.set()
    closer.join(30)
    assert result.get(timeout=5) == (0, 100, FILE_SIZE)
    with JobReservation(job_dir) as reservation:
        with pytest.raises(JobClosedError, match="already committed or aborted"):
            reservation.reserve(np.array([10]), _start)
        with pytest.raises(JobClosedError, match="already committed or aborted"):
            with reservation.writing():
                pass
