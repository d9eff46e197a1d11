"""The commit log's end as rocketstore's last writer left it, so the next writer need not walk for it again.

A writer must know where the commit log ends before it appends. Finding it is the broker's normal recovery: a
walk over the last commit-log files with every record's CRC checked — about a second per 1 GiB file, paid by
every append job twice (the first task, to stage at the right offsets, and the commit), and by every streaming
sink batch. The writer that last closed the store knows the end exactly (it put every byte up to it), so on
closing it records that end together with what recovery would look at: the last commit-log files' names,
lengths and modification times, and a digest of the checkpoint. The next writer trusts the record only while all
of that is unchanged, no ``abort`` marker says a crash happened, and the bytes at the end hold no record header
(something appended since, whatever the timestamps say); otherwise it walks as before. A record is written only
by a writer that opened a fully dispatched store (re-dispatch after an earlier broker's crash needs the walk)
and is removed whenever a writer opens the store. Planners may trust it too (``StoreReader.open(...,
trust_recorded_end=True)``): a store rocketstore wrote then opens without the walk.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from ..format import layout as L
from .sizes import StoreSizes
from .store_files import write_text_atomically

KNOWN_END_FILE = "known-end.json"
RECOVERY_TAIL_FILES = 3  # DefaultMessageStore.recoverNormally walks from the third-last commit-log file


def _path(root: Path) -> Path:
    return Path(root) / L.META_DIR / KNOWN_END_FILE


def _tail(root: Path) -> list:
    """(name, length, modification time) of the last commit-log files, in order."""
    directory = Path(root) / L.COMMITLOG_DIR
    names = sorted(n for n in os.listdir(directory) if n.isdigit()) if directory.is_dir() else []
    out = []
    for name in names[-RECOVERY_TAIL_FILES:]:
        st = os.stat(directory / name)
        out.append([name, st.st_size, st.st_mtime_ns])
    return out


def _checkpoint_digest(root: Path) -> Optional[str]:
    path = Path(root) / L.CHECKPOINT_FILE
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def forget_known_end(root: Path) -> None:
    _path(root).unlink(missing_ok=True)


def record_known_end(root: Path, end: int, sync: bool = True) -> None:
    """Record ``end`` as the commit log's end; called by a writer that has flushed everything and removed
    ``abort`` (``sync``: forced to disk, as that writer's data was; a record lost to an OS crash only costs the
    next writer its walk)."""
    payload = {"end": int(end), "tail": _tail(root), "checkpoint": _checkpoint_digest(root)}
    _path(root).parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(_path(root), json.dumps(payload), sync=sync)


def known_end(root: Path, sizes: StoreSizes) -> Optional[int]:
    """The recorded end when nothing recovery would look at has changed since it was recorded, else None."""
    root = Path(root)
    try:
        payload = json.loads(_path(root).read_text(encoding="utf-8"))
        end = int(payload["end"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (root / L.ABORT_FILE).exists() or payload.get("tail") != _tail(root) \
            or payload.get("checkpoint") != _checkpoint_digest(root):
        return None
    return end if not _record_at(root, end, sizes.commit_log_file_size) else None


def _record_at(root: Path, end: int, file_size: int) -> bool:
    """Whether the bytes at ``end`` begin a record or a BLANK marker (the commit log went on after ``end``)."""
    start = end - end % file_size
    path = Path(root) / L.COMMITLOG_DIR / L.offset_to_file_name(start)
    try:
        with open(path, "rb") as fh:
            fh.seek(end - start)
            head = fh.read(L.BLANK_MARKER.size)
    except FileNotFoundError:
        return False  # the end is a file boundary and no next file was made
    if len(head) < L.BLANK_MARKER.size:
        return False
    size, magic = L.BLANK_MARKER.unpack(head)
    return size > 0 and magic in (L.MESSAGE_MAGIC_CODE, L.MESSAGE_MAGIC_CODE_V2, L.BLANK_MAGIC_CODE)


__all__ = ["known_end", "record_known_end", "forget_known_end", "KNOWN_END_FILE"]
