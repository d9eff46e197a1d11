"""Whether a store changed since a worker opened it: the stamps the cache of opened stores (:mod:`.store_cache`)
keeps with each store, each answering ``unchanged()``.

* :class:`StoreSnapshot`: a local store's files, from their metadata alone (planners and streams, who see every
  queue and end of the store);
* :class:`ListingFingerprint`: a remote store's listings (planners);
* :class:`OldestFile`: only that the oldest commit-log file is still there (executors, whose reads are pinned to
  their plan's valid end and planned queue ends: a store grown since does not change what they read, a file
  expired under them does);
* :class:`Untracked`: never unchanged (a remote store a stream reads: listing it costs as much as opening it).

:func:`files_stamp` picks the first two by where the store is.

A planner keeps the recovered store between plans (Spark reuses its Python worker) and must open it again when
its files changed. Listing every queue directory to find out costs ~0.3 s at 20,000 queues; the snapshot stats
what can change instead: the store's directories (an entry added or removed changes a directory's modification
time), every commit-log and index file, ``abort`` and ``checkpoint``, and each consume queue's last file (units
are only ever appended to it). A queue's own directory is stated only where the next unit would start a new file
(the queue is empty or its last file full): elsewhere a unit added changes the last file, and files that expire
from a queue hold only units of commit-log files already gone, which the commit log's directory shows. Queue
directories and last files come from the opened store, so the snapshot is taken after the open; a modification
time that is not older than the open by :data:`RACY_NS` marks the snapshot untrusted (a change in the same clock
tick as the open could leave the time as it was), and the next plan opens the store again, as it does whenever a
stat differs.
"""

from __future__ import annotations

import os
import stat

from ..store import RocketStore, as_path, dledger_logs, is_remote, scandir
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
            paths.extend(sorted({os.path.dirname(d) for d, _, _ in tails}))
            # a queue's directory only for a queue whose next unit starts a file (empty, or its last file full)
            paths.extend(d for d, last, full in tails if last is None or full)
            paths.extend(last for _, last, _ in tails if last is not None)
        entries = tuple((p,) + _stamp(p) for p in paths)
        trusted = all(mtime < opened_at_ns - RACY_NS for _, mtime, _ in entries)
        return cls(entries, trusted)

    def unchanged(self) -> bool:
        """Whether every file and directory is as the snapshot saw it (never, for an untrusted snapshot)."""
        return self.trusted and all(_stamp(p) == (mtime, size) for p, mtime, size in self.entries)


def fingerprint(path: str) -> tuple:
    """Names, sizes and modification times of every file recovery looks at (a change means recover again), from
    a remote store's listings."""
    root = as_path(path)
    seen = []
    for sub in [L.COMMITLOG_DIR, L.INDEX_DIR] + [str(p.relative_to(root)) for p in dledger_logs(root)]:
        seen.extend((sub, e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in scandir(root / sub))
    base = root / L.CONSUMEQUEUE_DIR
    for topic in scandir(base):
        for queue in (scandir(topic.path) if topic.is_dir() else []):
            if queue.is_dir():
                seen.extend((topic.name, queue.name, e.name, e.stat().st_mtime_ns) for e in scandir(queue.path))
    for name in (L.ABORT_FILE, L.CHECKPOINT_FILE):
        if (root / name).exists():
            seen.append((name, (root / name).stat().st_mtime_ns))
    return tuple(sorted(seen, key=repr))


class ListingFingerprint:
    """A remote store's :func:`fingerprint` as it was listed at the open (an unchanged store costs one listing
    per question, three list requests; only a listing that shows a change opens the store again)."""

    def __init__(self, path: str, seen: tuple):
        self.path, self.seen = path, seen

    def unchanged(self) -> bool:
        return fingerprint(self.path) == self.seen


class OldestFile:
    """Whether the oldest commit-log file of an opened store is still there (expired under it: its listing of
    the commit log is stale)."""

    def __init__(self, store: RocketStore):
        files = store.commitlog.queue.files
        self.oldest = files[0].path if files else None

    def unchanged(self) -> bool:
        return self.oldest is None or self.oldest.exists()


class Untracked:
    """A store whose changes are not followed: never unchanged (it is opened again for every use)."""

    def unchanged(self) -> bool:
        return False


def files_stamp(store: RocketStore, path: str, opened_at_ns: int, *, list_remote: bool = True):
    """How a user who sees every queue and end of the store (a planner, a stream) tells it changed: a local
    store's :class:`StoreSnapshot`, a remote store's :class:`ListingFingerprint` (or, with ``list_remote``
    False, :class:`Untracked`: the listing would cost as much as the open)."""
    if not is_remote(path):
        return StoreSnapshot.of(store, path, opened_at_ns)
    return ListingFingerprint(path, fingerprint(path)) if list_remote else Untracked()


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


__all__ = ["StoreSnapshot", "ListingFingerprint", "OldestFile", "Untracked", "files_stamp", "fingerprint",
           "RACY_NS"]
