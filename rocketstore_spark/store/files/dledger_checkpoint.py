"""DLedger's own state file ``dledger-<selfId>/checkpoint`` and what its ``committedIndex`` means for reads.

``DLedgerMmapFileStore.persistCheckPoint`` writes Java properties text (``IOUtils.properties2String``)::

    committedIndex=4467        COMMITTED_INDEX_KEY: the last entry index the raft group has committed
    endIndex=4467              END_INDEX_KEY: the ledger's last entry index when it was written

On recovery (``DLedgerMmapFileStore.recover``) the store finds its entries from the data files alone, then loads
``committedIndex`` (a missing file or key leaves it at -1; a value that is not a number fails the load) and
``updateCommittedIndex`` clamps it to the last entry; ``committedPos`` is that entry's pos + size.
``DLedgerCommitLog.getMaxOffset`` is ``committedPos`` and ``getData`` returns nothing at or past it: until the
group commits more, the broker serves records before ``committedPos`` only. Entries past it are kept (neither
recovery truncates them). A one-node group's leader commits up to its last entry as soon as it is elected
(``QuorumAckChecker``), so such a broker serves every entry (observed with the real 5.3.3 store: a checkpoint
edited to an earlier ``committedIndex`` reports that entry's end as max offset after ``load()`` and every record
once it leads); a group of several peers serves what a quorum acknowledged, which the checkpoint records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .byte_source import as_path

CHECK_POINT_FILE = "checkpoint"  # DLedgerMmapFileStore.CHECK_POINT_FILE
COMMITTED_INDEX_KEY = "committedIndex"  # DLedgerMmapFileStore.COMMITTED_INDEX_KEY
END_INDEX_KEY = "endIndex"  # DLedgerMmapFileStore.END_INDEX_KEY
PEER_SEPARATOR = ";"  # DLedgerConfig.peers: "n0-host:port;n1-host:port"


@dataclass(frozen=True)
class DLedgerCheckpoint:
    """The two values of the file (-1 for a key it lacks, as the store leaves ``committedIndex`` then)."""

    path: Path
    committed_index: int = -1
    end_index: int = -1


def _properties(text: str) -> dict:
    """``java.util.Properties.load`` for what ``properties2String`` writes: ``key=value`` (or ``key:value``)
    lines; ``#`` / ``!`` comments and blank lines skipped; (line, its byte offset) kept for errors."""
    out, offset = {}, 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped and stripped[0] not in "#!":
            cut = min((i for i in (stripped.find("="), stripped.find(":")) if i >= 0), default=len(stripped))
            out[stripped[:cut].strip()] = (stripped[cut + 1:].strip(), offset)
        offset += len(line.encode("utf-8"))
    return out


def read_dledger_checkpoint(dledger_dir: Path) -> Optional[DLedgerCheckpoint]:
    """The checkpoint of the DLedger directory ``dledger-<selfId>`` (None when it has none)."""
    path = as_path(dledger_dir) / CHECK_POINT_FILE
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    values = {}
    for key, (value, offset) in _properties(text).items():
        if key in (COMMITTED_INDEX_KEY, END_INDEX_KEY):
            try:
                values[key] = int(value)
            except ValueError as e:
                raise StoreFormatError(f"DLedger checkpoint: expected {key}=<entry index> as a number (Long.valueOf), "
                                       f"found {value!r}", path, offset) from e
    return DLedgerCheckpoint(path, values.get(COMMITTED_INDEX_KEY, -1), values.get(END_INDEX_KEY, -1))


def peer_count(peers: Optional[str]) -> int:
    """How many peers ``dLegerPeers`` names (0 when not given)."""
    return len([p for p in (peers or "").split(PEER_SEPARATOR) if p.strip()])


__all__ = ["DLedgerCheckpoint", "read_dledger_checkpoint", "peer_count", "CHECK_POINT_FILE"]
