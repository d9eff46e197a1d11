"""The publication journal: all-or-nothing appends of a whole job, surviving a crash at any step.

Before a job's first byte reaches the store, ``.rocketstore/journal/<job>.json`` records the store's state: the
commit log's end, the touched queues' ends, the newest index file's header, the checkpoint. When every byte is
written the journal's state becomes ``done`` (an atomic rename) — the commit point.
:func:`~.write_recovery.recover_store`, run whenever a store is opened for writing (and by ``rocketstore recover``),
finishes a ``done`` journal (cleans up) and rolls any other back to the recorded state (:mod:`.rollback`), so a
store holds all of a job or none of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..files.store_files import is_temporary
from ..format import layout as L
from .store_meta import JOURNAL_DIR, journal_path, meta_dir, write_json_atomically

STATE_PUBLISHING = "publishing"
STATE_DONE = "done"


def write_journal(root: Path, payload: dict, sync: bool = True) -> None:
    """Record the store's state before a job (``sync``: forced to disk, as SYNC_FLUSH needs; under ASYNC_FLUSH
    the store's own bytes are not forced either, so a journal on disk would not make an OS crash all or
    nothing — a killed process finds it in the page cache all the same)."""
    write_json_atomically(journal_path(root, payload["job"]), payload, sync=sync)


def mark_done(root: Path, job_id: str, topics: Optional[dict] = None, sync: bool = True) -> None:
    """The commit point: from here on recovery keeps the job. ``topics`` (topic → queues) are the entries the
    job adds to the broker's topic table right after; recovery adds them if a crash came first. ``sync`` as
    for :func:`write_journal`."""
    path = journal_path(root, job_id)
    payload = json.loads(path.read_text())
    payload["state"] = STATE_DONE
    payload["register_topics"] = dict(topics or {})
    write_json_atomically(path, payload, sync=sync)


def snapshot(root: Path, job_id: str, start_phy: int, queues: dict, index_dir: Path,
             planned_index_entries: int, kind: str = "append", sink=None) -> dict:
    """The pre-publication state the journal records (``queues``: "topic/qid" → (max offset, its files))."""
    index_files = sorted(p.name for p in index_dir.iterdir() if p.is_file() and not is_temporary(p)) \
        if index_dir.is_dir() else []
    header = None
    if index_files:
        with open(index_dir / index_files[-1], "rb") as fh:
            header = fh.read(L.INDEX_HEADER_SIZE).hex()
    checkpoint = Path(root) / L.CHECKPOINT_FILE
    commitlog = Path(root) / L.COMMITLOG_DIR
    return {
        "job": job_id, "kind": kind, "state": STATE_PUBLISHING, "start_phy": start_phy, "sink": sink,
        "commitlog_files": sorted(p.name for p in commitlog.iterdir() if not is_temporary(p))
        if commitlog.is_dir() else [],
        "queues": queues, "index_files": index_files, "index_header": header,
        "planned_index_entries": planned_index_entries,
        "checkpoint": checkpoint.read_bytes().hex() if checkpoint.exists() else None,
        "topics_existed": sorted(p.name for p in (Path(root) / L.CONSUMEQUEUE_DIR).iterdir())
        if (Path(root) / L.CONSUMEQUEUE_DIR).is_dir() else [],
    }


def pending_journals(root: Path) -> list[Path]:
    jdir = meta_dir(root) / JOURNAL_DIR
    return sorted(jdir.glob("*.json")) if jdir.is_dir() else []


__all__ = ["STATE_PUBLISHING", "STATE_DONE", "write_journal", "mark_done", "snapshot", "pending_journals"]
