"""``VariantPart``: what one storage variant changes in how a store is read, and ``LogSpec``, how its commit log
is built.

A store's behaviour is a list of parts (:mod:`.behaviour` chooses them from the detected
:class:`~...files.variant.StoreVariant`): the plain store first (``commitlog/`` and file consume queues), then
one part per feature the store has. Each part says only what its feature changes; the neutral answers below are
what a part that changes nothing answers. How the answers of several parts combine is
:class:`~.behaviour.VariantBehaviour`'s: the commit log's spec is passed through every part in order, queues are
opened by every part in order, a new queue comes from the last part that makes one, and the yes/no answers hold
only when every part agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

from ...files.commitlog import CommitLog
from ...files.mapped_file_queue import MappedFileQueue
from ...files.queue_protocol import ConsumeQueueProtocol
from ...files.variant import BrokerSettings


@dataclass(frozen=True)
class LogSpec:
    """How the commit log of a store is opened: its directories (one, or the paths of a commit log split across
    disks, ``storePathCommitLog``), whether its last file may be cut short (a copy's may; a DLedger log's files
    are whole), whether each record must carry the ``__CRC32#`` property, and the class reading it
    (``open(files, spec, settings)``)."""

    directories: tuple[Path, ...]
    cut_last: bool
    prop_crc_required: bool
    open: Callable[[MappedFileQueue, "LogSpec", BrokerSettings], CommitLog]

    @property
    def directory(self) -> Path:
        """The first directory (the only one unless the commit log is split)."""
        return self.directories[0]

    @property
    def size_detection_dir(self):
        """What file-size detection lists: the directory, or every directory of a split commit log."""
        return list(self.directories) if len(self.directories) > 1 else self.directories[0]


class VariantPart(Protocol):
    """What one variant changes; the bodies here are the answers of a part that changes nothing."""

    #: ``consumequeue/`` holds ``<topic>/<queueId>/`` directories of queue files (listed when the store opens,
    #: and a topic names a directory)
    consume_queue_files: bool = True
    #: the store's queue units may be read in planned runs (:class:`~..planned_units.PlannedUnits`: 20-byte
    #: units of ``consumequeue/`` files, rows as decoded)
    planned_runs: bool = True

    def log_spec(self, spec: Optional[LogSpec]) -> LogSpec:
        """The commit log's spec after this part (``spec``: after the parts before it)."""
        return spec

    def open_queues(self, store, queues) -> None:
        """Add to ``queues`` (a :class:`~..queue_set.QueueSet`) the queues this variant keeps outside the listed
        ``consumequeue/`` directories."""

    def dispatched(self, queues) -> Optional[int]:
        """The commit-log offset the queues were dispatched to, when the variant records one (None: it does not)."""
        return None

    def redispatch_from(self, start: Optional[int], abnormal: bool, dispatched: Optional[int]) -> Optional[int]:
        """Where opening starts re-dispatching recovered records (None: it does not), given ``start``, the
        answer of the parts before."""
        return start

    def new_queue(self, store, queues, topic: str, queue_id: int, batch: bool) -> Optional[ConsumeQueueProtocol]:
        """The queue re-dispatch creates for (topic, queue_id) (``batch``: a BatchCQ topic); None: this part
        leaves it to the parts before."""
        return None

    def redispatch_more(self, row: dict, tags_code: int, store_time: int, queue_for) -> None:
        """Units re-dispatch adds for a recovered record besides its own queue's; ``queue_for(topic, queue_id,
        row)`` gives (loading or creating) a queue."""

    def is_lmq(self, topic: str) -> bool:
        """Whether ``topic`` is a light message queue whose rows are overlaid (:mod:`.lmq`)."""
        return False


__all__ = ["LogSpec", "VariantPart"]
