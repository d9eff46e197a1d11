"""A RocksDB consume-queue store (``rocksdb-cq``, 5.2+): ``consumequeue/`` is a RocksDB database
(:mod:`...files.rocksdb_consume_queue`, opened read-only), not queue directories. Its queues are those of the
``offset`` column family's ``max`` keys, units come from the ``default`` one; every queue re-dispatch creates
is one of its queues, and its dispatch checkpoint (the ``CHECKPOINT_TOPIC`` offset) says how far the queues
were dispatched."""

from __future__ import annotations

from typing import Optional

from ...files.rocksdb_consume_queue import RocksDBConsumeQueue, RocksDBConsumeQueueStore
from ...format import layout as L
from .part import VariantPart


class RocksDBQueues(VariantPart):
    """The queues of the store's RocksDB database. ``past_checkpoint_after_normal_exit``: after a normal exit
    opening re-dispatches the records past the dispatch checkpoint (``recoverNormally``: ``doDispatch`` when
    the offset is past ``maxPhyOffsetOfConsumeQueue``); a DLedger log decides that itself, so it is False
    there."""

    consume_queue_files = False
    planned_runs = False

    def __init__(self, past_checkpoint_after_normal_exit: bool):
        self.past_checkpoint_after_normal_exit = past_checkpoint_after_normal_exit

    def open_queues(self, store, queues) -> None:
        # the queue set owns the database from here (it closes it)
        queues.rocksdb = RocksDBConsumeQueueStore(store.root / L.CONSUMEQUEUE_DIR)
        for topic, qid in sorted(queues.rocksdb.max_entries):
            queues.add(RocksDBConsumeQueue(queues.rocksdb, topic, qid))

    def dispatched(self, queues) -> Optional[int]:
        """``getMaxPhyOffsetInConsumeQueue``: the dispatch checkpoint, 0 without one."""
        return queues.rocksdb.dispatched or 0

    def redispatch_from(self, start: Optional[int], abnormal: bool, dispatched: Optional[int]) -> Optional[int]:
        if self.past_checkpoint_after_normal_exit and not abnormal:
            return dispatched + 1
        return start

    def new_queue(self, store, queues, topic: str, queue_id: int, batch: bool):
        return RocksDBConsumeQueue(queues.rocksdb, topic, queue_id)


__all__ = ["RocksDBQueues"]
