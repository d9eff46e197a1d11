"""What a plan is made of: the store handle executors open, the partition kinds (small picklable dataclasses:
paths and offsets, each reading itself from an opened store) and the restrictions taken from pushed-down
filters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ..store import RocketStore
from .options import StoreRef


@dataclass(frozen=True)
class StoreHandle:
    """What an executor needs to open a store without re-running recovery."""

    path: str
    broker: str
    valid_end: int
    sizes: tuple  # commit log, consume queue, index slots, index entries (None: executors detect them)
    # a crashed store (abort present) needs abnormal recovery everywhere: its re-dispatched units exist
    # only in memory, so executors recover it again rather than trusting the valid end alone
    recover: bool = False
    variant: Optional[str] = None  # as the driver found it, so executors read the store the same way
    fs_options: tuple = ()  # a remote store's filesystem settings (see StoreRef)
    settings: tuple = ()  # the broker settings given (BrokerSettings.as_options items), for the same reason

    def open(self, lazy_queues: bool = False) -> RocketStore:
        """The store; ``lazy_queues`` (queue reads) loads only the queues a task names, not all thousands."""
        cl, cq, slots, entries = self.sizes
        return RocketStore.open(self.path, commit_log_file_size=cl, consume_queue_file_size=cq,
                                index_hash_slots=slots, index_max_entries=entries,
                                valid_end=None if self.recover else self.valid_end, variant=self.variant,
                                lazy_queues=lazy_queues and not self.recover, fs_options=dict(self.fs_options),
                                **dict(self.settings))


class StorePartition(InputPartition):
    """A partition of one store: it names the queue ranges a task reads (if any) and reads itself.

    ``read`` gets the store opened for it (lazily loading queues when :attr:`lazy_queues`) and the request
    (:class:`~.reader.ReadRequest`: columns, tags, the row filters of paths that do not go through consume
    queues)."""

    store: StoreHandle
    # queue reads load only the queues they name (a store of 20,000 queues is not listed per task), commit-log
    # stretches none; raw commit-log scans take every queue's units as record-start hints: they open it whole
    lazy_queues: ClassVar[bool] = False

    def queue_ranges(self) -> Optional[tuple]:
        """(topic, queue id, start, end) of every range the partition reads through consume queues (None: it
        reads no queue range)."""
        return None

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class QueuePartition(StorePartition):
    """Queue offsets [start, end) of one consume queue, within one consume-queue file."""

    store: StoreHandle
    topic: str
    queue_id: int
    start: int
    end: int
    lazy_queues: ClassVar[bool] = True

    def queue_ranges(self) -> tuple:
        return ((self.topic, self.queue_id, self.start, self.end),)

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:
        return request.queue_batches(store, self.store, self.queue_ranges())


@dataclass(frozen=True)
class QueueRangesPartition(StorePartition):
    """Several queue ranges read by one task: a selective ``tags`` read packs the ranges whose consume-queue
    units match into partitions of about ``maxMessagesPerPartition`` matching messages. Each range is
    (topic, queue id, start, end) and lies within one consume-queue file, like a :class:`QueuePartition`."""

    store: StoreHandle
    ranges: tuple[tuple[str, int, int, int], ...]
    lazy_queues: ClassVar[bool] = True

    def queue_ranges(self) -> tuple:
        return self.ranges

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:
        return request.queue_batches(store, self.store, self.ranges)


@dataclass(frozen=True)
class RawScanPartition(StorePartition):
    """Commit-log offsets [start, end) of one commit-log file, every record (scanMode=raw)."""

    store: StoreHandle
    start: int
    end: int

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:
        batches = store.scan_raw(self.start, self.end, columns=request.with_filter_columns(),
                                 verify_crc=request.opts.verify_crc, threads=1)  # Spark runs a task per core
        return request.filtered(batches)


@dataclass(frozen=True)
class CommitLogSlicePartition(StorePartition):
    """Commit-log offsets [start, end), read in commit-log order, keeping exactly the records a queue read of the
    same request returns (see :mod:`.ordered_plan`). ``start`` is a record start; the stretch may run on into the
    next commit-log files (consecutive ones).

    ``selected``: (topic, queue ids) of the queues whose accepted records can lie in the stretch (queue ids as a
    ``range`` when contiguous); ``limits``: (topic, queue id, lo, hi) queue-offset ranges of the selected queues
    whose range starts or ends inside the stretch (the others' records in it are all accepted)."""

    store: StoreHandle
    start: int
    end: int
    selected: tuple
    limits: tuple = ()
    lazy_queues: ClassVar[bool] = True

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:
        return store.scan_queue_records(self.start, self.end, self.selected, self.limits, tags=request.tags,
                                        columns=request.columns, verify_crc=request.opts.verify_crc,
                                        fail_on_data_loss=request.opts.fail_on_data_loss)


@dataclass(frozen=True)
class LookupPartition(StorePartition):
    """Exact records by commit-log offset (from msgId / uniqKey pushdown)."""

    store: StoreHandle
    offsets: tuple[int, ...]

    def read(self, store: RocketStore, request) -> Iterator[pa.RecordBatch]:
        table = store.read_records_at(list(self.offsets), request.with_filter_columns())
        return request.filtered(table.to_batches())


@dataclass
class Pushed:
    """Restrictions taken from pushed-down filters (all optional; None means unrestricted)."""

    topics: Optional[set] = None
    queue_ids: Optional[set] = None
    tags: Optional[set] = None
    queue_offset: tuple = (0, 1 << 62)  # [lo, hi)
    phy_offset: tuple = (0, 1 << 62)
    store_time: tuple = (None, None)  # [lo ms, hi ms)
    uniq_keys: Optional[set] = None
    msg_ids: Optional[set] = None
    empty: bool = False  # contradictory filters: nothing can match
    notes: list = field(default_factory=list)


def handle_sizes(s) -> tuple:
    """The sizes executors open a store with; index sizes the files leave ambiguous are left for them to
    detect again (queue and commit-log reads never need them)."""
    return (s.commit_log_file_size, s.consume_queue_file_size) + \
        ((None, None) if s.index_sizes_problem else (s.index_hash_slots, s.index_max_entries))


def handle_for(store: RocketStore, ref: StoreRef) -> StoreHandle:
    return StoreHandle(ref.path, ref.broker, store.max_phy_offset(), handle_sizes(store.sizes),
                       recover=store.abort_present, variant=store.variant.name, fs_options=ref.fs_options,
                       settings=handle_settings(store))


def handle_settings(store: RocketStore) -> tuple:
    """The broker settings a store was opened with, for executors to open it the same way."""
    return tuple(sorted(store.settings.as_options().items()))
