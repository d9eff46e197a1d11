"""The batch reader: plans partitions on the driver, reads them on executors as Arrow batches."""

from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader

from ..errors import DataLossError, StoreNotFoundError
from ..store import DEFAULT_BATCH_ROWS as BATCH_ROWS
from ..store import RocketStore
from .filters import apply_filters
from .history_plan import HistoryPartition
from .options import ReadOptions
from .planning import Pushed, StoreHandle, effective_tags, plan
from .planning_types import StorePartition
from .schema import arrow_schema_for, store_columns, to_spark_batch
from .store_cache import open_cached
from .store_snapshot import OldestFile
from .user_errors import message_first
from .worker_gc import settle
from .worker_memory import tune_allocator_in_worker

log = logging.getLogger("rocketstore_spark")


def read_key(handle: StoreHandle, lazy: bool) -> tuple:
    """The key of a store executors opened for reading in :data:`~.store_cache.OPEN_STORES`."""
    return ("read", handle, lazy)


def store_for(handle: StoreHandle, partition=None) -> RocketStore:
    """An opened store per handle, reused across partitions of a Python worker (maps stay warm).

    The cache's rule (:func:`.store_cache.open_cached`) with an executor's stamp: the handle pins the plan's
    valid end, so a cached store is opened again only when its oldest commit-log file expired under it (its
    listing is stale, :class:`.OldestFile`) or when it has not seen a queue's units up to the partition's end
    (the store grew since it was opened: streaming, or appends between planning and reading).
    """
    lazy = bool(partition is not None and partition.lazy_queues)
    ranges = partition.queue_ranges() if partition is not None else None

    def serves(store: RocketStore) -> bool:
        if ranges is None:
            return True
        store.expect_queue_ends(ranges)
        return _covers(store, ranges)  # a store whose queues were all loaded (not lazily) before it grew

    store = open_cached(read_key(handle, lazy), None, lambda: handle.open(lazy_queues=lazy),
                        lambda opened, _at: OldestFile(opened), serves)
    if ranges is not None:
        # the planner found these ranges complete: queues load trusting the planned ends (a queue loaded for an
        # earlier, shorter range loads again), and every unit read is checked, so a queue truncated or replaced
        # since planning is data loss
        store.expect_queue_ends(ranges)
    return store


def _range_covered(store: RocketStore, topic: str, qid: int, end: int) -> bool:
    # a queue the store will load trusting its plan is checked as its units are read (loading each of thousands
    # of queues here would cost a task more than reading their few units)
    return store.planned_to(topic, qid, end) or (store.has_queue(topic, qid) and store.max_offset(topic, qid) >= end)


def _covers(store: RocketStore, ranges) -> bool:
    return all(_range_covered(store, topic, qid, end) for topic, qid, _, end in ranges)


class ReadRequest:
    """What a partition's read needs besides its store: the options, the pushed filters, the store columns to
    decode and the effective tags (None: every tag)."""

    def __init__(self, opts: ReadOptions, pushed: Pushed, columns: tuple, tags):
        self.opts, self.pushed, self.columns, self.tags = opts, pushed, columns, tags

    def queue_batches(self, store: RocketStore, handle: StoreHandle, ranges) -> Iterator[pa.RecordBatch]:
        """The rows of planned consume-queue ranges; a range its queue no longer reaches is data loss."""
        for topic, qid, _, end in ranges:
            if not _range_covered(store, topic, qid, end):
                raise DataLossError(
                    f"{handle.broker}/{topic}/{qid}: offsets up to {end} were planned but the consume queue in "
                    f"{handle.path} now ends earlier (truncated or replaced since planning)")
        return store.read_queues(ranges, tags=self.tags, columns=self.columns, verify_crc=self.opts.verify_crc,
                                 fail_on_data_loss=self.opts.fail_on_data_loss)

    def with_filter_columns(self) -> tuple:
        """The columns to decode: the requested ones plus those the row filters below need (parsing
        properties for ``tags`` or the timestamp column only costs when a filter uses them)."""
        opts, pushed = self.opts, self.pushed
        needed = ["topic"]
        if self.tags is not None:
            needed.append("tags")
        if pushed.queue_ids is not None:
            needed.append("queueId")
        if any(b is not None for b in (opts.starting_timestamp, opts.ending_timestamp) + tuple(pushed.store_time)):
            needed.append("storeTimestamp")
        return tuple(dict.fromkeys(tuple(self.columns) + tuple(needed)))

    def filtered(self, batches) -> Iterator[pa.RecordBatch]:
        """Row filters for paths that do not go through consume queues (commit-log scans, lookups)."""
        opts, pushed, tags = self.opts, self.pushed, self.tags
        lo_t, hi_t = pushed.store_time
        for batch in batches:
            topics = pc.unique(batch.column("topic")).to_pylist()
            wanted = [t for t in topics if opts.wants_topic(t) and (pushed.topics is None or t in pushed.topics)]
            mask = pc.is_in(batch.column("topic"), value_set=pa.array(wanted, pa.string()))
            if tags is not None:
                mask = pc.and_(mask, pc.fill_null(pc.is_in(batch.column("tags"), value_set=pa.array(tags)), False))
            if pushed.queue_ids is not None:
                mask = pc.and_(mask, pc.is_in(batch.column("queueId"), value_set=pa.array(sorted(pushed.queue_ids),
                                                                                            pa.int32())))
            for bound, op in ((opts.starting_timestamp, pc.greater_equal), (lo_t, pc.greater_equal),
                              (opts.ending_timestamp, pc.less), (hi_t, pc.less)):
                if bound is not None:
                    mask = pc.and_(mask, op(batch.column("storeTimestamp").cast(pa.int64()), bound))
            yield batch.filter(mask).select(list(self.columns))


