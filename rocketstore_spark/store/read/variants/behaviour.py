"""``VariantBehaviour``: a store's read behaviour, the parts of its storage variant composed; chosen once when the
store is opened (:func:`choose_behaviour`, the one place that looks at the variant's features).

Features combine (a DLedger broker can serve LMQ, a RocksDB store can hold LMQs): the parts are the plain store
(:mod:`.plain`) and one per feature, in :data:`~...files.variant.FEATURES` order (:mod:`.dledger`,
:mod:`.rocksdb_cq`, :mod:`.batch_cq`, :mod:`.lmq`, :mod:`.prop_crc`), and each question is answered by a fixed
rule over them:

=========================  =================================================================================
question                   rule
=========================  =================================================================================
the commit log's spec      passed through every part in order (the plain log, DLedger's entries, prop-CRC)
``consume_queue_files``,   every part agrees
``planned_runs``
queues to open             every part opens its own, in order (RocksDB's before the batch queues)
the dispatch checkpoint    the first part that records one
where re-dispatch starts   passed through every part in order
a queue re-dispatch makes  the last part that makes one (RocksDB's over the plain file queues)
units re-dispatch adds     every part adds its own (LMQ's)
is a topic an LMQ          any part says so
=========================  =================================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...files.commitlog import CommitLog
from ...files.mapped_file_queue import MappedFileQueue, list_offset_files_in
from ...files.queue_protocol import ConsumeQueueProtocol
from ...files.sizes import StoreSizes
from ...files.variant import BATCH_CQ, DLEDGER, LMQ, PROP_CRC, ROCKSDB_CQ, BrokerSettings, StoreVariant
from .batch_cq import BatchQueues
from .dledger import DLedgerEntries
from .lmq import LightMessageQueues
from .part import LogSpec, VariantPart
from .plain import PlainStore
from .prop_crc import PropCrcRecords
from .rocksdb_cq import RocksDBQueues


def choose_behaviour(root: Path, variant: StoreVariant, commit_log_paths: tuple = ()) -> "VariantBehaviour":
    """The behaviour of the store at ``root`` of ``variant``: the plain store (its commit log in
    ``commit_log_paths`` when given) and a part per feature."""
    parts: list[VariantPart] = [PlainStore(root, commit_log_paths)]
    if variant.has(DLEDGER):
        parts.append(DLedgerEntries(variant.dledger_data))
    if variant.has(ROCKSDB_CQ):
        # a DLedger log says itself where re-dispatch starts, also after a normal exit
        parts.append(RocksDBQueues(past_checkpoint_after_normal_exit=not variant.has(DLEDGER)))
    if variant.has(BATCH_CQ):
        parts.append(BatchQueues())
    if variant.has(LMQ):
        parts.append(LightMessageQueues())
    if variant.has(PROP_CRC):
        parts.append(PropCrcRecords())
    return VariantBehaviour(parts)


class VariantBehaviour:
    """The parts of a store's variant (the plain store first), composed by the rules of the module."""

    def __init__(self, parts: list[VariantPart]):
        self.parts = tuple(parts)
        self.consume_queue_files = all(p.consume_queue_files for p in self.parts)
        self.planned_runs = all(p.planned_runs for p in self.parts)
        spec: Optional[LogSpec] = None
        for part in self.parts:
            spec = part.log_spec(spec)
        self.log_spec: LogSpec = spec

    def open_commit_log(self, sizes: StoreSizes, settings: BrokerSettings, strays: list) -> CommitLog:
        """The store's commit log (a DLedger store's is read through its entry headers, a prop-CRC store's checks
        each record's ``__CRC32#`` property wherever it checks CRCs)."""
        spec = self.log_spec
        # a split commit log: the files of every path, in offset order, as one queue (MultiPathMappedFileQueue)
        split = list_offset_files_in(list(spec.directories), strays) if len(spec.directories) > 1 else None
        files = MappedFileQueue(spec.directory, sizes.commit_log_file_size, files=split, strays=strays,
                                cut_last=spec.cut_last, gaps=True)
        return spec.open(files, spec, settings)

    def open_queues(self, store, queues) -> None:
        for part in self.parts:
            part.open_queues(store, queues)

    def dispatched(self, queues) -> Optional[int]:
        for part in self.parts:
            found = part.dispatched(queues)
            if found is not None:
                return found
        return None

    def redispatch_from(self, start: Optional[int], abnormal: bool, dispatched: Optional[int]) -> Optional[int]:
        for part in self.parts:
            start = part.redispatch_from(start, abnormal, dispatched)
        return start

    def new_queue(self, store, queues, topic: str, queue_id: int, batch: bool) -> ConsumeQueueProtocol:
        for part in reversed(self.parts):  # the plain store, first, makes one when no later part does
            cq = part.new_queue(store, queues, topic, queue_id, batch)
            if cq is not None:
                break
        return cq

    def redispatch_more(self, row: dict, tags_code: int, store_time: int, queue_for) -> None:
        for part in self.parts:
            part.redispatch_more(row, tags_code, store_time, queue_for)

    def is_lmq(self, topic: str) -> bool:
        return any(part.is_lmq(topic) for part in self.parts)


__all__ = ["VariantBehaviour", "choose_behaviour"]
