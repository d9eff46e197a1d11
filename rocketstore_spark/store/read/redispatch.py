"""Recovery of an opened store as the broker runs it when it opens the directory: the valid end of the commit log
(:mod:`.recovery`), then re-dispatch, which adds the consume-queue units of recovered records that their queues
lack (a batch queue's unit per record, the RocksDB queue's unit by queue offset, the LMQ units a record names).
Nothing on disk changes: the units added are virtual, held by the queues of the reader's :class:`.QueueSet`."""

from __future__ import annotations

import logging

import numpy as np

from ..format.codec import dispatch_tags_code
from ..format.columns import build_batch
from .opened_store import OpenedStore
from .queue_set import QueueSet
from .recovery import MODE_ABNORMAL, RecoveryResult, recover, undispatched_records
from .variant_reads import VariantReads

log = logging.getLogger("rocketstore_spark")

REDISPATCH_COLUMNS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "properties",
                      "storeTimestamp", "sysFlag")


class StoreRecovery:
    """Computes the recovery of ``store`` over its ``queues`` (once: :attr:`OpenedStore.recovery` caches it)."""

    def __init__(self, store: OpenedStore, queues: QueueSet, variants: VariantReads):
        self.store = store
        self.queues = queues
        self.variants = variants

    def __call__(self) -> RecoveryResult:
        store, queues = self.store, self.queues.loaded_queues()
        if store.given_valid_end is not None:
            for q in queues:
                q.truncate_at_phy(store.given_valid_end)
            return RecoveryResult("given", -1, store.given_valid_end)
        result = recover(store.commitlog, queues, store.checkpoint, store.abort_present, store.check_crc_on_recover,
                         self.variants.dispatched())
        start = self.variants.redispatch_from(result.mode == MODE_ABNORMAL)
        # what re-dispatch indexes: every record recovery walked after a crash, else from where it starts
        result.reindex_from = 0 if result.mode == MODE_ABNORMAL else start
        if start is not None:
            self.redispatch(result, start)
        return result

    def redispatch(self, result: RecoveryResult, start: int) -> None:
        """Add the consume-queue units opening would write for recovered records at or past ``start`` that their
        queues lack."""
        queues, variants = self.queues, self.variants
        for walk, idx in undispatched_records(result, queues.loaded_queues(), self.queue_lacks, start):
            buf = self.store.commitlog.queue.buffer(walk.file_index)
            for step in walk.in_steps(idx):  # the records' pages are let go step by step
                fields = walk.fields_at(step)
                batch = build_batch(buf, fields, REDISPATCH_COLUMNS)
                for i, (row, store_ts) in enumerate(zip(batch.to_pylist(), fields.store_timestamp)):
                    key = (row["topic"], row["queueId"])
                    cq = queues.loaded(*key)
                    if cq is None:
                        if self.unwritable_queue(row["topic"], walk, int(step[i])):
                            return
                        cq = variants.dispatch_queue(*key, row)
                        queues.add(cq)
                    props = dict(row["properties"])
                    code = dispatch_tags_code(row["topic"], props, int(store_ts))
                    cq.dispatch_recovered(row["queueOffset"], row["commitLogOffset"], row["storeSize"], code,
                                          int(store_ts), props)
                    variants.redispatch_variant(row, code, int(store_ts))

    def unwritable_queue(self, topic: str, walk, i: int) -> bool:
        """Whether re-dispatch fails on a record of ``topic`` (the ``i``-th record of ``walk``): a file consume
        queue's directory is named by the topic, and a topic holding a NUL byte names no path (Java's ``File``
        refuses it, so the broker cannot create the queue's file). The broker retries, marks its logic queues as
        failed and writes no consume-queue unit for this record or any later one; so does this reader, with a
        warning naming the record."""
        if "\0" not in topic or not self.store.behaviour.consume_queue_files:
            return False
        path = self.store.commitlog.queue.files[walk.file_index].path
        log.warning("re-dispatch after the crash stops at the record at byte %d of %s (commit-log offset %d): its "
                    "topic %r names no consume-queue directory, so the broker writes no consume-queue unit for it "
                    "or any later record (its logic queues fail); their messages are read only by a raw scan",
                    int(walk.positions[i]), path, int(walk.stored_phy_offsets()[i]), topic)
        return True

    def queue_lacks(self, topic: str, queue_id: int, queue_offsets: np.ndarray, phy_offsets: np.ndarray):
        """Per record of one queue, whether re-dispatch would add it: a queue not there yet, a record at or past
        the queue's end (``putMessagePositionInfo``'s check), past a batch queue's last unit (the queue answers)."""
        cq = self.queues.loaded(topic, queue_id)
        if cq is None:
            return np.ones(len(phy_offsets), dtype=bool)
        return cq.lacks(queue_offsets, phy_offsets)
