"""Housekeeping of a store opened for writing: files whose creation a crash interrupted, and the staging
directories of jobs already committed or aborted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..files.store_files import remove_temporaries
from ..format import layout as L
from .reservation import reservation_closed
from .store_meta import STAGING_DIR, meta_dir


def remove_half_made_files(root: Path) -> list[Path]:
    """Hidden temporaries of :func:`.store_files.create_full_size` left in the store's directories."""
    root = Path(root)
    # directory entries' types come with the listing: no stat per queue (thousands of queues)
    queues = [q.path for t in _subdirectories(root / L.CONSUMEQUEUE_DIR) for q in _subdirectories(t.path)]
    return [p for d in [root / L.COMMITLOG_DIR, root / L.INDEX_DIR, *queues] for p in remove_temporaries(d)]


def _subdirectories(directory) -> list:
    try:
        return [e for e in os.scandir(directory) if e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove_closed_staging(root: Path) -> list[str]:
    """Staging directories of jobs already committed or aborted (a driver died between closing the job and
    removing its files). Open ones may belong to a job still running and stay."""
    out = []
    parent = meta_dir(root) / STAGING_DIR
    for job_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
        if job_dir.is_dir() and reservation_closed(job_dir):
            shutil.rmtree(job_dir, ignore_errors=True)
            out.append(f"job {job_dir.name}: staged files of a committed or aborted job removed")
    return out


__all__ = ["remove_half_made_files", "remove_closed_staging"]
