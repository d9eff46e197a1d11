"""The job reservation's locks, across processes (POSIX record locks are per process, as Spark's workers are)."""

import multiprocessing
import time

import numpy as np
import pytest

from rocketstore_spark.errors import DiskFullError, JobClosedError
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
        placement = reservation.reserve(np.array([200, 300]), _start).placement
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


def _reserve_queues(job_dir, keys, counts, rounds, out):
    """A task attempt reserving ``rounds`` batches, each taking ``counts`` offsets of ``keys``."""
    with JobReservation(job_dir) as reservation:
        for _ in range(rounds):
            got = reservation.reserve(np.array([100] * int(sum(counts))), _start, queues=(keys, np.array(counts)),
                                      queue_ends=lambda new: np.array([1000 + q for _, q in new]))
            out.put([(k, int(first), int(n)) for k, first, n in zip(keys, got.first_offsets, counts)])


def test_queue_offsets_taken_by_processes_in_turn_are_consecutive_per_queue(tmp_path):
    """Two processes reserving at once: every queue's offsets, over all their reservations, tile a run from the
    store's end of that queue, with no offset given twice."""
    out = CTX.Queue()
    procs = [CTX.Process(target=_reserve_queues, args=(tmp_path, keys, counts, 25, out)) for keys, counts in (
        ([("a", 0), ("a", 1)], [3, 1]), ([("a", 1), ("b", 7)], [2, 5]))]
    for p in procs:
        p.start()
    taken = [entry for _ in range(50) for entry in out.get(timeout=60)]
    for p in procs:
        p.join(30)
    for key, total in ((("a", 0), 75), (("a", 1), 75), (("b", 7), 125)):
        runs = sorted((first, n) for k, first, n in taken if k == key)
        assert runs[0][0] == 1000 + key[1]  # where the store's queue ends
        assert all(a + n == b for (a, n), (b, _) in zip(runs, runs[1:]))  # consecutive, nothing twice
        assert runs[-1][0] + runs[-1][1] == 1000 + key[1] + total


def test_a_reservation_never_stamps_an_earlier_time_than_the_last(tmp_path):
    times = iter([5_000, 4_000, 6_000])
    with JobReservation(tmp_path) as reservation:
        stamps = [reservation.reserve(np.array([10]), _start, clock=lambda: next(times)).stamp for _ in range(3)]
    assert stamps == [5_000, 5_000, 6_000]  # a clock set back (or another machine's) does not go back in time


def test_a_queue_log_write_that_fails_leaves_no_half_block(tmp_path, monkeypatch):
    """A block that cannot be written whole (a full disk) is taken back: the next reservation, in this process or
    another, continues from the blocks written."""
    from rocketstore_spark.store.write import reservation as module

    keys, counts = [("a", 0)], np.array([4])
    with JobReservation(tmp_path) as first:
        first.reserve(np.array([10] * 4), _start, queues=(keys, counts))
    real = module.os.pwrite
    monkeypatch.setattr(module.os, "pwrite", lambda fd, data, at: real(fd, data[:5], at)
                        if len(data) > 10 else real(fd, data, at))
    with JobReservation(tmp_path) as failing, pytest.raises(DiskFullError):
        failing.reserve(np.array([10] * 4), _start, queues=(keys, counts))
    monkeypatch.undo()
    with JobReservation(tmp_path) as later:
        got = later.reserve(np.array([10] * 4), _start, queues=(keys, counts))
    assert got.first_offsets.tolist() == [4]
