"""``OpenedStore``: the files of one store opened for reading, and how the real store would recover them.

It holds what every read needs and no queue: the root, the file sizes, the broker settings the files leave open,
the storage variant and its read behaviour (:mod:`.variants.behaviour`), the commit log (a DLedger log for a
DLedger store), the checkpoint and the abort file, the stray entries its listings skipped, and the recovery
result (computed once, the first time a read needs it, over the queue set attached to it: see
:mod:`.redispatch`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ..files.byte_source import as_path
from ..files.checkpoint import Checkpoint, read_checkpoint
from ..files.sizes import StoreSizes
from ..files.strays import StrayFile
from ..files.variant import BrokerSettings, StoreVariant
from ..format import layout as L
from .recovery import RecoveryResult
from .variants.behaviour import VariantBehaviour


class OpenedStore:
    """The store-wide state of a reader (no queue: those are the :class:`~.queue_set.QueueSet`'s)."""

    def __init__(self, root: Path, sizes: StoreSizes, settings: BrokerSettings, variant: StoreVariant,
                 behaviour: VariantBehaviour, check_crc_on_recover: bool, valid_end: Optional[int],
                 strays: list[StrayFile]):
        self.root = as_path(root)
        self.sizes = sizes
        self.settings = settings
        self.variant = variant  # the features the files show (or the caller named): what reports say
        self.behaviour = behaviour  # how the variant reads, chosen once (variants.behaviour)
        self.check_crc_on_recover = check_crc_on_recover
        # entries that are no part of the store, skipped (a warning each; inspect and verify list them)
        self.stray_files: list[StrayFile] = strays
        self.given_valid_end = valid_end  # recovery is skipped: the caller knows the commit log's valid end
        self.commitlog = behaviour.open_commit_log(sizes, settings, self.stray_files)
        self.abort_present = (self.root / L.ABORT_FILE).exists()
        self.checkpoint: Optional[Checkpoint] = read_checkpoint(self.root / L.CHECKPOINT_FILE)
        self._recover: Optional[Callable[[], RecoveryResult]] = None
        self._recovery: Optional[RecoveryResult] = None

    def recover_with(self, recover: Callable[[], RecoveryResult]) -> None:
        """How :attr:`recovery` is computed when first needed (it walks the queues the reader opened)."""
        self._recover = recover

    @property
    def recovery(self) -> RecoveryResult:
        """How the real store would recover this directory (computed once)."""
        if self._recovery is None:
            self._recovery = self._recover()
        return self._recovery

    def min_phy_offset(self) -> int:
        """Start of the oldest commit-log file."""
        return self.commitlog.queue.min_offset

    def close(self) -> None:
        self.commitlog.queue.close()
