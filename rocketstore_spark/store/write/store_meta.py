"""Where rocketstore keeps its own files inside a store: ``.rocketstore/`` with the publication journals, the
staging directories of running jobs, the trash of an overwrite and the streaming sinks' batch ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..files.store_files import write_text_atomically
from ..format import layout as L

META_DIR = L.META_DIR
JOURNAL_DIR = "journal"
STAGING_DIR = "staging"
TRASH_DIR = "trash"
SINKS_DIR = "sinks"
#: a job's consume-queue skeleton inside its staging directory (+ its file size; :mod:`.queue_skeleton`): empty
#: directories by design, kept by the housekeeping until their job's staging directory goes
SKELETON_PREFIX = "consumequeue-"


def meta_dir(root: Path) -> Path:
    return Path(root) / META_DIR


def staging_dir(root: Path, job_id: str) -> Path:
    return meta_dir(root) / STAGING_DIR / job_id


def journal_path(root: Path, job_id: str) -> Path:
    return meta_dir(root) / JOURNAL_DIR / f"{job_id}.json"


def sink_state_path(root: Path, sink_id: str) -> Path:
    return meta_dir(root) / SINKS_DIR / f"{sink_id}.json"


def write_json_atomically(path: Path, payload: dict, sync: bool = True) -> None:
    write_text_atomically(path, json.dumps(payload), sync=sync)


def remove_empty_dirs(directory: Path) -> None:
    """Remove ``directory`` and its subdirectories where they hold no file (``.rocketstore`` housekeeping); a
    running job's consume-queue skeleton is left alone."""
    if Path(directory).is_dir():
        _remove_if_empty(str(directory))


def _remove_if_empty(directory: str) -> bool:
    empty = True
    for entry in os.scandir(directory):
        if not (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(SKELETON_PREFIX)
                and _remove_if_empty(entry.path)):
            empty = False
    if empty:
        os.rmdir(directory)
    return empty


__all__ = ["META_DIR", "JOURNAL_DIR", "STAGING_DIR", "TRASH_DIR", "SINKS_DIR", "SKELETON_PREFIX", "meta_dir",
           "staging_dir", "journal_path", "sink_state_path", "write_json_atomically", "remove_empty_dirs"]
