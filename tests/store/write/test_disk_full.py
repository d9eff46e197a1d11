"""A full disk never corrupts a store: appends and staged publications on a size-limited tmpfs, failing at every
step of the write (staging, commit log, consume queues, index, journal, checkpoint) and on a disk already full.

Each case builds a store inside the small filesystem, fills it up to leave a given number of free bytes, runs the
write, and then checks: the error is :class:`DiskFullError` (chained from ``ENOSPC``), the store's files are
byte-identical to before (or the job is complete, past its commit point), ``rocketstore recover`` succeeds once
space is freed, the store then reads exactly the messages expected, and a next append works.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.errors import DiskFullError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.known_end import KNOWN_END_FILE
from rocketstore_spark.store.read.verify import verify_store
from rocketstore_spark.store.write.journal import pending_journals
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.staging import discard_staged, stage
from tests.store.write.test_writer import messages

SIZES = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=600, index_hash_slots=64, index_max_entries=256)
SIZE_ARGS = ["--commit-log-file-size", "65536", "--consume-queue-file-size", "600", "--index-hash-slots", "64",
             "--index-max-entries", "256"]
FS_BYTES = 4 * 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
BASE = 300  # messages in the store before the job
JOB = 400  # messages the job writes (three queues of "orders" and a new topic)


def _mount(directory: Path, size: int) -> str | None:
    """Mount a tmpfs of ``size`` bytes on ``directory``; the reason when that is not possible."""
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root (the tests run as root in CI)"
    if shutil.which("mount") is None:
        return "no mount command on this machine"
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                            capture_output=True, text=True)
    if result.returncode:
        return f"mount -t tmpfs failed: {result.stderr.strip() or result.returncode}"
    return None


@pytest.fixture
def small_fs(tmp_path):
    """A tmpfs of FS_BYTES mounted for the test (unmounted after)."""
    directory = tmp_path / "fs"
    directory.mkdir()
    reason = _mount(directory, FS_BYTES)
    if reason:
        pytest.skip(reason)
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def store_digest(root: Path) -> dict:
    """Every file of the store and its hash, but the lock and the last writer's record of the end (a cache)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name not in ("lock", KNOWN_END_FILE):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def fill(directory: Path, leave: int) -> Path:
    """A filler file that leaves ``leave`` bytes (rounded to pages) free."""
    filler = directory / "filler"
    with open(filler, "wb") as fh:
        todo = free_bytes(directory) - leave
        chunk = b"\x01" * (1 << 20)
        while todo > 0:
            try:
                todo -= fh.write(chunk[:min(todo, len(chunk))])
                fh.flush()
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    return filler


def job_tables():
    return [messages(JOB - 50, start=BASE), messages(50, topic="fresh", start=BASE + JOB)]


def bodies(root: Path) -> list:
    with RocketStore.open(root, **SIZES) as s:
        assert verify_store(s) == []
        rows = [r for b in s.scan_commitlog(columns=["topic", "body"]) for r in b.to_pylist()]
        per_queue = sum(s.max_offset(t, q) - s.min_offset(t, q) for t in s.topics() for q in s.queue_ids(t))
    assert per_queue == len(rows)  # every record reached its queue, no queue references more
    return [r["body"] for r in rows]


def expected_bodies(with_job: bool) -> list:
    out = messages(BASE).column("body").to_pylist()
    if with_job:
        out += [b for t in job_tables() for b in t.column("body").to_pylist()]
    return out


def run_append(root: Path) -> None:
    with RocketStore.open(root, mode="a", **SIZES) as w:
        w.append(pa.concat_tables(job_tables()))  # one append: all of it or none


def run_publish(root: Path) -> None:
    job = new_job_id()
    try:
        stems = stage(root, job, "p0", job_tables(), store_host="10.0.0.1:10911", sizes=SIZES,
                      new_topic_queues=lambda: {"fresh": 3})
        publish_staged(root, job, stems, new_topic_queues={"fresh": 3}, sizes=SIZES)
    except DiskFullError:
        discard_staged(root, job)  # what Spark's abort does when a task or the commit failed
        raise


