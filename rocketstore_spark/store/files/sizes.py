"""The four file sizes a store was written with, detected from its files or taken from options."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import IndexSizesAmbiguousError, StoreConfigError
from ..format import layout as L
from .byte_source import as_path, scandir
from .index_file import detect_index_sizes, list_index_files
from .mapped_file_queue import MappedFileInfo, detect_file_size, list_offset_files, list_offset_files_in
from .strays import note

log = logging.getLogger("rocketstore_spark")


@dataclass(frozen=True)
class StoreSizes:
    """``mappedFileSizeCommitLog``, ``mappedFileSizeConsumeQueue`` (a multiple of 20), ``maxHashSlotNum``,
    ``maxIndexNum``."""

    commit_log_file_size: int = L.DEFAULT_COMMIT_LOG_FILE_SIZE
    consume_queue_file_size: int = L.DEFAULT_CONSUME_QUEUE_FILE_SIZE
    index_hash_slots: int = L.DEFAULT_INDEX_HASH_SLOTS
    index_max_entries: int = L.DEFAULT_INDEX_MAX_ENTRIES
    # why the index sizes could not be told from the files (empty when they could); reads that never touch the
    # index work regardless, key lookups and writers raise this message
    index_sizes_problem: str = ""

    def as_options(self) -> dict:
        """The four sizes as keyword arguments of ``RocketStore.open`` / ``StoreWriter.open``."""
        self.require_index_sizes()
        return {"commit_log_file_size": self.commit_log_file_size,
                "consume_queue_file_size": self.consume_queue_file_size,
                "index_hash_slots": self.index_hash_slots, "index_max_entries": self.index_max_entries}

    def require_index_sizes(self) -> None:
        """Raise when the index sizes are only a guess (see ``index_sizes_problem``)."""
        if self.index_sizes_problem:
            raise IndexSizesAmbiguousError(self.index_sizes_problem)

    def __post_init__(self):
        for name in ("commit_log_file_size", "consume_queue_file_size", "index_hash_slots", "index_max_entries"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise StoreConfigError(f"{name} must be a positive integer, found {value!r}")
        if self.commit_log_file_size >= 1 << 31:
            raise StoreConfigError(f"commit_log_file_size must be below 2 GiB (a Java int), found "
                                   f"{self.commit_log_file_size}")
        if self.consume_queue_file_size % L.CQ_STORE_UNIT_SIZE:
            raise StoreConfigError(f"consume_queue_file_size must be a multiple of 20, found "
                                   f"{self.consume_queue_file_size}")


def _positive(name: str, value) -> Optional[int]:
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError) as e:
        raise StoreConfigError(f"{name} must be a positive integer, found {value!r}") from e
    if number <= 0 or number != value and str(value).strip() != str(number):
        raise StoreConfigError(f"{name} must be a positive integer, found {value!r}")
    return number


class QueueDir(str):
    """A ``consumequeue/<topic>/<queueId>`` directory as text, with its two names (no Path per queue: pathlib
    costs more than the listing itself over 20,000 queues). ``Path(d)`` gives the path."""

    def __new__(cls, path: str, topic: str, name: str):
        self = super().__new__(cls, path)
        self.topic, self.name = topic, name
        return self


def cq_directories(root: Path, strays: Optional[list] = None) -> list[QueueDir]:
    """Every ``consumequeue/<topic>/<queueId>`` directory, sorted by topic then queue directory name. Other
    entries (files at those levels, hidden names, queue directories whose names are not numbers) are skipped
    and appended to ``strays`` when given."""
    base = as_path(root) / L.CONSUMEQUEUE_DIR
    if not base.is_dir():
        return []
    out = []
    # scandir's entry types come with the listing: no stat per directory (thousands of queues)
    for topic in sorted(scandir(base), key=lambda e: e.name):
        if topic.name.startswith(".") or not topic.is_dir():
            note(strays, topic.path, "not a topic directory (topics are directories with no leading dot)")
            continue
        for queue in sorted(scandir(topic.path), key=lambda e: e.name):
            if queue.is_dir() and queue.name.isdigit():
                out.append(QueueDir(queue.path, topic.name, queue.name))
            else:
                note(strays, queue.path, "not a queue directory (queues are directories named by a number)")
    return out


def cq_listing(root: Path, strays: Optional[list] = None) -> list[tuple[QueueDir, list[MappedFileInfo]]]:
    """Every consume-queue directory with its files: listed once when a store is opened, then shared by size
    detection and the queues themselves."""
    return [(directory, list_offset_files(directory, strays)) for directory in cq_directories(root, strays)]


def detect_cq_file_size(listing, configured: Optional[int]) -> Optional[int]:
    """The consume-queue file size of a :func:`cq_listing`, ``configured`` when given. The broker preallocates
    every file to the full size, so a queue's last file that is shorter (than its siblings or than other queues'
    files) or that ends in a partial unit is a cut copy: it is not taken for the size, and a warning names it and
    the option that says the size. Files before a queue's last must all have the one size."""
    unit = L.CQ_STORE_UNIT_SIZE
    lasts = [files[-1] for _, files in listing if files]
    size = configured
    if size is None:
        # every file but a cut last one has the size: the longest file of whole units (a broker writes no longer)
        whole = [f.length for _, files in listing for f in files if f.length > 0 and f.length % unit == 0]
        size = max(whole) if whole else None
    for directory, files in listing:
        body = files[:-1] if files and files[-1].length < (size or 0) else files
        size = detect_file_size(body, size, f"consume-queue ({directory})", "consume_queue_file_size")
    cut = [last for last in lasts if size is None or last.length < size]
    if cut and size is None:
        last = cut[0]
        raise StoreConfigError(f"consume-queue file {last.path} is cut ({last.length} bytes, a partial unit) and no "
                               "other consume-queue file shows the file size: pass consume_queue_file_size "
                               "(consumeQueueFileSize, --cq-size)")
    for last in cut:
        log.warning("consume-queue file %s is cut: %d bytes where the broker writes files of %d%s; its units end "
                    "there (messages dispatched past them are not in the queue); pass consume_queue_file_size "
                    "(consumeQueueFileSize, --cq-size) if the broker wrote files of another size", last.path,
                    last.length, size, " (a partial unit at its end)" if last.length % unit else "")
    return size


