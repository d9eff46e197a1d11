"""Whether a local store changed since the planning worker opened it, from file metadata alone.

A planner keeps the recovered store between plans (Spark reuses its Python worker) and must open it again when
its files changed. Listing every queue directory to find out costs ~0.3 s at 20,000 queues; the snapshot stats
what can change instead: the store's directories (an entry added or removed changes a directory's modification
time), every commit-log and index file, ``abort`` and ``checkpoint``, and each consume queue's last file (units
are only ever appended to it). Queue directories and last files come from the opened store, so the snapshot is
taken after the open; a modification time that is not older than the open by :data:`RACY_NS` marks the snapshot
untrusted (a change in the same clock tick as the open could leave the time as it was), and the next plan opens
the store again, as it does whenever a stat differs.
"""

from __future__ import annotations

import os
import stat

from ..store import RocketStore, dledger_logs, scandir
from ..store.format import layout as L

RACY_NS = 5_000_000_000  # times this close to the open are not trusted (filesystem clock ticks, clock skew)


class StoreSnapshot:
    """Modification times (and commit-log file sizes) of what an opened local store depends on."""

    def __init__(self, entries: tuple, trusted: bool):
        self.entries = entries  # (path, mtime_ns, size or -1)
        self.trusted = trusted

    @classmethod
    def of(cls, store: RocketStore, path: str, opened_at_ns: int) -> "StoreSnapshot":
        """The snapshot of ``store`` (opened from ``path`` at ``opened_at_ns``, ``time.time_ns()``)."""
        root = os.fspath(path)
        paths = [root, os.path.join(root, L.ABORT_FILE), os.path.join(root, L.CHECKPOINT_FILE)]
        split = [os.fspath(d) for d in store.settings.commit_log_paths]  # a commit log elsewhere (storePathCommitLog)
        for directory in [os.path.join(root, L.COMMITLOG_DIR), os.path.join(root, L.INDEX_DIR)] + split + \
                [os.fspath(d) for d in dledger_logs(root)]:
            paths.append(directory)
            if os.path.isdir(directory):
                paths.extend(e.path for e in scandir(directory))
        queues_dir = os.path.join(root, L.CONSUMEQUEUE_DIR)
        tails = store.queue_file_tails()
        if tails is None:  # not queue files (a RocksDB database): every entry of the directory
            paths.extend(_tree(queues_dir))
        else:
            paths.append(queues_dir)
            paths.extend(sorted({os.path.dirname(d) for d, _ in tails}))
            paths.extend(d for d, _ in tails)
            paths.extend(last for _, last in tails if last is not None)
        entries = tuple((p,) + _stamp(p) for p in paths)
        trusted = all(mtime < opened_at_ns - RACY_NS for _, mtime, _ in entries)
        return cls(entries, trusted)

    def unchanged(self) -> bool:
        """Whether every file and directory is as the snapshot saw it (never, for an untrusted snapshot)."""
        return self.trusted and all(_stamp(p) == (mtime, size) for p, mtime, size in self.entries)


def _stamp(path: str) -> tuple[int, int]:
    """(mtime_ns, size; the size of files only) of ``path``; (-1, -1) when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return -1, -1
    return st.st_mtime_ns, (-1 if stat.S_ISDIR(st.st_mode) else st.st_size)


def _tree(directory: str) -> list[str]:
    """``directory`` and everything under it."""
    out = [directory]
    if os.path.isdir(directory):
        for dirpath, dirnames, filenames in os.walk(directory):
            out.extend(os.path.join(dirpath, n) for n in dirnames + filenames)
    return out


__all__ = ["StoreSnapshot", "RACY_NS"]
