"""``RocketStore``: the facade over one RocketMQ store directory, and the top of the format layer.

``RocketStore.open(path)`` reads (a ``RocketStore``, the :class:`~.read.store_reader.StoreReader`: never modifies
a byte); ``RocketStore.open_writer(path)`` appends (:class:`~.write.appender.StoreWriter`). Nothing else in the package
imports this module, so the layers below it (reader, recovery, appender, the job tools) never import upwards.

It is also the one entry point of the layers above (Spark, CLI): besides the store it exports the sink's job
steps (:func:`stage` per task, :func:`publish_staged` / :func:`discard_staged` on the driver) and the few
helpers they share with the format (subscriptions, Java hashes, host and msgId parsing, the store lock).
"""

from __future__ import annotations

from typing import Optional

from ..errors import InvalidArgumentError
from .files.byte_source import as_path, forget_listings, glob_remote, is_remote, scandir
from .files.consumer_offsets import CommittedOffset, load_consumer_offsets
from .files.file_reads import counting
from .files.locking import StoreLock, store_lock_held
from .files.remote_fs import FsOptions
from .files.sizes import StoreSizes
from .files.store_location import local_store_path, store_path
from .files.topic_config import (
    broker_managed,
    existing_queue_counts,
    load_topic_table,
    queue_dir_counts,
    register_topics,
    topics_path,
)
from .files.variant import FEATURES as VARIANT_FEATURES
from .files.variant import (
    BrokerSettings,
    StoreVariant,
    detect_variant,
    dledger_logs,
    parse_variant,
    refuse_variant_writes,
)
from .format.codec import decode_msg_id, parse_host
from .format.columns import COLUMNS, RAW_COLUMNS, arrow_schema
from .format.java_hash import java_string_hashes
from .format.subscription import Subscription
from .format.timer import TIMER_STATES
from .format.trace import RMQ_SYS_TRACE_TOPIC, TRACE_TYPES
from .read.compaction import COMPACTED_FIELDS
from .read.group_offsets import GROUP_OFFSET_FIELDS, group_positions
from .read.live_tail import LiveTail
from .read.messages import GetMessageResult
from .read.queue_reads import DEFAULT_BATCH_ROWS
from .read.store_reader import StoreReader, resolve_store_root
from .read.tiered_history import LOCAL, TIERED, QueueRanges, StoreHistory, TieredQueues
from .read.timers import TIMER_MESSAGE_FIELDS
from .read.traces import MESSAGE_TRACE_FIELDS
from .read.transactions import PENDING_TRANSACTION_FIELDS
from .read.verify import verify_store
from .write.appender import DEFAULT_STORE_HOST, StoreWriter
from .write.producer import COMPRESS_THRESHOLD, QUEUE_SELECTORS, flag_compression, select_queues
from .write.publish import new_job_id, publish_staged
from .write.staged_jobs import STATE_OPEN, parse_age, remove_staged_jobs, staged_jobs
from .write.staging import discard_staged, stage

MODE_READ = "r"
MODE_APPEND = "a"


