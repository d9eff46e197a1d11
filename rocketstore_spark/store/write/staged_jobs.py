"""Staged write jobs as an operator sees them: listing, and removing the ones nobody will commit.

A Spark write job stages its records under ``.rocketstore/staging/<job>/`` (:mod:`.staging`) until its driver
commits or aborts. Committed and aborted jobs are cleaned up by the next writer; a job whose driver died before
either (the application was killed, the cluster lost) leaves its staging *open*, and no process can tell from
the files alone whether that job is dead or merely slow — it may run on another machine. So open staging is
only removed on request: by job id, or when nothing was written into it for longer than a given age.

Removing a job closes its reservation first (:func:`.reservation.close_job`): an attempt of that job still
running then fails instead of writing. Removal holds the store's ``lock``, so it never races a commit (a
committing driver holds the lock) and fails fast while a broker owns the store. A job with a publication
journal is left to ``rocketstore recover``, which finishes or rolls it back.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ...errors import InvalidArgumentError
from ..files.locking import StoreLock
from .reservation import reservation_closed
from .staging import discard_staged
from .store_meta import STAGING_DIR, journal_path, meta_dir

STATE_OPEN = "open"  # not committed or aborted: running, or abandoned by a dead driver
STATE_CLOSED = "closed"  # committed or aborted; its files are removed by the next writer


@dataclass(frozen=True)
class StagedJob:
    """One job directory under ``.rocketstore/staging/``."""

    job_id: str
    state: str
    disk_bytes: int  # blocks the job's files occupy (staged commit-log files are sparse)
    files: int
    last_write_ms: int  # newest modification of any of its files (a reservation or a staged write)
    path: str

    def as_dict(self) -> dict:
        return asdict(self)


def staged_jobs(root) -> list[StagedJob]:
    """Every staged job of the store at ``root``, oldest activity first. Reads only; takes no lock."""
    parent = meta_dir(Path(root)) / STAGING_DIR
    jobs = []
    for job_dir in parent.iterdir() if parent.is_dir() else []:
        if job_dir.is_dir():
            jobs.append(_describe(job_dir))
    return sorted(jobs, key=lambda j: (j.last_write_ms, j.job_id))


def _describe(job_dir: Path) -> StagedJob:
    disk = count = 0
    newest = 0.0
    for base, _, names in os.walk(job_dir):
        for name in names:
            try:
                st = os.stat(os.path.join(base, name))
            except FileNotFoundError:  # removed meanwhile by the job's own clean-up
                continue
            disk += st.st_blocks * 512
            count += 1
            newest = max(newest, st.st_mtime)
    if not count:
        newest = job_dir.stat().st_mtime
    state = STATE_CLOSED if reservation_closed(job_dir) else STATE_OPEN
    return StagedJob(job_dir.name, state, disk, count, int(newest * 1000), str(job_dir))


def remove_staged_jobs(root, job_ids: Optional[list[str]] = None, *, older_than_s: Optional[float] = None,
                       now_ms: Optional[int] = None) -> list[StagedJob]:
    """Remove the named jobs' staging, and/or every job not written to for ``older_than_s`` seconds (closed
    jobs always qualify). Returns what was removed. Raises when a named job does not exist or has a journal
    (an interrupted commit: ``rocketstore recover`` handles it), or when the store is locked."""
    root = Path(root)
    if not job_ids and older_than_s is None:
        raise InvalidArgumentError("name the jobs to remove or give an age (older_than_s); expected at least one")
    if older_than_s is not None and older_than_s < 0:
        raise InvalidArgumentError(f"older_than_s must be >= 0, found {older_than_s}")
    lock = StoreLock.acquire(root)
    try:
        jobs = {j.job_id: j for j in staged_jobs(root)}
        chosen = []
        for job_id in job_ids or []:
            if job_id not in jobs:
                raise InvalidArgumentError(
                    f"no staged job {job_id!r} in {meta_dir(root) / STAGING_DIR}; expected one of "
                    f"{sorted(jobs) or 'none (nothing is staged)'}")
            chosen.append(jobs[job_id])
        if older_than_s is not None:
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            cutoff = now_ms - older_than_s * 1000
            chosen += [j for j in jobs.values() if j not in chosen and
                       (j.state == STATE_CLOSED or j.last_write_ms <= cutoff)]
        for job in chosen:
            if journal_path(root, job.job_id).exists():
                raise InvalidArgumentError(
                    f"job {job.job_id} has a publication journal (its commit was interrupted); run "
                    f"`rocketstore recover {root}` to finish or roll it back, which also removes its staging")
        for job in chosen:
            discard_staged(root, job.job_id)
        return chosen
    finally:
        lock.release()


def parse_age(text: str) -> float:
    """Seconds from an age such as ``90s``, ``30m``, ``12h`` or ``7d`` (a bare number is seconds)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(value) * units[unit]
    except ValueError as e:
        raise InvalidArgumentError(f"expected an age like 90s, 30m, 12h or 7d, found {text!r}") from e
    if seconds < 0:
        raise InvalidArgumentError(f"expected a non-negative age, found {text!r}")
    return seconds


__all__ = ["StagedJob", "staged_jobs", "remove_staged_jobs", "parse_age", "STATE_OPEN", "STATE_CLOSED"]
