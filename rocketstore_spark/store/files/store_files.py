"""Creating the store's fixed-size files so that a crash never leaves one half-made.

Every file of a MappedFileQueue (commit log, consume queue) and every index file has one size, and a directory
holding a shorter file is unreadable — for rocketstore's readers and for the broker, whose ``MappedFileQueue``
refuses to load it. Files are therefore built under a hidden temporary name (full size, header written) and
renamed into place in one step. Readers skip hidden names, and recovery removes leftovers
(:func:`remove_temporaries`) before anything else, as a broker would choke on them.
"""

from __future__ import annotations

import os
from pathlib import Path

from .disk_full import disk_full

TEMPORARY_PREFIX = "."
TEMPORARY_SUFFIX = ".tmp"


def temporary_name(path: Path) -> Path:
    return path.with_name(f"{TEMPORARY_PREFIX}{path.name}{TEMPORARY_SUFFIX}")


def create_full_size(path: Path, size: int, header: bytes = b"", writes=(), sync: bool = False) -> None:
    """Create ``path`` with its final ``size`` (sparse), ``header`` at its start and each ``(offset, bytes)`` of
    ``writes`` in place, all at once (forced to disk first with ``sync``)."""
    tmp = temporary_name(Path(path))
    with disk_full(path, _kind(Path(path))), removed_on_error(tmp):
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            if header:
                os.pwrite(fd, header, 0)
            for offset, data in writes:
                os.pwrite(fd, data, offset)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)


def _kind(path: Path) -> str:
    """What a fixed-size file is, for error messages."""
    parts = path.parts
    for directory, kind in (("consumequeue", "a new consume-queue file"), ("commitlog", "a new commit-log file"),
                            ("index", "a new index file")):
        if directory in parts:
            return kind
    return "a new store file"


class removed_on_error:
    """Remove the temporary file ``path`` when the block fails (a full disk must not leave half-made files)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if kind is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        return False


def write_text_atomically(path: Path, text: str, sync: bool = True) -> None:
    """Replace ``path`` with ``text`` in one step: a temporary file renamed over it (the journal, the sink's
    batch record, the broker's topic table). With ``sync`` the file is forced to disk before the rename and the
    directory after it (durable across an OS crash); without, both are left to the kernel's write-back (a killed
    process still sees the old or the new text, never a mix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TEMPORARY_SUFFIX)
    with disk_full(path, "a journal, sink or topic-table file"), removed_on_error(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    if sync:
        fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """Force a file (its bytes) or a directory (its entries: renames into it) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_temporary(path) -> bool:
    name = os.path.basename(path)  # a path or a file name (no path object made: called per file of a store)
    return name.startswith(TEMPORARY_PREFIX) and name.endswith(TEMPORARY_SUFFIX)


def remove_temporaries(directory: Path) -> list[Path]:
    """Delete the half-made files a crash left in ``directory``; returns them."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if is_temporary(entry.name) and entry.is_file():
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


__all__ = ["create_full_size", "write_text_atomically", "fsync_path", "remove_temporaries", "is_temporary",
           "temporary_name"]