class RocketStoreReader(DataSourceReader):
    """Reads the partitions :func:`~rocketstore_spark.spark.planning.plan` makes."""

    def __init__(self, opts: ReadOptions, spark_columns: tuple[str, ...]):
        self.opts = opts
        self.spark_columns = spark_columns
        self.pushed = Pushed()

    @message_first
    def partitions(self):
        return plan(self.opts, self.pushed)

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        target = arrow_schema_for(self.spark_columns)
        if isinstance(partition, HistoryPartition):  # tieredStorePath: the partition opens its own history
            request = ReadRequest(self.opts, self.pushed, store_columns(self.spark_columns),
                                  effective_tags(self.opts, self.pushed))
            if request.tags is not None and not request.tags:
                return
            batches = partition.read(request)
            yield from coalesced((to_spark_batch(b, partition.handle.broker, target) for b in batches if b.num_rows),
                                 BATCH_ROWS)
            return
        if not isinstance(partition, StorePartition):
            # an empty plan: PySpark runs one task with a bare InputPartition(None) in place of no partitions
            return
        handle = partition.store
        try:
            store = store_for(handle, partition)
        except (FileNotFoundError, StoreNotFoundError) as e:
            import socket

            raise StoreNotFoundError(
                f"store {handle.path} is not visible on executor host {socket.gethostname()} ({e}); put the "
                "store on a filesystem every executor mounts at the same path") from e
        settle(store)  # the worker keeps the store: later collections skip it and the worker's modules
        tune_allocator_in_worker()  # a read's arrays reuse memory
        tags = effective_tags(self.opts, self.pushed)
        if tags is not None and not tags:
            return
        batches = partition.read(store, ReadRequest(self.opts, self.pushed, store_columns(self.spark_columns), tags))
        yield from coalesced((to_spark_batch(b, handle.broker, target) for b in batches if b.num_rows), BATCH_ROWS)


def coalesced(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` in order, with runs of small ones merged into batches of about ``rows`` rows.

    A selective read yields a few matches per consume-queue range and commit-log file; each batch handed to
    Spark costs a fixed serialisation and JVM round trip. Batches of half ``rows`` or more pass through uncopied
    (full scans), so merging only ever copies the small ones.
    """
    pending: list = []
    gathered = 0
    for batch in batches:
        if batch.num_rows >= rows // 2:
            if pending:
                yield pa.concat_batches(pending)
                pending, gathered = [], 0
            yield batch
            continue
        pending.append(batch)
        gathered += batch.num_rows
        if gathered >= rows:
            yield pa.concat_batches(pending)
            pending, gathered = [], 0
    if pending:
        yield pa.concat_batches(pending)


class RocketStorePushdownReader(RocketStoreReader):
    """The same reader with ``pushFilters``: used only when Spark runs filter pushdown (Spark >= 4.1 with
    ``spark.sql.python.filterPushdown.enabled``); a reader defining pushFilters fails when it is off."""

    def pushFilters(self, filters):
        return list(apply_filters(filters, self.pushed))
