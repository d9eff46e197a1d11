"""Staged jobs as an operator sees them: listing, removal by id or age, and what removal must never do."""

import os
import time

import pytest

from rocketstore_spark.errors import InvalidArgumentError, JobClosedError, StoreLockedError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.locking import StoreLock
from rocketstore_spark.store.write.publish import new_job_id
from rocketstore_spark.store.write.reservation import close_job
from rocketstore_spark.store.write.staged_jobs import (
    STATE_CLOSED,
    STATE_OPEN,
    parse_age,
    remove_staged_jobs,
    staged_jobs,
)
from rocketstore_spark.store.write.staging import stage
from rocketstore_spark.store.write.store_meta import journal_path, staging_dir
from tests.store.write.test_publish import base_store, stage_job  # noqa: F401 - the fixture is used by name
from tests.store.write.test_writer import messages, tree_digest


def _age(root, job, seconds):
    """Make every file of a job look last written ``seconds`` ago."""
    then = time.time() - seconds
    for base, _, names in os.walk(staging_dir(root, job)):
        for name in names:
            os.utime(os.path.join(base, name), (then, then))


def test_lists_open_and_closed_jobs_with_their_disk_use(base_store):  # noqa: F811
    assert staged_jobs(base_store) == []
    running, finished = new_job_id(), new_job_id()
    stage_job(base_store, running)
    stage_job(base_store, finished)
    close_job(staging_dir(base_store, finished))  # a driver that died right after closing its job
    _age(base_store, finished, 3600)
    jobs = staged_jobs(base_store)
    assert [(j.job_id, j.state) for j in jobs] == [(finished, STATE_CLOSED), (running, STATE_OPEN)]
    for job in jobs:
        # the staged records (330 messages of ~100 bytes) plus reservation and metadata files
        assert job.files >= 4 and job.disk_bytes >= 330 * 100
    assert abs(jobs[0].last_write_ms - (time.time() - 3600) * 1000) < 5000


def test_removal_by_id_and_by_age_leaves_the_store_untouched(base_store):  # noqa: F811
    before = tree_digest(base_store)
    old, recent, other = new_job_id(), new_job_id(), new_job_id()
    for job in (old, recent, other):
        stage_job(base_store, job)
    _age(base_store, old, 2 * 86400)
    removed = remove_staged_jobs(base_store, older_than_s=parse_age("1d"))
    assert [j.job_id for j in removed] == [old]
    assert [j.job_id for j in remove_staged_jobs(base_store, [other])] == [other]
    assert [j.job_id for j in staged_jobs(base_store)] == [recent]
    remove_staged_jobs(base_store, [recent])
    assert staged_jobs(base_store) == [] and tree_digest(base_store) == before


def test_an_attempt_still_running_cannot_write_after_its_job_was_removed(base_store):  # noqa: F811
    job = new_job_id()

    def tables():
        yield messages(20, start=900)
        remove_staged_jobs(base_store, [job])  # the operator decides the job is dead while it still runs
        yield messages(20, start=920)

    with pytest.raises(JobClosedError):
        stage(base_store, job, "p0", tables(), store_host="10.0.0.1:10911")
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300


def test_refusals(base_store):  # noqa: F811
    job = new_job_id()
    stage_job(base_store, job)
    with pytest.raises(InvalidArgumentError, match="no staged job 'nope'.*expected one of"):
        remove_staged_jobs(base_store, ["nope"])
    with pytest.raises(InvalidArgumentError, match="name the jobs"):
        remove_staged_jobs(base_store)
    journal_path(base_store, job).parent.mkdir(parents=True)
    journal_path(base_store, job).write_text("{}")  # an interrupted commit: recovery's business
    with pytest.raises(InvalidArgumentError, match="rocketstore recover"):
        remove_staged_jobs(base_store, [job])
    journal_path(base_store, job).unlink()
    lock = StoreLock.acquire(base_store)  # a broker or a committing writer
    try:
        with pytest.raises(StoreLockedError):
            remove_staged_jobs(base_store, [job])
    finally:
        lock.release()
    assert [j.job_id for j in staged_jobs(base_store)] == [job]


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("12h", 43200),
                                           ("1.5d", 129600)])
def test_parse_age(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "soon", "-5m"])
def test_parse_age_rejects(text):
    with pytest.raises(InvalidArgumentError, match="age"):
        parse_age(text)
