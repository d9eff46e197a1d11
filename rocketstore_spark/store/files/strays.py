"""Entries of a store directory that are no part of the store, and the one rule for skipping them.

Copied broker stores carry droppings: an editor's backup (``00000000000000000000~``), an NFS silly-rename file
(``.nfs…``), a half-made temporary, ``.DS_Store``, a stray sub-directory. None of them can be a store file (their
names are not offsets or index times), so reading skips them and says so (:class:`StrayFileWarning`), rather
than refusing the store as a broker would (apache/rocketmq #3257, #9728). Files whose names *are* store names
but whose contents do not fit (wrong size inside the offset sequence) are not skipped: leaving them out would
change the answer, so they stay errors.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StrayFileWarning
from .byte_source import as_path


@dataclass(frozen=True)
class StrayFile:
    """One skipped entry and why it was skipped."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def stray_reason(entry: os.DirEntry, name_digits: int) -> Optional[str]:
    """Why ``entry`` cannot be a store file named by ``name_digits`` digits (None when it can)."""
    name = entry.name
    if name.startswith("."):
        return "hidden file (a temporary, an NFS or editor leftover)"
    if not entry.is_file():
        return "not a regular file"
    if len(name) != name_digits or not name.isdigit():
        return f"name is not a {name_digits}-digit store file name"
    return None


def note(strays: Optional[list], path, reason: str) -> None:
    """Record a skipped entry in ``strays`` (when the caller collects them)."""
    if strays is not None:
        strays.append(StrayFile(as_path(path), reason))


def warn_strays(strays: list) -> None:
    """One warning per skipped entry, naming it."""
    for stray in strays:
        warnings.warn(f"skipped stray entry {stray}", StrayFileWarning, stacklevel=3)


__all__ = ["StrayFile", "stray_reason", "note", "warn_strays"]
