"""The publication journal: all-or-nothing appends of a whole job, surviving a crash at any step.

Before a job's first byte reaches the store, ``.rocketstore/journal/<job>.json`` records the store's state: the
commit log's end, the touched queues' ends, the newest index file's header, the checkpoint. When every byte is
written the journal's state becomes ``done`` (an atomic rename) — the commit point. :func:`recover_store`, run
whenever a store is opened for writing (and by ``rocketstore recover``), finishes a ``done`` journal (cleans up)
and rolls any other back to the recorded state, so a store holds all of a job or none of it. Rollback never
touches bytes before the recorded ends, so nothing published earlier can be lost.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import numpy as np

from ..files.index_file import IndexHeader, index_file_size
from ..files.sizes import StoreSizes
from ..files.store_files import is_temporary, remove_temporaries, write_text_atomically
from ..files.topic_config import register_topics, topics_path
from ..format import layout as L
from .repair import repair_store, restore_file, write_changed_pages, zero_from
from .reservation import reservation_closed

META_DIR = L.META_DIR
JOURNAL_DIR = "journal"
STAGING_DIR = "staging"
TRASH_DIR = "trash"
#: a job's consume-queue skeleton inside its staging directory (+ its file size; :mod:`.queue_skeleton`): empty
#: directories by design, kept by the housekeeping until their job's staging directory goes
SKELETON_PREFIX = "consumequeue-"
STATE_PUBLISHING = "publishing"
STATE_DONE = "done"


def meta_dir(root: Path) -> Path:
    return Path(root) / META_DIR


def staging_dir(root: Path, job_id: str) -> Path:
    return meta_dir(root) / STAGING_DIR / job_id


def _write_json_atomically(path: Path, payload: dict) -> None:
    write_text_atomically(path, json.dumps(payload))


def journal_path(root: Path, job_id: str) -> Path:
    return meta_dir(root) / JOURNAL_DIR / f"{job_id}.json"


def write_journal(root: Path, payload: dict) -> None:
    _write_json_atomically(journal_path(root, payload["job"]), payload)


def mark_done(root: Path, job_id: str, topics: Optional[dict] = None) -> None:
    """The commit point: from here on recovery keeps the job. ``topics`` (topic → queues) are the entries the
    job adds to the broker's topic table right after; recovery adds them if a crash came first."""
    path = journal_path(root, job_id)
    payload = json.loads(path.read_text())
    payload["state"] = STATE_DONE
    payload["register_topics"] = dict(topics or {})
    _write_json_atomically(path, payload)


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


SINKS_DIR = "sinks"


def sink_state_path(root: Path, sink_id: str) -> Path:
    return meta_dir(root) / SINKS_DIR / f"{sink_id}.json"


def last_sink_batch(root: Path, sink_id: str) -> int:
    """The newest batch id a streaming sink committed into this store (-1 when none)."""
    path = sink_state_path(root, sink_id)
    return json.loads(path.read_text())["lastBatchId"] if path.exists() else -1


def record_sink_batch(root: Path, sink_id: str, batch_id: int) -> None:
    if batch_id > last_sink_batch(root, sink_id):
        _write_json_atomically(sink_state_path(root, sink_id), {"sinkId": sink_id, "lastBatchId": batch_id})


def recover_store(root: Path, sizes: StoreSizes) -> list[str]:
    """Finish or roll back interrupted publications, then repair a crashed tail. Caller holds the lock.

    Returns what was done, one line per journal, for logs and ``rocketstore recover``.
    """
    sizes.require_index_sizes()  # rolling back or re-indexing rewrites index files: their layout must be known
    done = [f"removed {p}: a file whose creation a crash interrupted" for p in _remove_half_made_files(root)]
    jdir = meta_dir(root) / JOURNAL_DIR
    for path in sorted(jdir.glob("*.json")) if jdir.is_dir() else []:
        payload = json.loads(path.read_text())
        job = payload["job"]
        if payload["state"] == STATE_DONE:
            _discard_trash(root, job)
            if payload.get("sink"):
                record_sink_batch(root, *payload["sink"])
            added = register_topics(root, payload.get("register_topics") or {})
            done.append(f"job {job}: was committed; cleaned up" +
                        (f" (added topics {', '.join(added)} to {topics_path(root)})" if added else ""))
        else:
            rollback(root, sizes, payload)
            done.append(f"job {job}: was interrupted before its commit point; rolled back")
            (Path(root) / L.ABORT_FILE).unlink(missing_ok=True)
        shutil.rmtree(staging_dir(root, job), ignore_errors=True)
        path.unlink()
    done += _remove_closed_staging(Path(root))
    if (Path(root) / L.ABORT_FILE).exists():
        end = repair_store(root, sizes)
        (Path(root) / L.ABORT_FILE).unlink()
        done.append(f"crashed tail repaired: commit log valid up to offset {end}")
    remove_empty_dirs(meta_dir(root))
    return done


def _remove_half_made_files(root: Path) -> list[Path]:
    """Hidden temporaries of :func:`.store_files.create_full_size` left in the store's directories."""
    root = Path(root)
    cq = root / L.CONSUMEQUEUE_DIR
    queues = [q for t in cq.iterdir() if t.is_dir() for q in t.iterdir() if q.is_dir()] if cq.is_dir() else []
    return [p for d in [root / L.COMMITLOG_DIR, root / L.INDEX_DIR, *queues] for p in remove_temporaries(d)]


def _remove_closed_staging(root: Path) -> list[str]:
    """Staging directories of jobs already committed or aborted (a driver died between closing the job and
    removing its files). Open ones may belong to a job still running and stay."""
    out = []
    parent = meta_dir(root) / STAGING_DIR
    for job_dir in sorted(parent.iterdir()) if parent.is_dir() else []:
        if job_dir.is_dir() and reservation_closed(job_dir):
            shutil.rmtree(job_dir, ignore_errors=True)
            out.append(f"job {job_dir.name}: staged files of a committed or aborted job removed")
    return out