class RocketStore(StoreReader):
    """Read-only view of a RocketMQ store; :meth:`open_writer` opens one for appending."""

    @staticmethod
    def open_writer(path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
                    index_max_entries=None, variant=None, **writer_options) -> StoreWriter:
        """Open (creating if absent) the local store at ``path`` for appending (see :meth:`StoreWriter.open`):
        sizes as for :meth:`open`, ``store_host``, ``max_message_size``, ``lock`` and ``recover`` as the writer
        takes them. Writers append only to default-layout stores."""
        return StoreWriter.open(path, commit_log_file_size=commit_log_file_size,
                                consume_queue_file_size=consume_queue_file_size, index_hash_slots=index_hash_slots,
                                index_max_entries=index_max_entries, variant=variant, **writer_options)

    @classmethod
    def open(cls, path, mode: str = MODE_READ, *, commit_log_file_size=None, consume_queue_file_size=None,
             index_hash_slots=None, index_max_entries=None, check_crc_on_recover: bool = True,
             valid_end: Optional[int] = None, variant=None, lazy_queues: bool = False, fs_options=None,
             batch_topics=None, batch_consume_queue_file_size=None, force_verify_prop_crc=None,
             dledger_self_id=None, dledger_peers=None, commit_log_path=None, trust_recorded_end: bool = False,
             **writer_options):
        """Open the store at ``path`` for reading (``mode="a"`` is :meth:`open_writer`'s earlier spelling and
        forwards to it; new code opens writers there).

        Sizes are detected from the files; pass them when a store has none of a kind or detection is
        ambiguous. ``valid_end`` skips recovery when the caller already knows the commit log's valid end.
        ``variant`` names the storage variant (``"default"``, or features such as ``"prop-crc,lmq"``, see
        :mod:`.files.variant`) where the files leave it open; it is detected otherwise and reported as
        ``store.variant``. ``trust_recorded_end`` takes the commit
        log's end from rocketstore's last writer's record while it holds (no recovery walk; see
        :mod:`.files.known_end`).

        ``path`` may be a remote URI (``s3://bucket/archive/broker-a/store``, also ``s3a``, ``gs``, ``hdfs``,
        ``webhdfs``, ``abfs``), read through ``pyarrow.fs`` with ``fs_options`` such as ``{"endpoint": "host:9000",
        "region": "eu-west-1", "anonymous": True}`` (see :class:`FsOptions`); credentials come from the standard
        chain unless given.

        The broker settings the files leave open (:class:`BrokerSettings`, the flags of a variant harness's
        ``store.args``): ``batch_topics`` (topics with ``queue.type=BatchCQ``, a list or comma-separated),
        ``batch_consume_queue_file_size`` (``mapperFileSizeBatchConsumeQueue``), ``force_verify_prop_crc``
        (``forceVerifyPropCRC``), ``dledger_self_id`` (the ``dledger-<selfId>`` log to read), ``dledger_peers``
        (``dLegerPeers``: several peers serve only the committed entries), ``commit_log_path`` (the broker's
        ``storePathCommitLog`` when it is not ``<path>/commitlog``: a directory, or several separated by commas or
        given as a list, read as one commit log as the broker's multi-path queue reads them).
        """
        settings = BrokerSettings.of(batch_topics, batch_consume_queue_file_size, force_verify_prop_crc,
                                     dledger_self_id, dledger_peers, commit_log_path)
        if mode == MODE_APPEND:
            return cls.open_writer(path, commit_log_file_size=commit_log_file_size,
                                   consume_queue_file_size=consume_queue_file_size, index_hash_slots=index_hash_slots,
                                   index_max_entries=index_max_entries, variant=variant, **writer_options)
        if mode != MODE_READ:
            raise InvalidArgumentError(f"mode must be 'r' (read) or 'a' (append), found {mode!r}")
        if writer_options:
            raise InvalidArgumentError(f"unknown option(s) for reading: {sorted(writer_options)}")
        return super().open(path, commit_log_file_size=commit_log_file_size,
                            consume_queue_file_size=consume_queue_file_size, index_hash_slots=index_hash_slots,
                            index_max_entries=index_max_entries, check_crc_on_recover=check_crc_on_recover,
                            valid_end=valid_end, variant=variant, lazy_queues=lazy_queues, settings=settings,
                            fs_options=fs_options, trust_recorded_end=trust_recorded_end)

    @classmethod
    def open_history(cls, path=None, *, tiered_path=None, tiered_cluster: Optional[str] = None,
                     tiered_broker: Optional[str] = None, **open_options) -> StoreHistory:
        """A queue-ordered history of a broker's tiered storage (``tiered_path``: its ``tieredStoreFilePath``,
        POSIX file backend) and its local store (``path``, opened with :meth:`open`'s ``open_options``), or of
        either alone: :class:`~.read.tiered_history.StoreHistory`. ``tiered_cluster`` and ``tiered_broker`` pick
        one broker's segments where several brokers share the directory. See ``docs/tiered.md``."""
        if path is None and tiered_path is None:
            raise InvalidArgumentError("open_history needs a local store path, a tiered_path, or both")
        tiered = None if tiered_path is None else TieredQueues(tiered_path, tiered_cluster, tiered_broker)
        local = None if path is None else cls.open(path, **open_options)
        return StoreHistory(local, tiered)


__all__ = ["RocketStore", "StoreWriter", "GetMessageResult", "LiveTail", "StoreSizes", "Subscription", "StoreLock",
           "store_lock_held",
           "DEFAULT_BATCH_ROWS", "DEFAULT_STORE_HOST", "COLUMNS", "RAW_COLUMNS", "arrow_schema", "resolve_store_root",
           "stage", "publish_staged", "discard_staged", "new_job_id", "existing_queue_counts",
           "java_string_hashes", "parse_host", "decode_msg_id", "local_store_path", "store_path", "FsOptions",
           "is_remote", "forget_listings", "counting", "glob_remote", "scandir", "as_path",
           # storage variants: detection, and the writers' refusal of non-default stores
           "StoreVariant", "BrokerSettings", "detect_variant", "parse_variant", "VARIANT_FEATURES",
           "refuse_variant_writes", "dledger_logs",
           # the CLI's store tools: verification, staged jobs, the broker's topic table
           # the producer's rules: queue selection and body compression
           "select_queues", "flag_compression", "QUEUE_SELECTORS", "COMPRESS_THRESHOLD",
           "verify_store", "STATE_OPEN", "staged_jobs", "remove_staged_jobs", "parse_age", "broker_managed",
           "load_topic_table", "queue_dir_counts", "register_topics", "topics_path",
           # consumer groups: the broker's committed offsets
           "CommittedOffset", "load_consumer_offsets", "group_positions", "GROUP_OFFSET_FIELDS",
           # tiered history: a broker's tiered storage alone or with its local store
           "StoreHistory", "TieredQueues", "QueueRanges", "LOCAL", "TIERED",
           # special topics: unresolved transactions, timer messages, message traces
           "PENDING_TRANSACTION_FIELDS", "TIMER_MESSAGE_FIELDS", "TIMER_STATES", "MESSAGE_TRACE_FIELDS",
           "RMQ_SYS_TRACE_TOPIC", "TRACE_TYPES", "COMPACTED_FIELDS"]
