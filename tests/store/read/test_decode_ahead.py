"""Batches decoded ahead on worker threads: in order, errors where their batch would be, nothing started past a
consumer that stopped, and the same batches as a scan on the caller's thread."""

import threading

import pyarrow as pa
import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.read.decode_ahead import default_threads, in_order


def test_results_come_in_job_order_whatever_finishes_first():
    gates = [threading.Event() for _ in range(6)]

    def job(i):
        def run():
            if i == 0:
                assert gates[1].wait(5)  # the second job finishes first
            gates[i].set()
            return i
        return run

    assert list(in_order((job(i) for i in range(6)), threads=3)) == list(range(6))


def test_one_thread_runs_each_job_on_the_caller_when_asked_for():
    ran = []
    results = in_order((lambda i=i: ran.append((i, threading.get_ident())) or i for i in range(3)), threads=1)
    assert ran == []
    assert next(results) == 0 and ran == [(0, threading.get_ident())]
    assert list(results) == [1, 2]


def test_an_error_is_raised_where_its_result_would_have_been():
    def jobs():
        yield lambda: 1
        yield lambda: (_ for _ in ()).throw(ValueError("bad batch"))
        yield lambda: 3

    results = in_order(jobs(), threads=2)
    assert next(results) == 1
    with pytest.raises(ValueError, match="bad batch"):
        next(results)


def test_jobs_past_a_stopped_consumer_are_not_all_run():
    started = []

    def jobs():
        for i in range(1000):
            yield lambda i=i: started.append(i) or i

    results = in_order(jobs(), threads=2)
    assert next(results) == 0
    results.close()
    assert len(started) <= 4


def test_threads_must_be_positive_and_default_to_the_cores_available():
    with pytest.raises(InvalidArgumentError, match="at least 1, found 0"):
        list(in_order([lambda: 1], threads=0))
    assert 1 <= default_threads() <= 4


def test_a_threaded_scan_returns_the_batches_of_a_scan_on_the_callers_thread(tmp_path):
    sizes = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=100 * 20, index_hash_slots=64,
                 index_max_entries=4096)
    table = pa.table({"topic": ["T"] * 3000, "queueId": [i % 3 for i in range(3000)],
                      "tags": [f"t{i % 7}" for i in range(3000)], "body": [b"m-%d" % i * 9 for i in range(3000)]})
    with RocketStore.open_writer(tmp_path / "s", **sizes) as w:
        w.append(table)
    with RocketStore.open(tmp_path / "s") as s:
        alone = pa.Table.from_batches(list(s.scan_raw(batch_rows=250, threads=1)))
        ahead = pa.Table.from_batches(list(s.scan_raw(batch_rows=250, threads=3)))
    assert alone.num_rows == 3000 and len(set(alone.column("commitLogOffset").to_pylist())) == 3000
    assert ahead.equals(alone)