def detect_sizes(root: Path, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
                 index_max_entries=None, *, defaults_when_empty: bool = True, log_dir: Optional[Path] = None,
                 listing=None) -> StoreSizes:
    """Sizes from the files; options must agree with them; defaults where a store has no such files.
    ``log_dir``: where the records are when not in ``commitlog/`` (a DLedger log; a list: a commit log split
    across paths); ``listing``: the store's
    :func:`cq_listing` when the caller already has it."""
    commit_log_file_size = _positive("commit_log_file_size", commit_log_file_size)
    consume_queue_file_size = _positive("consume_queue_file_size", consume_queue_file_size)
    if consume_queue_file_size is not None:
        consume_queue_file_size = L.round_up_cq_file_size(consume_queue_file_size)
    index_hash_slots = _positive("index_hash_slots", index_hash_slots)
    index_max_entries = _positive("index_max_entries", index_max_entries)

    root = as_path(root)
    log_dirs = log_dir if isinstance(log_dir, (list, tuple)) else [log_dir or root / L.COMMITLOG_DIR]
    cl = detect_file_size(list_offset_files_in(log_dirs), commit_log_file_size, "commit-log", "commit_log_file_size",
                          cut_last=log_dir is None or isinstance(log_dir, (list, tuple))
                          or as_path(log_dir).name == L.COMMITLOG_DIR)
    cq = detect_cq_file_size(cq_listing(root) if listing is None else listing, consume_queue_file_size)
    index_dir = root / L.INDEX_DIR
    index_paths = list_index_files(index_dir)
    problem = ""
    try:
        slots, entries = detect_index_sizes(index_paths, index_hash_slots, index_max_entries)
    except IndexSizesAmbiguousError as e:  # fatal only for what uses the index
        problem, slots, entries = str(e), None, None
    if slots is None or entries is None:
        if not defaults_when_empty and (slots is None) != (entries is None):
            raise StoreConfigError("pass both index_hash_slots and index_max_entries, or neither")
        slots = slots if slots is not None else (entries // 4 if entries else L.DEFAULT_INDEX_HASH_SLOTS)
        entries = entries if entries is not None else slots * 4
    return StoreSizes(
        commit_log_file_size=cl if cl is not None else L.DEFAULT_COMMIT_LOG_FILE_SIZE,
        consume_queue_file_size=cq if cq is not None else L.DEFAULT_CONSUME_QUEUE_FILE_SIZE,
        index_hash_slots=slots,
        index_max_entries=entries,
        index_sizes_problem=problem,
    )