def _discard_trash(root: Path, job: str) -> None:
    shutil.rmtree(meta_dir(root) / TRASH_DIR / job, ignore_errors=True)


def rollback(root: Path, sizes: StoreSizes, journal: dict) -> None:
    """Put the store back in the state the journal recorded."""
    root = Path(root)
    if journal.get("kind") == "overwrite":
        _rollback_overwrite(root, journal)
        return
    _rollback_commitlog(root, sizes, journal)
    for key, (before, files_before) in journal["queues"].items():
        topic, _, qid = key.rpartition("/")
        _rollback_queue(root / L.CONSUMEQUEUE_DIR / topic / qid, sizes, before, files_before)
    for topic_dir in (root / L.CONSUMEQUEUE_DIR).iterdir() if (root / L.CONSUMEQUEUE_DIR).is_dir() else []:
        if topic_dir.name not in journal["topics_existed"] and not any(p.is_file() for p in topic_dir.rglob("*")):
            shutil.rmtree(topic_dir)
    _rollback_index(root, sizes, journal)
    checkpoint = root / L.CHECKPOINT_FILE
    if journal["checkpoint"] is None:
        checkpoint.unlink(missing_ok=True)
    else:
        restore_file(checkpoint, bytes.fromhex(journal["checkpoint"]))


def _rollback_commitlog(root: Path, sizes: StoreSizes, journal: dict) -> None:
    start = journal["start_phy"]
    before = set(journal["commitlog_files"])
    directory = root / L.COMMITLOG_DIR
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if path.name not in before:
            path.unlink()
        elif start < int(path.name) + sizes.commit_log_file_size:  # the end's file, or one allocated ahead
            zero_from(path, max(0, start - int(path.name)))


def _rollback_queue(directory: Path, sizes: StoreSizes, before: int, files_before) -> None:
    """Delete the queue's files the job created (the directory too when it is new) and zero the units it
    appended to the file that held the queue's end."""
    if files_before is None:
        shutil.rmtree(directory, ignore_errors=True)
        return
    cut = before * L.CQ_STORE_UNIT_SIZE
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        start = int(path.name)
        if path.name not in files_before:
            path.unlink()
        elif start <= cut < start + sizes.consume_queue_file_size:
            zero_from(path, cut - start)


def _rollback_index(root: Path, sizes: StoreSizes, journal: dict) -> None:
    directory = root / L.INDEX_DIR
    before = journal["index_files"]
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if path.name not in before:
            path.unlink()
    if not before or journal["index_header"] is None:
        return
    header_bytes = bytes.fromhex(journal["index_header"])
    header = IndexHeader(*L.INDEX_HEADER.unpack(header_bytes))
    path = directory / before[-1]
    slots_end = L.INDEX_HEADER_SIZE + sizes.index_hash_slots * L.INDEX_SLOT_SIZE
    with open(path, "r+b") as fh:
        data = bytearray(fh.read(index_file_size(sizes.index_hash_slots, sizes.index_max_entries)))
        slots = np.frombuffer(bytes(data[L.INDEX_HEADER_SIZE:slots_end]), dtype=">i4").astype(np.int64)
        entries = np.frombuffer(bytes(data[slots_end:]), dtype=L.INDEX_ENTRY_DTYPE)
        count = header.index_count
        # undo the chain pushes: a slot pointing at a job entry goes back along 'prev' to an older entry, all
        # slots one step at a time (as many steps as the longest run of job entries in one bucket)
        prev = np.append(entries["prev"].astype(np.int64), 0)  # past the entries: 0, an empty slot
        pushed = np.flatnonzero(slots >= count)
        values = slots[pushed]
        while (ahead := values >= count).any():
            older = prev[np.minimum(values[ahead], len(entries))]
            # a link that does not go back (a damaged file) would loop forever: the slot becomes empty
            values[ahead] = np.where(older < values[ahead], older, 0)
        slots[pushed] = values
        write_changed_pages(fh.fileno(), 0, bytes(data[:slots_end]), header_bytes + slots.astype(">i4").tobytes())
    zero_from(path, slots_end + count * L.INDEX_ENTRY_SIZE)


def move_to_trash(root: Path, job_id: str) -> None:
    """For overwrite: move the store's data aside (renames only) so that rollback can bring it back."""
    trash = meta_dir(root) / TRASH_DIR / job_id
    trash.mkdir(parents=True, exist_ok=True)
    for name in (L.COMMITLOG_DIR, L.CONSUMEQUEUE_DIR, L.INDEX_DIR, L.CHECKPOINT_FILE):
        if (Path(root) / name).exists() and not (trash / name).exists():
            os.replace(Path(root) / name, trash / name)


def _rollback_overwrite(root: Path, journal: dict) -> None:
    trash = meta_dir(root) / TRASH_DIR / journal["job"]
    for name in (L.COMMITLOG_DIR, L.CONSUMEQUEUE_DIR, L.INDEX_DIR, L.CHECKPOINT_FILE):
        if (trash / name).exists():
            target = Path(root) / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            os.replace(trash / name, target)
    shutil.rmtree(trash, ignore_errors=True)


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


def pending_journals(root: Path) -> list[Path]:
    jdir = meta_dir(root) / JOURNAL_DIR
    return sorted(jdir.glob("*.json")) if jdir.is_dir() else []


__all__ = ["recover_store", "write_journal", "mark_done", "snapshot", "staging_dir", "move_to_trash",
           "pending_journals", "last_sink_batch", "record_sink_batch"]