OPERATIONS = {"append": run_append, "publish": run_publish}
#: the steps of a write, as the error names them
STEP_NAMES = {"staging": {"staged records"}, "commit log": {"the commit log", "a new commit-log file"},
              "consume queue": {"a consume queue", "a new consume-queue file"},
              "index": {"the index", "a new index file"}, "journal": {"a journal, sink or topic-table file"},
              "checkpoint": {"the checkpoint"}}


def one_case(fs: Path, operation: str, leave: int) -> dict:
    """Build the store, leave ``leave`` bytes free, write, check; returns what happened."""
    root = fs / f"store-{uuid.uuid4().hex[:6]}"
    with RocketStore.open(root, mode="a", **SIZES) as w:
        w.append(messages(BASE))
    before = store_digest(root)
    filler = fill(fs, leave)
    error = None
    try:
        OPERATIONS[operation](root)
    except DiskFullError as e:
        error = e
    committed = error is None or "is committed" in str(error) or "messages are in the store" in str(error)
    if error is not None:
        assert "disk is full" in str(error) and isinstance(error.__cause__, OSError)
        assert error.__cause__.errno in (errno.ENOSPC, errno.EDQUOT)
        if not committed:
            if pending_journals(root):  # the rollback needed room: recover does it once there is room
                assert "rocketstore recover" in str(error)
            else:
                assert store_digest(root) == before, str(error)
    filler.unlink()
    result = CliRunner().invoke(app, ["recover", str(root), *SIZE_ARGS])
    assert result.exit_code == 0, (result.output, result.exception)
    assert not pending_journals(root)
    if not committed:
        assert store_digest(root) == before, str(error)
    assert bodies(root) == expected_bodies(committed)
    with RocketStore.open(root, mode="a", **SIZES) as w:  # the store takes writes again
        w.append(messages(5, start=10_000))
    assert bodies(root)[-5:] == messages(5, start=10_000).column("body").to_pylist()
    shutil.rmtree(root)
    step = None
    if error is not None:
        message = str(error)
        step = message.split("while writing ", 1)[1].split(" [file", 1)[0].split(";", 1)[0]
    return {"leave": leave, "committed": committed, "step": step}


def usage(fs: Path, operation: str) -> int:
    """Bytes the write takes from the filesystem at its peak (a dry run with room to spare)."""
    root = fs / "dry"
    with RocketStore.open(root, mode="a", **SIZES) as w:
        w.append(messages(BASE))
    start = free_bytes(fs)
    low = start
    # the peak: sampled after every write the job makes would need hooks; the staged copy plus the store's
    # growth bounds it from above
    OPERATIONS[operation](root)
    low = min(low, free_bytes(fs))
    shutil.rmtree(root)
    return (start - low) * 2 + 8 * PAGE


@pytest.mark.parametrize("operation", ["append", "publish"])
def test_a_disk_already_full_changes_nothing(small_fs, operation):
    case = one_case(small_fs, operation, 0)
    assert case["step"] is not None and not case["committed"]


def test_a_disk_filling_up_during_publication(small_fs):
    """A few levels of free space inside the publication (commit log, consume queues, index)."""
    peak = usage(small_fs, "publish")
    steps = {one_case(small_fs, "publish", leave)["step"] for leave in range(PAGE, peak // 2, peak // 10)}
    assert {"staged records", "the commit log"} & steps


@pytest.mark.slow
@pytest.mark.parametrize("operation", ["append", "publish"])
def test_every_step_of_a_write_on_a_filling_disk(small_fs, operation):
    """Free space swept page by page across the whole write: every step fails cleanly somewhere, and past the
    end the write succeeds."""
    peak = usage(small_fs, operation)
    step = max(PAGE, peak // 50 // PAGE * PAGE)
    cases = [one_case(small_fs, operation, leave) for leave in range(0, peak + step, step)]
    print(operation, f"{len(cases)} cases, {step} bytes apart")
    steps = {c["step"] for c in cases if c["step"]}
    print(operation, sorted(steps))
    assert cases[-1]["committed"] and cases[-1]["step"] is None
    kinds = {kind for kind, names in STEP_NAMES.items() if names & steps}
    expected = {"commit log", "consume queue", "index", "checkpoint"}
    if operation == "publish":
        expected |= {"staging", "journal"}
    assert expected <= kinds, steps
