"""``VariantReads``: what the storage variant of a store adds to its reads and to re-dispatch, over the reader's
queues (see :mod:`..files.variant` for the variants).

How each variant reads is in its own module of :mod:`.variants`, composed once when the store is opened
(:class:`~.variants.behaviour.VariantBehaviour`, held by the :class:`~.opened_store.OpenedStore`):

* prop-crc (:mod:`.variants.prop_crc`) and DLedger (:mod:`.variants.dledger`): which commit log is built;
* RocksDB consume queues (:mod:`.variants.rocksdb_cq`) and batch consume queues (:mod:`.variants.batch_cq`):
  which queues are opened and created, inner batches unwrapped;
* LMQ (:mod:`.variants.lmq`): LMQ rows overlaid, LMQ units re-dispatched.

The store reader holds one :class:`VariantReads`, given the opened store and its queues.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...errors import StoreConfigError
from ..files.topic_config import batch_cq_topics
from ..format.codec import RecordBatchFields
from ..format.inner_batch import is_inner_batch
from .opened_store import OpenedStore
from .queue_set import QueueSet
from .records import CommitLogReads
from .variants.batch_cq import unwrap_inner
from .variants.lmq import lmq_overlay_fields, lmq_overlay_table


class VariantReads:
    """What the variant of ``store`` adds to the reads of its ``queues``; ``records`` read LMQ rows' records."""

    def __init__(self, store: OpenedStore, queues: QueueSet, records: CommitLogReads):
        self.store = store
        self.queues = queues
        self.records = records
        self.behaviour = store.behaviour

    def dispatched(self):
        """A RocksDB consume-queue store's dispatch checkpoint (``getMaxPhyOffsetInConsumeQueue``: its
        ``CHECKPOINT_TOPIC`` offset, 0 without one); None for file consume queues."""
        return self.behaviour.dispatched(self.queues)

    def redispatch_from(self, abnormal: bool):
        """Where opening starts dispatching recovered records (None: it does not): the commit log's answer;
        for a RocksDB store also after a normal exit, the records past its dispatch checkpoint
        (``recoverNormally``: ``doDispatch`` when the offset is past ``maxPhyOffsetOfConsumeQueue``)."""
        start = self.store.commitlog.redispatch_from(abnormal)
        return self.behaviour.redispatch_from(start, abnormal, self.dispatched())

    def dledger_committed(self):
        """(committedIndex, committedPos) of a DLedger store as its recovery derives them from
        ``dledger-<selfId>/checkpoint`` (None for other stores, or when the checkpoint gives none)."""
        _ = self.store.recovery
        return self.store.commitlog.committed

    def open_variant_queues(self) -> None:
        """Add the queues a variant keeps outside the listed ``consumequeue/`` directories (a RocksDB
        database's, a batch-cq store's ``batchconsumequeue/``)."""
        self.behaviour.open_queues(self.store, self.queues)

    def batch_topics(self) -> frozenset:
        """Topics whose queues are batch consume queues (``queue.type=BatchCQ``): those with a
        ``batchconsumequeue/`` directory, those ``config/topics.json`` marks, and those the caller names."""
        on_disk = {topic for (topic, _), cq in self.queues.loaded_items() if cq.is_batch}
        return frozenset(on_disk) | batch_cq_topics(self.store.root) | self.store.settings.batch_topics

    def dispatch_queue(self, topic: str, queue_id: int, row: dict):
        """The queue re-dispatch creates for a record of a queue the store has none of yet
        (``ConsumeQueueStore.findOrCreateConsumeQueue``: a batch consume queue for a BatchCQ topic). An inner
        batch of a topic nothing marks as BatchCQ is an error: only the broker's topic table can tell."""
        batch = self.batch_topics()
        if topic not in batch and is_inner_batch(np.array([row["sysFlag"]]))[0]:
            raise StoreConfigError(
                f"re-dispatch after the crash would create queue {topic}/{queue_id} for the inner batch at commit-log "
                f"offset {row['commitLogOffset']}, and nothing says whether {topic!r} is a BatchCQ topic (expected "
                f"it in the batch topics {sorted(batch)}: no batchconsumequeue/ directory and no config/topics.json "
                "entry with queue.type=BatchCQ, found neither); name it with batchTopics (--batch-topics), and the "
                "batch consume-queue file size with batchConsumeQueueFileSize (--bcq-size)")
        return self.behaviour.new_queue(self.store, self.queues, topic, queue_id, topic in batch)

    def is_batch_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) is a batch consume queue (queue offsets count inner messages)."""
        cq = self.queues.loaded(topic, int(queue_id))
        return cq is not None and cq.is_batch

    def unwrap_inner(self, buf: np.ndarray, fields: RecordBatchFields, cqs: list, group_of_row: np.ndarray,
                     unit_offsets: np.ndarray, path) -> RecordBatchFields:
        """See :func:`.variants.batch_cq.unwrap_inner`."""
        return unwrap_inner(buf, fields, cqs, group_of_row, unit_offsets, path)

    def redispatch_variant(self, row: dict, tags_code: int, store_time: int = 0) -> None:
        """What re-dispatch on opening adds for a recovered record besides its own queue's unit (the units of
        the LMQs it names, :meth:`.variants.lmq.LightMessageQueues.redispatch_more`)."""
        self.behaviour.redispatch_more(row, tags_code, store_time, self._queue_for)

    def _queue_for(self, topic: str, queue_id: int, row: dict):
        """The loaded queue (topic, queue_id), or the one re-dispatch creates for ``row``, added to the queues."""
        cq = self.queues.loaded(topic, queue_id)
        if cq is None:
            cq = self.dispatch_queue(topic, queue_id, row)
            self.queues.add(cq)
        return cq

    def is_lmq(self, topic: str) -> bool:
        """Whether ``topic`` is a light message queue of this store (rows overlaid: :mod:`.variants.lmq`)."""
        return self.behaviour.is_lmq(topic)

    def lmq_topics(self) -> list[str]:
        """The ``%LMQ%`` topics with a consume queue (a subset of :meth:`topics`)."""
        return [t for t in self.queues.topics() if self.is_lmq(t)]

    def lmq_overlay_fields(self, batch: pa.RecordBatch, buf: np.ndarray, fields: RecordBatchFields, cqs: list,
                           group_of_row: np.ndarray, unit_offsets: np.ndarray) -> pa.RecordBatch:
        """See :func:`.variants.lmq.lmq_overlay_fields`."""
        return lmq_overlay_fields(self.is_lmq, batch, buf, fields, cqs, group_of_row, unit_offsets)

    def lmq_overlay_table(self, table: pa.Table, cq, phy_offsets: list, unit_offsets: list) -> pa.Table:
        """See :func:`.variants.lmq.lmq_overlay_table`."""
        return lmq_overlay_table(self.records, table, cq, phy_offsets, unit_offsets)
