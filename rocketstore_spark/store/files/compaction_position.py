"""How far the broker's compaction went per queue: ``compaction/position-checkpoint`` (``S/kv/CompactionPositionMgr``).

A ``ConfigManager`` JSON file the broker rewrites after each compaction (``compactAndReplace``), its previous
version kept as ``position-checkpoint.bak``::

    {"empty": false, "queueOffsetMap": {"<topic>_<queueId>": <queue offset>, ...}}

The offset is the highest queue offset the last compaction of that queue took into account (``OffsetMap``'s
``lastOffset``): the compaction log holds at most one message per key at or below it, and every message it
received above it. A queue never compacted has no entry (``getOffset`` answers -1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .byte_source import as_path
from .compaction_log import COMPACTION_DIR
from .config_file import BACKUP_SUFFIX, config_object

CHECKPOINT_FILE = "position-checkpoint"  # CompactionPositionMgr.CHECKPOINT_FILE


def _read(path: Path) -> Optional[dict]:
    payload = config_object(path, "the compaction positions", "queueOffsetMap",
                            f"the broker would read {path.name}{BACKUP_SUFFIX} instead: remove the damaged file")
    return None if payload is None else payload.get("queueOffsetMap", {})


def compaction_positions(root) -> dict[tuple[str, int], int]:
    """(topic, queueId) → the queue offset the broker compacted through; empty when it never compacted."""
    path = as_path(root) / COMPACTION_DIR / CHECKPOINT_FILE
    table = _read(path)
    if table is None:  # ConfigManager.load falls back to the backup
        path = path.with_name(CHECKPOINT_FILE + BACKUP_SUFFIX)
        table = _read(path) or {}
    out = {}
    for name, offset in table.items():
        topic, _, queue = str(name).rpartition("_")
        if not topic or not queue.isdigit() or not isinstance(offset, int):
            raise StoreFormatError(f"expected entries '<topic>_<queueId>': <queue offset>, found {name!r}: "
                                   f"{offset!r}", path)
        out[(topic, int(queue))] = offset
    return out


__all__ = ["CHECKPOINT_FILE", "compaction_positions"]
