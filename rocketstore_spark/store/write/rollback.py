"""Rolling a publication back to the state its journal recorded: the commit log's end, the touched queues'
ends, the newest index file's header, the checkpoint; an overwrite's data comes back from its trash. Rollback
never touches bytes before the recorded ends, so nothing published earlier can be lost."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from ..files.index_file import IndexHeader, index_file_size
from ..files.sizes import StoreSizes
from ..format import layout as L
from .repair import restore_file, write_changed_pages, zero_from
from .store_meta import TRASH_DIR, meta_dir


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


def discard_trash(root: Path, job: str) -> None:
    shutil.rmtree(meta_dir(root) / TRASH_DIR / job, ignore_errors=True)


__all__ = ["rollback", "move_to_trash", "discard_trash"]
