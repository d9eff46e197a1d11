"""The ``checkpoint`` file (``StoreCheckpoint``): five big-endian longs in one 4096-byte page."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from ..format import layout as L
from .byte_source import as_path
from .disk_full import disk_full
from .store_files import removed_on_error


@dataclass(frozen=True)
class Checkpoint:
    """Timestamps (ms) of the last flushed commit-log, consume-queue and index data, plus two offsets."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        """``StoreCheckpoint.getMinTimestamp``: min(physic, logics) − 3 s, floored at 0."""
        return max(min(self.physic_msg_timestamp, self.logics_msg_timestamp) - L.CHECKPOINT_RECOVER_SAFETY_MS, 0)

    @property
    def min_timestamp_index(self) -> int:
        """``StoreCheckpoint.getMinTimestampIndex``: min(min_timestamp, index timestamp)."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def to_bytes(self) -> bytes:
        """The whole 4096-byte file."""
        head = L.CHECKPOINT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
                                 self.master_flushed_offset, self.confirm_phy_offset)
        return head + bytes(L.CHECKPOINT_FILE_SIZE - len(head))


def read_checkpoint(path: Path) -> Optional[Checkpoint]:
    """The checkpoint at ``path`` (None when the file is absent)."""
    path = as_path(path)
    if not path.exists():
        return None
    data = path.read_bytes()
    if len(data) < L.CHECKPOINT.size:
        raise StoreFormatError(
            f"checkpoint file is {len(data)} bytes; expected {L.CHECKPOINT_FILE_SIZE} (five longs at 0..39)", path, 0)
    return Checkpoint(*L.CHECKPOINT.unpack_from(data, 0))


def write_checkpoint(path: Path, checkpoint: Checkpoint, sync: bool = True) -> None:
    """Replace the checkpoint atomically (write a temp file, fsync unless ``sync`` is false, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with disk_full(path, "the checkpoint"), removed_on_error(tmp):
        with open(tmp, "wb") as fh:
            fh.write(checkpoint.to_bytes())
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
