"""``StoreReader``: the read engine over one RocketMQ store directory (commit log, consume queues, index, checkpoint).

Opening never modifies a byte. Recovery (the valid end of the commit log) runs lazily, the first time it is
needed. The reader is a face over the objects that do the work, built once when the store is opened:

* :class:`~.opened_store.OpenedStore`: root, sizes, settings, variant, commit log, checkpoint, recovery;
* :class:`~.queue_set.QueueSet`: the consume queues (lazy loading, planned ends, topics, min and max offsets);
* :class:`~.variant_reads.VariantReads`: what the storage variant adds to reads and to re-dispatch (its
  behaviour, :class:`~.variants.behaviour.VariantBehaviour`, chosen here once from the variant's features);
* :class:`~.records.CommitLogReads`: records by commit-log position, raw scans;
* :class:`~.queue_reads.QueueReader` (with :class:`~.planned_units.PlannedUnits`): messages of queue ranges;
* :class:`~.ordered_scan.OrderedScanner`: commit-log-ordered reads of queue rows;
* :class:`~.messages.MessageLookups`: getMessage, queryMessage and the point lookups.

The writer (:mod:`..write.appender`) and the job tools build on this class; users reach it through the facade
:class:`~rocketstore_spark.store.store.RocketStore`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

import pyarrow as pa

from ...errors import InvalidArgumentError, StoreNotFoundError
from ..files.byte_source import as_path, is_remote
from ..files.checkpoint import Checkpoint
from ..files.consume_queue import ConsumeQueue
from ..files.index_file import IndexFile, list_index_files
from ..files.known_end import known_end
from ..files.mapped_file_queue import missing_file_names
from ..files.sizes import StoreSizes, cq_listing, detect_sizes
from ..files.store_location import resolve_store_root
from ..files.strays import warn_strays
from ..files.variant import BrokerSettings, StoreVariant, detect_variant
from ..format import layout as L
from ..format.trace import RMQ_SYS_TRACE_TOPIC
from .compaction import CompactedTopics
from .group_offsets import GroupOffsets
from .messages import GetMessageResult, MessageLookups
from .opened_store import OpenedStore
from .ordered_scan import DEFAULT_SCAN_ROWS, OrderedScanner
from .planned_units import PlannedUnits
from .queue_bytes import bytes_between, offset_within_bytes
from .queue_reads import QueueReader
from .queue_set import QueueSet
from .records import DEFAULT_BATCH_ROWS, CommitLogReads
from .recovery import RecoveryResult
from .redispatch import StoreRecovery
from .timers import TimerMessages
from .traces import MessageTraces
from .transactions import PendingTransactions
from .variant_reads import VariantReads
from .variants.behaviour import VariantBehaviour, choose_behaviour


class StoreReader:
    """Read-only view of a RocketMQ store (commit log, consume queues, index files, checkpoint)."""

    def __init__(self, root: Path, sizes: StoreSizes, check_crc_on_recover: bool = True,
                 valid_end: Optional[int] = None, variant: Optional[StoreVariant] = None, listing=None,
                 lazy_queues: bool = False, strays: Optional[list] = None,
                 settings: Optional[BrokerSettings] = None, behaviour: Optional[VariantBehaviour] = None):
        root = as_path(root)
        settings = BrokerSettings() if settings is None else settings
        variant = detect_variant(root, None, settings.dledger_self_id, settings.batch_topics) \
            if variant is None else variant
        # how the variant reads, chosen here once (``open`` chose it already to list the queues)
        behaviour = choose_behaviour(root, variant) if behaviour is None else behaviour
        # a given ``listing`` comes with the strays its listing found
        self.store = OpenedStore(root, sizes, settings, variant, behaviour, check_crc_on_recover, valid_end,
                                 list(strays or []))
        # queues loaded when first named (a reader of a few queues of thousands lists only those); only with a
        # given valid end, since recovery needs every queue
        self.queues = QueueSet(self.store, lazy_queues and valid_end is not None)
        self.records = CommitLogReads(self.store, self.queues)
        self.variants = VariantReads(self.store, self.queues, self.records)
        self.planned = PlannedUnits(self.store, self.queues)
        self.reader = QueueReader(self.store, self.queues, self.planned, self.variants)
        self.scanner = OrderedScanner(self.store, self.queues)
        self.lookups = MessageLookups(self.store, self.queues, self.records, self.reader, self.variants)
        self.group_offsets = GroupOffsets(self, root)
        self.transactions = PendingTransactions(self, root)
        self.timers = TimerMessages(self, root)
        self.traces = MessageTraces(self)
        self.compacted = CompactedTopics(self, root)
        self.store.recover_with(StoreRecovery(self.store, self.queues, self.variants))
        # a rocksdb-cq store's consumequeue/ is a RocksDB database, not queue directories; lazy readers list none
        if not behaviour.consume_queue_files or (lazy_queues and valid_end is not None):
            listing = []
        try:
            self.queues.open_listed(cq_listing(root, self.store.stray_files) if listing is None else listing)
            self.variants.open_variant_queues()
        except BaseException:
            self.close()  # the queues opened so far hold memory maps
            raise
        list_index_files(root / L.INDEX_DIR, self.store.stray_files)
        warn_strays(self.store.stray_files)

    @classmethod
    def open(cls, path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
             index_max_entries=None, check_crc_on_recover: bool = True, valid_end: Optional[int] = None,
             variant=None, lazy_queues: bool = False, settings: Optional[BrokerSettings] = None,
             fs_options=None, trust_recorded_end: bool = False):
        """Open the store at ``path`` (a local path or a remote URI, see :mod:`..files.remote_fs`; ``fs_options``
        configure its filesystem) for reading.

        Sizes are detected from the files; pass them when a store has none of a kind or detection is
        ambiguous. ``valid_end`` skips recovery when the caller already knows the commit log's valid end; with
        it and the consume-queue file size, ``lazy_queues`` lists no queue up front: each is loaded when first
        named (:meth:`topics` then knows only those), for readers of a few queues of thousands. ``variant`` (see
        :func:`~..files.variant.parse_variant`) names the storage variant where the files leave it open; by
        default it is detected. ``settings`` (:class:`~..files.variant.BrokerSettings`) are the broker settings
        the files leave open. ``trust_recorded_end`` takes the commit log's end from the record rocketstore's
        last writer left (:mod:`..files.known_end`) when it still holds, instead of recovery's walk.
        """
        root = resolve_store_root(path, fs_options)
        settings = BrokerSettings() if settings is None else settings
        found = detect_variant(root, variant, settings.dledger_self_id, settings.batch_topics)
        lazy = lazy_queues and valid_end is not None and consume_queue_file_size is not None
        strays: list = []  # listed once: size detection and the queues share the listing and what it skipped
        behaviour = choose_behaviour(root, found, settings.commit_log_paths)
        listing = [] if lazy or not behaviour.consume_queue_files else cq_listing(root, strays)
        log = behaviour.log_spec
        if log.directory == root / L.COMMITLOG_DIR and not log.directory.is_dir():
            raise StoreNotFoundError(f"{root} has no {L.COMMITLOG_DIR}/ directory: when the broker keeps its commit "
                                     "log elsewhere (storePathCommitLog), name its directories with commit_log_path "
                                     "(the option commitLogPath, the CLI's --commitlog-path), comma-separated")
        sizes = detect_sizes(root, commit_log_file_size, consume_queue_file_size, index_hash_slots,
                             index_max_entries, log_dir=log.size_detection_dir, listing=listing)
        if trust_recorded_end and valid_end is None and found.is_default and not is_remote(root) \
                and not settings.commit_log_paths:
            # the end rocketstore's last writer recorded, while nothing recovery looks at changed: no walk
            valid_end = known_end(root, sizes)
        return cls(root, sizes, check_crc_on_recover, valid_end, found, listing, lazy, strays, settings, behaviour)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Release memory maps."""
        self.store.close()
        self.queues.close()
        self.lookups.close()

    # --- the opened store -------------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.store.root

    @property
    def sizes(self) -> StoreSizes:
        return self.store.sizes

    @property
    def settings(self) -> BrokerSettings:
        return self.store.settings

    @property
    def variant(self) -> StoreVariant:
        return self.store.variant

    @property
    def commitlog(self):
        return self.store.commitlog

    @property
    def abort_present(self) -> bool:
        return self.store.abort_present

    @property
    def stray_files(self) -> list:
        return self.store.stray_files

    @property
    def recovery(self) -> RecoveryResult:
        """How the real store would recover this directory (computed once)."""
        return self.store.recovery

    def checkpoint(self) -> Optional[Checkpoint]:
        """The checkpoint file's values (None when the store has none)."""
        return self.store.checkpoint

    def min_phy_offset(self) -> int:
        """Start of the oldest commit-log file."""
        return self.store.min_phy_offset()

    def max_phy_offset(self) -> int:
        """The valid end of the commit log after recovery."""
        return self.store.recovery.valid_end

    def commit_log_file_starts(self) -> list[int]:
        """The first offset of every commit-log file, oldest first (each holds ``sizes.commit_log_file_size``)."""
        return [f.from_offset for f in self.store.commitlog.queue.files]

    # --- the queue set ----------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """Topics with a consume queue, sorted."""
        return self.queues.topics()

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic``, sorted (empty for an unknown topic)."""
        return self.queues.queue_ids(topic)

    def has_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) has a consume queue (after recovery)."""
        return self.queues.has_queue(topic, queue_id)

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue_id), recovered; an unknown one is an error."""
        return self.queues.consume_queue(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""
        return self.queues.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: the next queue offset to be written (exclusive end)."""
        return self.queues.max_offset(topic, queue_id)

    def queue_bytes(self, topic: str, queue_id: int, start: int, end: int, cap: Optional[int] = None) -> int:
        """The bytes (stored record sizes) of the messages at queue offsets ``[start, end)``, from the consume
        queue's units alone; with ``cap`` counting may stop once it is reached (see :mod:`.queue_bytes`)."""
        return bytes_between(self.consume_queue(topic, queue_id), start, end, cap)

    def offset_within_bytes(self, topic: str, queue_id: int, start: int, end: int, max_bytes: int) -> int:
        """The end of the longest run of queue offsets from ``start`` (before ``end``) holding at most
        ``max_bytes`` bytes; at least one message when ``start < end``."""
        return offset_within_bytes(self.consume_queue(topic, queue_id), start, end, max_bytes)

    def lost_ranges(self, topics=None) -> list:
        """The messages this copy of the store lost, per queue (:class:`~.recovery.LostRange`: consume-queue units
        pointing into commit-log files missing between the first and the last, or past where the commit log's
        records end, e.g. a cut or short last file or files missing at the end), in topic, queue and offset
        order; ``topics`` limits them to those topics. A queue may have several. Reads that ask for them raise
        :class:`~rocketstore_spark.errors.DataLossError` unless ``fail_on_data_loss=False``."""
        return self.queues.lost_ranges(topics)

    def missing_commit_log_files(self) -> list[str]:
        """Names of the commit-log files missing between the first and the last (a copy with holes), oldest first:
        the broker reads around them, and the units pointing into them are :meth:`lost_ranges`."""
        return missing_file_names(self.commitlog.missing, self.commitlog.file_size)

    def lost_ranges_of(self, cq) -> list:
        """The messages consume queue ``cq`` lost (:class:`~.recovery.LostRange` s, in queue-offset order)."""
        return self.queues.lost_ranges_of(cq)

    def queue_edges(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(:meth:`min_offset`, :meth:`max_offset`) with one lookup."""
        return self.queues.queue_edges(topic, queue_id)

    def queue_file_tails(self):
        """See :meth:`.QueueSet.queue_file_tails`."""
        return self.queues.queue_file_tails()

    def expect_queue_ends(self, ranges) -> None:
        """See :meth:`.QueueSet.expect_queue_ends`."""
        self.queues.expect_queue_ends(ranges)

    def planned_to(self, topic: str, queue_id: int, end: int) -> bool:
        """See :meth:`.QueueSet.planned_to`."""
        return self.queues.planned_to(topic, queue_id, end)

    # --- the variant ------------------------------------------------------------------------------------

    def dledger_committed(self):
        """See :meth:`.VariantReads.dledger_committed`."""
        return self.variants.dledger_committed()

    def dispatched(self):
        """See :meth:`.VariantReads.dispatched`."""
        return self.variants.dispatched()

    def batch_topics(self) -> frozenset:
        """See :meth:`.VariantReads.batch_topics`."""
        return self.variants.batch_topics()

    def is_batch_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) is a batch consume queue (queue offsets count inner messages)."""
        return self.variants.is_batch_queue(topic, queue_id)

    def is_lmq(self, topic: str) -> bool:
        """Whether ``topic`` is a light message queue of this store."""
        return self.variants.is_lmq(topic)

    def lmq_topics(self) -> list[str]:
        """The ``%LMQ%`` topics with a consume queue (a subset of :meth:`topics`)."""
        return self.variants.lmq_topics()

    # --- reads ------------------------------------------------------------------------------------------

    def scan_raw(self, start: int = 0, end: Optional[int] = None, columns=None, *,
                 batch_rows: int = DEFAULT_BATCH_ROWS, verify_crc: bool = False,
                 threads: Optional[int] = None) -> Iterator[pa.RecordBatch]:
        """Every record in commit-log order from ``start`` to ``end`` (clamped to the valid end), including
        records that never reach a consume queue, as batches of ``batch_rows``. ``threads``: batches decoded at
        once on worker threads (None: one per core, at most four; 1: on the caller's thread). See
        :meth:`.CommitLogReads.scan_raw`."""
        return self.records.scan_raw(start, end, columns, batch_rows=batch_rows, verify_crc=verify_crc,
                                     threads=threads)

    def read_record_at(self, phy_offset: int, columns=None) -> Optional[pa.RecordBatch]:
        """See :meth:`.CommitLogReads.read_record_at`."""
        return self.records.read_record_at(phy_offset, columns)

    def read_records_at(self, phy_offsets, columns=None) -> pa.Table:
        """See :meth:`.CommitLogReads.read_records_at`."""
        return self.records.read_records_at(phy_offsets, columns)

    def store_time_at(self, phy_offset: int, size: int) -> int:
        """See :meth:`.CommitLogReads.store_time_at`."""
        return self.records.store_time_at(phy_offset, size)

    def complete_queue_end(self, topic: str, queue_id: int, max_back: int = 1024) -> int:
        """See :meth:`.CommitLogReads.complete_queue_end`."""
        return self.records.complete_queue_end(topic, queue_id, max_back)

    def read_queue(self, topic: str, queue_id: int, start: Optional[int] = None, end: Optional[int] = None,
                   tags=None, columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS, verify_crc: bool = False,
                   fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """See :meth:`.QueueReader.read_queue`."""
        return self.reader.read_queue(topic, queue_id, start, end, tags, columns, batch_rows=batch_rows,
                                      verify_crc=verify_crc, fail_on_data_loss=fail_on_data_loss)

    def read_queues(self, ranges, tags=None, columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                    verify_crc: bool = False, fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """See :meth:`.QueueReader.read_queues`."""
        return self.reader.read_queues(ranges, tags, columns, batch_rows=batch_rows, verify_crc=verify_crc,
                                       fail_on_data_loss=fail_on_data_loss)

    def tag_match_spans(self, ranges, sub) -> list:
        """See :meth:`.PlannedUnits.tag_match_spans`."""
        return self.planned.tag_match_spans(ranges, sub)

    def scan_queue_records(self, start: int, end: int, selected, limits=(), *, tags=None, columns=None,
                           batch_rows: int = DEFAULT_SCAN_ROWS, verify_crc: bool = False,
                           fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """See :meth:`.OrderedScanner.scan_queue_records`."""
        return self.scanner.scan_queue_records(start, end, selected, limits, tags=tags, columns=columns,
                                               batch_rows=batch_rows, verify_crc=verify_crc,
                                               fail_on_data_loss=fail_on_data_loss)

    def record_start_at_or_after(self, phy_offset: int, limit: int, probes, near: int = 0) -> Optional[int]:
        """See :meth:`.OrderedScanner.record_start_at_or_after`."""
        return self.scanner.record_start_at_or_after(phy_offset, limit, probes, near)

    # --- lookups ----------------------------------------------------------------------------------------

    def get_message(self, topic: str, queue_id: int, offset: int, max_nums: int = 32, tags="*", columns=None, *,
                    in_memory: bool = True) -> GetMessageResult:
        """See :meth:`.MessageLookups.get_message`."""
        return self.lookups.get_message(topic, queue_id, offset, max_nums, tags, columns, in_memory=in_memory)

    def index_files(self) -> list[IndexFile]:
        """See :meth:`.MessageLookups.index_files`."""
        return self.lookups.index_files()

    def query_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0, end: Optional[int] = None,
                     columns=None) -> pa.Table:
        """See :meth:`.MessageLookups.query_by_key`."""
        return self.lookups.query_by_key(topic, key, max_num, begin, end, columns)

    def look_message_by_offset(self, phy_offset: int, columns=None) -> Optional[dict]:
        """See :meth:`.MessageLookups.look_message_by_offset`."""
        return self.lookups.look_message_by_offset(phy_offset, columns)

    def look_message_by_msg_id(self, msg_id: str, columns=None) -> Optional[dict]:
        """See :meth:`.MessageLookups.look_message_by_msg_id`."""
        return self.lookups.look_message_by_msg_id(msg_id, columns)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int, boundary: str = "lower") -> int:
        """See :meth:`.MessageLookups.offset_by_time`."""
        return self.lookups.offset_by_time(topic, queue_id, timestamp_ms, boundary)

    # --- consumer groups --------------------------------------------------------------------------------

    def consumer_groups(self) -> list[str]:
        """The groups with committed offsets in the broker's ``config/consumerOffset.json`` (and
        ``lmqConsumerOffset.json``), sorted."""
        return self.group_offsets.groups()

    def consumer_offsets(self, group: Optional[str] = None, topic: Optional[str] = None) -> list[dict]:
        """The committed offsets of every group (or of ``group`` / ``topic``), one dict per queue: group, topic,
        queueId, committedOffset (the next offset the group consumes), minOffset, maxOffset, lag (maxOffset -
        committedOffset, at least 0), nextMessageStoreTime (epoch ms of the group's next message; None when it
        is caught up) and source (the file). See :mod:`.group_offsets`."""
        return self.group_offsets.rows(group, topic)

    def group_starting_offsets(self, group: str) -> dict:
        """``group``'s committed offsets as ``{topic: {"queueId": offset}}`` (JSON startingOffsets' shape); an
        unknown group is an error listing the known ones."""
        if group not in self.consumer_groups():
            raise InvalidArgumentError(f"consumer group {group!r} has no committed offset in "
                                       f"{self.root / 'config'} (consumerOffset.json, lmqConsumerOffset.json); its "
                                       f"groups are {', '.join(self.consumer_groups()) or 'none'}")
        return self.group_offsets.starting_offsets(group)

    # --- special topics ---------------------------------------------------------------------------------

    def pending_transactions(self, topic: Optional[str] = None) -> list[dict]:
        """The transactional messages still waiting on a commit or rollback (of real topic ``topic``): the half
        messages the broker would go on checking with their producers. See :mod:`.transactions`."""
        return self.transactions.rows(topic)

    def timer_messages(self, topic: Optional[str] = None, state: Optional[str] = None) -> list[dict]:
        """The timer messages (sent with a delivery time) of real topic ``topic`` / in ``state`` (pending,
        delivered, rolled, cancelled) as the broker's timer wheel stands. See :mod:`.timers`."""
        return self.timers.rows(topic, state)

    def message_traces(self, trace_topic: str = RMQ_SYS_TRACE_TOPIC, msg_id: Optional[str] = None,
                       trace_type: Optional[str] = None) -> list[dict]:
        """The trace records clients with message trace on wrote to ``trace_topic`` (of message ``msg_id`` / of
        ``trace_type``: Pub, SubBefore, SubAfter, EndTransaction, Recall), decoded. See :mod:`.traces`."""
        return self.traces.rows(trace_topic, msg_id, trace_type)

    def compaction_topics(self) -> list[str]:
        """The topics with ``cleanup.policy=COMPACTION`` in the broker's topic table, sorted."""
        return self.compacted.topics()

    def compacted_values(self, topic: Optional[str] = None) -> list[dict]:
        """The latest value per key of each queue of the compaction topics (of ``topic``, which must be one): what
        a consumer ends up with. See :mod:`.compaction`."""
        if topic is not None and topic not in self.compaction_topics():
            raise InvalidArgumentError(f"topic {topic!r} is not a compaction topic (cleanup.policy=COMPACTION in "
                                       f"{self.root / 'config'}/topics.json); the compaction topics are "
                                       f"{', '.join(self.compaction_topics()) or 'none'}")
        return self.compacted.rows(topic)

    def compaction_positions(self) -> dict[tuple[str, int], int]:
        """(topic, queueId) → the queue offset the broker's last compaction of that queue went through
        (``compaction/position-checkpoint``); empty when it never compacted. See :mod:`.compaction`."""
        return self.compacted.positions()


__all__ = ["StoreReader", "GetMessageResult", "resolve_store_root", "DEFAULT_BATCH_ROWS"]
