"""The batch sink: tasks encode and stage in parallel, the driver publishes the whole job atomically.

Commit protocol (details in :mod:`rocketstore_spark.store.write.staging`,
:mod:`~rocketstore_spark.store.write.publish` and :mod:`~rocketstore_spark.store.write.journal`):

1. ``writer()`` on the driver validates options and the input schema, checks that nobody holds the store's
   ``lock`` (fail fast) and picks a job id.
2. Each task attempt encodes its rows and writes them at offsets reserved in the job's reservation file into
   ``<store>/.rocketstore/staging/<job>/commitlog/``, laid out as the store's commit log would be (queue
   offsets and missing store times blank), plus a metadata file. The store is not touched, so retried, failed
   and speculative attempts leave nothing behind but staged bytes.
3. ``commit()`` receives the messages of exactly the attempts Spark committed, closes the reservation (no
   attempt can write after that), and under the store lock journals, publishes (in place by renaming the staged
   files when the committed attempts left no gap, else by copying), flushes and marks the journal done.
   ``abort()`` closes the reservation and deletes the staging directory: the store stays byte-identical.
4. A driver killed inside ``commit()`` leaves a journal; the next writer (or ``rocketstore recover``) rolls the
   job back completely, or, past the commit point, just cleans up.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..errors import MessageValidationError
from ..store import discard_staged, flag_compression, publish_staged, select_queues, stage
from ..store.format import layout as L
from .worker_gc import settle
from .worker_memory import tune_allocator_in_worker
from .write_options import WriteOptions

#: Spark hands a Python sink Arrow batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by
#: default); every batch costs the encoder a fixed amount of work (and per queue it writes to: thousands of queues
#: in a batch of a job spread over many topics), so consecutive batches are encoded together, up to these sizes
MERGED_ROWS = 65_536
MERGED_BYTES = 32 * 1024 * 1024


def merged_batches(batches: Iterable[pa.RecordBatch], max_rows: int = MERGED_ROWS,
                   max_bytes: int = MERGED_BYTES) -> Iterator[pa.Table]:
    """Consecutive ``batches`` as tables of at most ``max_rows`` rows or about ``max_bytes`` (a batch larger than
    either is a table of its own), in order, each column but ``body`` one contiguous array."""
    pending: list = []
    rows = size = 0
    for batch in batches:
        if pending and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield _one_table(pending)
            pending, rows, size = [], 0, 0
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if pending:
        yield _one_table(pending)


def _one_table(batches: list) -> pa.Table:
    table = pa.Table.from_batches(batches)
    if len(batches) == 1:
        return table
    # the bodies stay in their batches' buffers (the encoder takes a body column chunk by chunk): copying them
    # into one buffer would be a pass over nearly every byte written
    return pa.Table.from_arrays([column if name == "body" else column.combine_chunks()
                                 for name, column in zip(table.column_names, table.columns)], schema=table.schema)


@dataclass(frozen=True)
class StagedCommit(WriterCommitMessage):
    """What one successful task attempt staged (paths and counts only)."""

    job_id: str  # the staging directory's job (a streaming query's commit runs in a writer of its own)
    partition_id: int
    attempt: int
    stems: tuple[str, ...]
    count: int
    new_topic_max_queue: tuple[tuple[str, int], ...]  # new topics seen → highest queue id used


class RocketStoreWriter(DataSourceArrowWriter):
    """Batch writer; see the module docstring for the commit protocol."""

    def __init__(self, opts: WriteOptions, job_id: str, queue_counts: dict, overwrite: bool):
        self.opts = opts
        self.job_id = job_id
        self.queue_counts = queue_counts  # existing topic → number of queues
        self.overwrite = overwrite

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedCommit:
        from pyspark import TaskContext

        settle()  # the worker's modules leave the collections the task's allocations and the daemon trigger
        tune_allocator_in_worker()  # the encoder's arrays of a batch's rows reuse memory
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        name = f"{partition:06d}-{attempt}-{uuid.uuid4().hex[:8]}"
        new_topics: dict[str, int] = {}
        count = 0

        def tables():
            nonlocal count
            for table in merged_batches(iterator):
                table = self.normalize(table, partition, count, new_topics)
                count += table.num_rows
                yield table

        def new_topic_queues():  # as the commit counts them
            return {t: self._new_topic_queues(top) for t, top in new_topics.items()}

        stems = stage(self.opts.path, self.job_id, name, tables(), store_host=self.opts.store_host,
                      max_message_size=self.opts.max_message_size, sizes=self.opts.sizes, overwrite=self.overwrite,
                      new_topic_queues=new_topic_queues)
        return StagedCommit(self.job_id, partition, attempt, tuple(stems), count, tuple(sorted(new_topics.items())))

    def normalize(self, table: pa.Table, partition: int, row_base: int, new_topics: dict) -> pa.Table:
        """Input columns → store-layer columns: topic/queue assignment, compression flags, checks."""
        opts = self.opts
        keep = [c for c in table.column_names if c in opts.passed_columns]
        out = table.select(keep)
        n = out.num_rows
        if "topic" not in out.column_names:
            out = out.append_column("topic", pa.array([opts.topic] * n, pa.string()))
        if "keys" in out.column_names and not pa.types.is_list(out.schema.field("keys").type):
            out = out.set_column(out.column_names.index("keys"), "keys",
                                 pc.split_pattern(pc.fill_null(out.column("keys"), ""), L.KEY_SEPARATOR))
        topics = out.column("topic").combine_chunks()
        if topics.null_count:
            raise MessageValidationError("column topic has a null value; every message needs a topic")
        # encoded once: queue selection and the queue id check both work per distinct topic
        topic_codes = pc.dictionary_encode(topics)
        topic_names = topic_codes.dictionary.to_pylist()
        topic_idx = np.asarray(topic_codes.indices)
        existing = np.array([self.queue_counts.get(t, -1) for t in topic_names], dtype=np.int64)  # -1: new
        if "queueId" not in out.column_names:
            counts = np.where(existing >= 0, existing, opts.queue_nums)[topic_idx]
            queues = select_queues(table, counts, opts.queue_selector, partition, row_base)
            out = out.append_column("queueId", pa.array(queues, pa.int32()))
        qids = np.asarray(pc.fill_null(out.column("queueId").combine_chunks(), 0), dtype=np.int64)
        self._check_queue_ids(topic_names, topic_idx, existing, qids, new_topics)
        if opts.compress_body != "none" and "body" in out.column_names:
            out = flag_compression(out, opts.compress_body, opts.compress_threshold)
        return out

    def _check_queue_ids(self, topic_names: list, topic_idx: np.ndarray, existing: np.ndarray, qids: np.ndarray,
                         new_topics: dict) -> None:
        """Queue ids must fit existing topics; new topics record their highest queue id (for the commit).
        ``existing`` is the queue count of each of ``topic_names`` in the store, -1 for a new topic."""
        if (qids < 0).any():
            raise MessageValidationError(f"queueId must be >= 0, found {int(qids.min())}")
        top = np.full(len(topic_names), -1, dtype=np.int64)  # highest queue id per topic, in one pass over rows
        np.maximum.at(top, topic_idx, qids)
        beyond = np.flatnonzero((existing >= 0) & (top >= existing))
        if len(beyond):
            k = int(beyond[0])
            topic, count = topic_names[k], int(existing[k])
            raise MessageValidationError(
                f"queueId {int(top[k])} is beyond topic {topic!r}, which has {count} queues "
                f"(0..{count - 1}) in {self.opts.path}")
        new = np.flatnonzero(existing < 0)
        for topic_no, highest in zip(new.tolist(), top[new].tolist()):
            topic = topic_names[topic_no]
            if highest > new_topics.get(topic, -1):
                new_topics[topic] = highest

    def _new_topic_queues(self, top: int) -> int:
        """Queues a new topic gets: every queue id used (``top`` the highest), and at least ``queueNums``."""
        return max(top + 1, self.opts.queue_nums)

    def commit(self, messages: list[Optional[StagedCommit]]) -> None:
        tune_allocator_in_worker()  # the publication's arrays of the job's rows reuse memory
        staged = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
        new_topics: dict[str, int] = {}
        for m in staged:
            for topic, top in m.new_topic_max_queue:
                new_topics[topic] = max(new_topics.get(topic, 0), self._new_topic_queues(top))
        stems = [s for m in staged for s in m.stems]
        publish_staged(self.opts.path, self.job_id, stems, new_topic_queues=new_topics,
                       overwrite=self.overwrite, store_host=self.opts.store_host, sizes=self.opts.sizes,
                       sync_flush=self.opts.sync_flush)

    def abort(self, messages: list[Optional[StagedCommit]]) -> None:
        discard_staged(self.opts.path, self.job_id)
