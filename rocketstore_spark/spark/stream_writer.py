"""``df.writeStream.format("rocketstore")``: each micro-batch is one journalled, idempotent publication.

Tasks stage exactly as the batch sink does, in a staging job of their micro-batch (Spark's
``streaming.sql.batchId`` local property names it), so an attempt of an earlier batch still running cannot add
to a later one. Spark builds a new writer for the commit: the job comes from the tasks' commit messages.
``commit(messages, batchId)`` publishes with the sink's id and the batch id recorded inside the publication,
so a restarted query that replays a batch publishes nothing twice.
The committed batch ids live in ``<store>/.rocketstore/sinks/<sinkId>.json`` (option ``sinkId``; by default
derived from the store path, so give each query writing into the same store its own ``sinkId``).
"""

from __future__ import annotations

import hashlib
from typing import Optional

from ..errors import RocketStoreError
from ..store import discard_staged, new_job_id, publish_staged
from .schema import arrow_schema_of
from .worker_memory import tune_allocator_in_worker
from .write_options import WriteOptions
from .writer import RocketStoreWriter, StagedCommit

try:  # Spark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - Spark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase

ROW_WRITER_BATCH_ROWS = 10_000  # Spark 4.0 hands the streaming writer rows: they are re-batched this many at a time


BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property MicroBatchExecution sets for each batch's jobs


def default_sink_id(path: str) -> str:
    return "sink-" + hashlib.sha1(path.encode()).hexdigest()[:12]


class RocketStoreStreamWriter(_StreamWriterBase):
    def __init__(self, opts: WriteOptions, queue_counts: dict, input_schema=None):
        self.opts = opts
        # Spark 4.0's row writer: rows are re-batched with the input's Arrow types (guessed from values, a map
        # would become a struct and a column of nulls would have no type)
        self.input_schema = input_schema
        self.sink_id = opts.sink_id or default_sink_id(opts.path)
        self.queue_counts = queue_counts
        self.job_prefix = new_job_id()[:12]

    def _batch_writer(self, job_id: str) -> RocketStoreWriter:
        return RocketStoreWriter(self.opts, job_id, self.queue_counts, overwrite=False)

    def write(self, iterator) -> StagedCommit:
        import pyarrow as pa
        from pyspark import TaskContext

        # one staging job per micro-batch: an attempt of an earlier batch still running cannot add to this one
        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
        job_id = f"{self.job_prefix}-{batch_id}" if batch_id is not None else self.job_prefix

        def batches():
            rows, schema = [], None
            for item in iterator:
                if isinstance(item, pa.RecordBatch):
                    yield item
                    continue
                if schema is None and self.input_schema is not None:
                    schema = arrow_schema_of(self.input_schema)
                rows.append(item.asDict(recursive=True))  # Spark 4.0 row writer
                if len(rows) == ROW_WRITER_BATCH_ROWS:
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=schema)

        return self._batch_writer(job_id).write(batches())

    def commit(self, messages: list[Optional[StagedCommit]], batchId: int) -> None:
        tune_allocator_in_worker()  # the publication's arrays of the job's rows reuse memory
        staged = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
        # Spark builds a new writer for the commit: the job is the one the tasks staged in
        job_ids = {m.job_id for m in staged}
        if len(job_ids) > 1:
            raise RocketStoreError(f"micro-batch {batchId}: expected the tasks of one staging job, found "
                                   f"{sorted(job_ids)} in {self.opts.path}")
        job_id = job_ids.pop() if job_ids else f"{self.job_prefix}-{batchId}"
        new_topics: dict[str, int] = {}
        for m in staged:
            for topic, top in m.new_topic_max_queue:
                new_topics[topic] = max(new_topics.get(topic, 0), top + 1, self.opts.queue_nums)
        publish_staged(self.opts.path, job_id, [s for m in staged for s in m.stems],
                       new_topic_queues=new_topics, store_host=self.opts.store_host, sizes=self.opts.sizes,
                       sink=(self.sink_id, int(batchId)), sync_flush=self.opts.sync_flush)

    def abort(self, messages: list[Optional[StagedCommit]], batchId: int) -> None:
        for job_id in {m.job_id for m in messages if m is not None}:
            discard_staged(self.opts.path, job_id)
