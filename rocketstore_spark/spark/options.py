"""Read options of ``spark.read.format("rocketstore")``: parsed once into a frozen dataclass, with fix-it errors.

Option names are case-insensitive (Spark lower-cases them); unknown options are rejected so that a typo
never silently reads something else.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from ..errors import InvalidArgumentError, StoreFormatError, StoreNotFoundError
from ..store import (
    BrokerSettings,
    FsOptions,
    Subscription,
    TieredQueues,
    dledger_logs,
    glob_remote,
    group_positions,
    is_remote,
    parse_variant,
    resolve_store_root,
    store_path,
)
from ..store.format import layout as L
from .option_spec import (
    BOOLEAN,
    CHOICE,
    INTEGER,
    OFFSETS,
    PATH,
    STRING,
    TIMESTAMP,
    OptionSpec,
    canonical_names,
    did_you_mean,
    parse_timestamp,
)

EARLIEST = "earliest"
LATEST = "latest"
SCAN_AUTO = "auto"  # the planner chooses queue or commitlog from cheap estimates
SCAN_QUEUE = "queue"  # consume-queue plan
SCAN_COMMITLOG = "commitlog"  # commit-log-ordered plan: the rows of the queue plan, read in commit-log order
SCAN_RAW = "raw"  # every record of the commit log, those no consume queue references included
SCAN_MODES = (SCAN_AUTO, SCAN_QUEUE, SCAN_COMMITLOG, SCAN_RAW)
TABLE_MESSAGES = "messages"  # the messages of the store (the default)
TABLE_CONSUMER_OFFSETS = "consumerOffsets"  # the consumer groups' committed offsets, with their lag
TABLE_PENDING_TRANSACTIONS = "pendingTransactions"  # transactional messages waiting on a commit or rollback
TABLE_TIMER_MESSAGES = "timerMessages"  # messages sent with a delivery time, and their state in the timer wheel
TABLE_MESSAGE_TRACES = "messageTraces"  # the clients' trace records, decoded
TABLE_COMPACTED_VALUES = "compactedValues"  # the latest value per key of the compaction topics
TABLES = (TABLE_MESSAGES, TABLE_CONSUMER_OFFSETS, TABLE_PENDING_TRANSACTIONS, TABLE_TIMER_MESSAGES,
          TABLE_MESSAGE_TRACES, TABLE_COMPACTED_VALUES)
#: the tables that are not messages: batch reads only, one partition per store
SIDE_TABLES = TABLES[1:]
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
DEFAULT_MAX_MESSAGES_PER_PARTITION = 1_000_000
# Twice Spark's 128 MB for its file sources: a Python data source's task costs Spark about 50 ms of a core by
# itself (Arrow stream set-up, worker round trips, the daemon's bookkeeping), ten times a JVM file split's; at
# 256 MiB a task decodes for several times that, and a 1 GiB commit-log file still makes four tasks
DEFAULT_MAX_BYTES_PER_PARTITION = 256 << 20
# ... while a read smaller than two of those is still split in two (Spark runs at least two tasks at a time
# anywhere), each half at least this much: below it, a second task costs more than it saves
MIN_SPLIT_BYTES = 64 << 20
MIN_BYTES_PER_PARTITION = 1 << 16

_FS_SIZES = "the broker's `{}`, for stores where it cannot be detected from the files (no file of the kind yet)"

#: every read option, once: validation, the CLI's mirrored flags and the documentation's tables come from here
READ_SPEC = (
    OptionSpec("path", PATH, "a store directory or URI (`s3://`, `gs://`, `hdfs://`, `webhdfs://`, `abfs://`, "
               "`file://`), a comma-separated list or a glob; several stores are several brokers. Usually given "
               "as `load(path)`"),
    OptionSpec("paths", PATH, "the same as `path`"),
    OptionSpec("brokerName", STRING, "the `brokerName` column's value, for a single store",
               shown_default="the store directory's name (its parent's when it is called `store`)"),
    OptionSpec("topics", STRING, "comma-separated topics to read; each must exist in the store",
               shown_default="all but system, retry and LMQ topics", cli=("--topics",)),
    OptionSpec("topicPattern", STRING, "a regular expression on topic names (instead of `topics`)"),
    OptionSpec("includeSystemTopics", BOOLEAN, "include `RMQ_SYS_*`, `SCHEDULE_TOPIC_XXXX`, `rmq_sys_*`, "
               "`%RETRY%` and `%DLQ%` topics", default=False),
    OptionSpec("includeRetryTopics", BOOLEAN, "include `%RETRY%` and `%DLQ%` topics", default=False),
    OptionSpec("includeLmqTopics", BOOLEAN, "include `%LMQ%` light message queues (naming one in `topics` "
               "selects it too)", default=False),
    OptionSpec("tags", STRING, "subscription expression such as `TagA || TagB`: the consume queue's tag hash "
               "filters first, then the real tag is checked", shown_default="`*` (every tag)",
               cli=("--tags",)),
    OptionSpec("startingOffsets", OFFSETS, "`earliest`, `latest` or JSON `{\"topic\": {\"0\": 42}}` "
               "(`{\"broker\": {...}}` for several stores; -2 earliest, -1 latest); topics and queues named must "
               "exist", shown_default="`earliest` (streams: `latest`)"),
    OptionSpec("endingOffsets", OFFSETS, "the same forms, exclusive", default=LATEST, scopes=("read",)),
    OptionSpec("startingTimestamp", TIMESTAMP, "messages stored at or after this time: epoch milliseconds or "
               "ISO 8601 (`2024-06-01T00:00:00Z`, UTC without a zone)",
               cli=("--since",)),
    OptionSpec("endingTimestamp", TIMESTAMP, "messages stored before this time, in the same forms; after "
               "`startingTimestamp`", scopes=("read",), cli=("--until",)),
    OptionSpec("startingOffsetsByTimestamp", OFFSETS, "per queue, the first message stored at or after a time: "
               "JSON `{\"topic\": {\"0\": 1717200000000}}` of epoch milliseconds or ISO 8601 strings "
               "(`{\"broker\": {...}}` for several stores); queues not named start as without it (earliest; "
               "streams latest); instead of `startingOffsets`, `startingTimestamp` and `startingGroup`"),
    OptionSpec("endingOffsetsByTimestamp", OFFSETS, "per queue, the first message stored at or after a time, "
               "exclusive, in the same form; queues not named end at their latest offset; instead of "
               "`endingOffsets` and `endingTimestamp`", scopes=("read",)),
    OptionSpec("maxMessagesPerPartition", INTEGER, "queue plans: ranges are split at this many messages (matching "
               "messages with a tag filter) and small queues' ranges packed up to it",
               default=DEFAULT_MAX_MESSAGES_PER_PARTITION, minimum=1),
    OptionSpec("maxBytesPerPartition", INTEGER, "commit-log plans: the bytes of commit log each task scans "
               "(equal parts, running on over commit-log files' ends); queue plans: the estimated bytes of ranges "
               "packed into one partition. Unset, a read smaller than two partitions of the default is split in "
               "two (halves of at least 64 MiB), and a commit-log plan takes the even number of equal parts "
               "nearest to the default's size (up to a quarter larger)",
               default=DEFAULT_MAX_BYTES_PER_PARTITION, minimum=MIN_BYTES_PER_PARTITION),
    OptionSpec("minPartitions", INTEGER, "split the largest ranges until there are at least this many "
               "partitions", minimum=1),
    OptionSpec("scanMode", CHOICE, "how a store is read: `auto` chooses per store (`rocketstore plan` shows the "
               "choice and why); `queue` reads through the consume queues; `commitlog` scans the commit log in "
               "order and returns the same rows; `raw` returns every record of the commit log, including those "
               "no queue references", default=SCAN_AUTO, choices=SCAN_MODES, cli=("--scan-mode",)),
    OptionSpec("failOnDataLoss", BOOLEAN, "requested messages whose commit-log files expired, are missing or are "
               "cut or torn are an error naming the queue, range, count and file; false skips them with a warning",
               default=True),
    OptionSpec("verifyCrc", BOOLEAN, "check every record's body CRC (and `__CRC32#` property CRC) while reading",
               default=False),
    OptionSpec("commitLogFileSize", INTEGER, _FS_SIZES.format("mappedFileSizeCommitLog"), minimum=1,
               shown_default="detected", cli=("--commit-log-file-size", "--commitlog-size")),
    OptionSpec("consumeQueueFileSize", INTEGER, _FS_SIZES.format("mappedFileSizeConsumeQueue"), minimum=1,
               shown_default="detected", cli=("--consume-queue-file-size", "--cq-size")),
    OptionSpec("indexHashSlots", INTEGER, _FS_SIZES.format("maxHashSlotNum") + "; only key lookups need it",
               minimum=1, shown_default="detected", cli=("--index-hash-slots", "--index-slots")),
    OptionSpec("indexMaxEntries", INTEGER, _FS_SIZES.format("maxIndexNum") + "; only key lookups need it",
               minimum=1, shown_default="detected", cli=("--index-max-entries", "--index-num")),
    OptionSpec("variant", STRING, "the storage variant where the files leave it open: `default`, or features "
               "among `dledger`, `rocksdb-cq`, `batch-cq`, `lmq`, `prop-crc` joined by `,`",
               shown_default="detected", cli=("--variant",)),
    OptionSpec("batchTopics", STRING, "BatchCQ topics (comma-separated) besides those the files show",
               cli=("--batch-topics",)),
    OptionSpec("batchConsumeQueueFileSize", INTEGER, "the broker's `mapperFileSizeBatchConsumeQueue`, for batch "
               "queues without files", minimum=1, shown_default="detected",
               cli=("--batch-consume-queue-file-size", "--bcq-size")),
    OptionSpec("forceVerifyPropCrc", BOOLEAN, "the broker's `forceVerifyPropCRC`: true checks records by their "
               "`__CRC32#` property only, false by the body CRC only", shown_default="unset: both",
               cli=("--force-verify-prop-crc",)),
    OptionSpec("dledgerSelfId", STRING, "`dLegerSelfId`: which `dledger-<selfId>/data` log to read when a store "
               "has several", cli=("--dledger-self",)),
    OptionSpec("dledgerPeers", STRING, "`dLegerPeers` (`n0-host:port;n1-host:port`): with several peers only the "
               "entries DLedger's checkpoint marks committed are served", shown_default="one peer",
               cli=("--dledger-peers",)),
    # consumer groups: the broker's committed offsets (config/consumerOffset.json, lmqConsumerOffset.json)
    OptionSpec("table", CHOICE, "what a batch read returns: `messages`; `consumerOffsets`: one row per "
               "consumer group and queue with the group's committed offset, the queue's min and max offsets, the "
               "lag and the store time of the group's next message (docs/consumer-groups.md); "
               "`pendingTransactions`: the transactional messages still waiting on a commit or rollback; "
               "`timerMessages`: the messages sent with a delivery time, pending, delivered, rolled or cancelled; "
               "`messageTraces`: the trace records of clients with message trace on, decoded; "
               "`compactedValues`: the latest value per key of the compaction topics "
               "(docs/special-topics.md). `topics` selects the real (traced) topics of these tables",
               default=TABLE_MESSAGES, choices=TABLES, scopes=("read",)),
    OptionSpec("traceTopic", STRING, "with `table` `messageTraces`: the topic the clients write their traces to "
               "(their `customizedTraceTopic`)", default=DEFAULT_TRACE_TOPIC, scopes=("read",),
               cli=("--trace-topic",)),
    OptionSpec("startingGroup", STRING, "start where a consumer group of the store's broker stands: its "
               "committed offsets are the starting offsets (0 for the other queues of its topics; queues of "
               "other topics start as with JSON `startingOffsets`: earliest, streams latest); instead of "
               "`startingOffsets`"),
    OptionSpec("commitLogPath", PATH, "the broker's `storePathCommitLog` when its commit log is not the store's "
               "`commitlog/`: a directory, or several separated by `,` (a commit log split across disks, read as "
               "the broker's multi-path queue reads it); the path is then the broker's `storePathRootDir`",
               shown_default="`<path>/commitlog`", cli=("--commitlog-path",)),
    OptionSpec("tieredStorePath", PATH, "the broker's `tieredStoreFilePath` (tiered storage, POSIX file backend): "
               "each queue's history there is read with the local store's, queue-ordered, each offset once (the "
               "local store's row where both hold it); without `path`, the tiered storage alone. Tiered rows carry "
               "their per-queue tiered `commitLogOffset` and the `msgId` built from it (see Tiered history). Times, "
               "`startingGroup` offsets and `uniqKey` filters are looked up in both, as the broker does. A stream "
               "starts in the tiered storage (earliest) and follows the local store",
               cli=("--tiered-path",)),
    OptionSpec("maxMessagesPerTrigger", INTEGER, "messages per micro-batch, shared across queues in proportion "
               "to their backlog", minimum=1, scopes=("stream",)),
    OptionSpec("maxBytesPerTrigger", INTEGER, "message bytes (stored record sizes) per micro-batch, shared across "
               "queues in proportion to their backlog; a soft bound: every queue with a backlog advances by at "
               "least one message. With `maxMessagesPerTrigger` both bounds hold", minimum=1, scopes=("stream",)),
)
SPEC_BY_NAME = {s.name: s for s in READ_SPEC}
READ_OPTIONS = tuple(s.name for s in READ_SPEC if "stream" not in s.scopes or "read" in s.scopes)
STREAM_OPTIONS = tuple(s.name for s in READ_SPEC if s.scopes == ("stream",))

Offsets = Union[str, dict]


@dataclass(frozen=True)
class StoreRef:
    """One store (broker) of a read: its directory and the name its rows carry."""

    path: str
    broker: str
    fs_options: tuple = ()  # (name, value) pairs for a remote store's filesystem (FsOptions), sorted


def parse_fs_options(opts: Mapping[str, str]) -> tuple:
    """The ``fs.*`` options, validated now (at ``load()``), as sorted (name, value) pairs."""
    given = {k: v for k, v in opts.items() if k.lower().startswith(FS_PREFIX)}
    return tuple(sorted(FsOptions.parse(given).as_dict().items()))


@dataclass(frozen=True)
class ReadOptions:
    stores: tuple[StoreRef, ...]
    topics: Optional[tuple[str, ...]] = None
    topic_pattern: Optional[str] = None
    include_system_topics: bool = False
    include_retry_topics: bool = False
    include_lmq_topics: bool = False
    tags: Optional[str] = None
    starting_offsets: Offsets = EARLIEST
    ending_offsets: Offsets = LATEST
    starting_timestamp: Optional[int] = None
    ending_timestamp: Optional[int] = None
    max_messages_per_partition: int = DEFAULT_MAX_MESSAGES_PER_PARTITION
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_bytes_per_partition_given: bool = False  # set by the user (else the default, see partition_bytes)
    min_partitions: Optional[int] = None
    scan_mode: str = SCAN_AUTO
    fail_on_data_loss: bool = True
    verify_crc: bool = False
    sizes: dict = field(default_factory=dict)
    max_messages_per_trigger: Optional[int] = None
    max_bytes_per_trigger: Optional[int] = None
    # per-queue times (epoch ms), JSON offsets' shape: startingOffsetsByTimestamp / endingOffsetsByTimestamp
    starting_timestamps: Optional[dict] = None
    ending_timestamps: Optional[dict] = None
    variant: Optional[str] = None  # the storage variant where the files leave it open (None: detected)
    # the broker settings the files leave open (BrokerSettings, as RocketStore.open keyword arguments)
    settings: dict = field(default_factory=dict)
    table: str = TABLE_MESSAGES
    starting_group: Optional[str] = None  # startingOffsets were taken from this consumer group's committed ones
    tiered_path: Optional[str] = None  # tieredStorePath: the broker's tiered storage read with the store
    trace_topic: str = DEFAULT_TRACE_TOPIC  # table messageTraces: the clients' trace topic

    def wants_topic(self, topic: str) -> bool:
        """Is ``topic`` selected by topics / topicPattern / the system- and retry-topic defaults?"""
        if self.topics is not None:
            return topic in self.topics
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        if L.SYSTEM_TOPIC_PATTERN.match(topic) and not self.include_system_topics:
            return False
        if L.RETRY_TOPIC_PATTERN.match(topic) and not (self.include_retry_topics or self.include_system_topics):
            return False
        if topic.startswith(L.LMQ_PREFIX) and not self.include_lmq_topics:
            return False  # LMQ rows repeat records of other topics: only when asked for (or named)
        return True


FS_PREFIX = "fs."  # filesystem settings of remote stores: fs.endpoint, fs.region, ... (see FsOptions)


def canonical(options: Mapping[str, str], allowed) -> dict[str, str]:
    """Map lower-cased option names back to their documented spelling; an unknown one is an error naming the
    closest known option. ``fs.*`` options pass through as given (:func:`parse_fs_options` validates them)."""
    specs = [s if isinstance(s, OptionSpec) else OptionSpec(s, STRING, "") for s in allowed]
    return canonical_names(options, specs, FS_PREFIX)


def parse_bool(name: str, value, default: bool) -> bool:
    return OptionSpec(name, BOOLEAN, "", default=default).parse(value)


def parse_int(name: str, value, minimum: int = 0) -> Optional[int]:
    return OptionSpec(name, INTEGER, "", minimum=minimum).parse(value)


def option(opts: Mapping[str, str], name: str):
    """The value of read option ``name`` checked against its definition in :data:`READ_SPEC` (the default when
    absent)."""
    return SPEC_BY_NAME[name].parse(opts.get(name))


def partition_bytes(opts: ReadOptions, total: int) -> int:
    """The bytes each partition of a read of ``total`` bytes gets: ``maxBytesPerPartition`` when the user set it;
    by default at most :data:`DEFAULT_MAX_BYTES_PER_PARTITION`, and half of a smaller read (two tasks), but not
    less than :data:`MIN_SPLIT_BYTES`."""
    if opts.max_bytes_per_partition_given:
        return opts.max_bytes_per_partition
    return min(opts.max_bytes_per_partition, max(MIN_SPLIT_BYTES, -(-int(total) // 2)))


def parse_offsets(name: str, value, multi_store: bool) -> Offsets:
    """``earliest`` / ``latest`` or JSON ``{"topic": {"queueId": offset}}`` (one more level, the broker
    name, when several stores are read). -2 means earliest and -1 latest, as in Spark's Kafka source."""
    if value is None:
        return EARLIEST if name.startswith("starting") else LATEST
    text = str(value).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    example = '{"TopicTest": {"0": 42, "1": -2}}'
    if multi_store:
        example = '{"broker-a": ' + example + "}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"option {name} is neither 'earliest', 'latest' nor JSON ({e.msg} at "
                                   f"character {e.pos}); expected e.g. {example}") from e
    depth = 3 if multi_store else 2

    def check(node, level):
        if level == depth:
            if not isinstance(node, int) or isinstance(node, bool) or node < -2:
                raise InvalidArgumentError(f"option {name}: offsets must be integers >= -2 (-2 earliest, "
                                           f"-1 latest), found {node!r}; expected e.g. {example}")
            return
        if not isinstance(node, dict):
            raise InvalidArgumentError(f"option {name}: expected a JSON object at nesting level {level + 1}, "
                                       f"found {node!r}; expected e.g. {example}")
        for key, child in node.items():
            if level == depth - 1 and not str(key).isdigit():
                raise InvalidArgumentError(f"option {name}: queue ids must be numbers, found {key!r}")
            check(child, level + 1)

    check(parsed, 0)
    return parsed


def parse_timestamps(name: str, value, multi_store: bool) -> Optional[dict]:
    """JSON ``{"topic": {"queueId": time}}`` (one more level, the broker name, when several stores are read) →
    the same shape with epoch milliseconds; times are epoch milliseconds or ISO 8601 strings. None when absent."""
    if value is None:
        return None
    example = '{"TopicTest": {"0": 1717200000000, "1": "2024-06-01T00:00:00Z"}}'
    if multi_store:
        example = '{"broker-a": ' + example + "}"
    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"option {name} is not JSON ({e.msg} at character {e.pos}); expected e.g. "
                                   f"{example}") from e
    depth = 3 if multi_store else 2

    def convert(node, level):
        if level == depth:
            if isinstance(node, bool) or not isinstance(node, (int, str)):
                raise InvalidArgumentError(f"option {name}: times must be epoch milliseconds or ISO 8601 "
                                           f"strings, found {node!r}; expected e.g. {example}")
            return parse_timestamp(name, node)
        if not isinstance(node, dict):
            raise InvalidArgumentError(f"option {name}: expected a JSON object at nesting level {level + 1}, "
                                       f"found {node!r}; expected e.g. {example}")
        for key in node:
            if level == depth - 1 and not str(key).isdigit():
                raise InvalidArgumentError(f"option {name}: queue ids must be numbers, found {key!r}")
        return {str(key): convert(child, level + 1) for key, child in node.items()}

    return convert(parsed, 0)


def resolve_paths(value: str, fs_options: tuple = ()) -> list[str]:
    """A store directory or URI, a comma-separated list or a glob of them → existing store directories."""
    if not value or not str(value).strip():
        raise InvalidArgumentError("no store path: use .load('/path/to/store') or .option('path', ...)")
    out = []
    for part in (p.strip() for p in str(value).split(",")):
        if not part:
            continue
        location = store_path(part, dict(fs_options))  # a remote one: its filesystem set up here
        if is_remote(location):
            matches = glob_remote(location) if glob.has_magic(str(location)) else [str(location)]
        else:
            matches = sorted(glob.glob(str(location))) if glob.has_magic(str(location)) else [str(location)]
        if not matches:
            raise StoreNotFoundError(f"the glob {part!r} matches no store directory")
        out.extend(str(resolve_store_root(m, dict(fs_options))) for m in matches)
    return out


def broker_name_of(path: str) -> str:
    """A store's broker name: its directory name, or its parent's when the directory is called ``store``."""
    p = os.path.normpath(path)
    base = os.path.basename(p)
    return os.path.basename(os.path.dirname(p)) if base == "store" else base


def parse_read_options(options: Mapping[str, str], stream: bool = False) -> ReadOptions:
    """Validate every read option against :data:`READ_SPEC` (the documentation's option tables)."""
    opts = canonical(options, READ_SPEC if stream else [s for s in READ_SPEC if s.name in READ_OPTIONS])
    fs_options = parse_fs_options(opts)
    tiered_path = parse_tiered_path(opts)
    given_path = opts.get("path") or opts.get("paths") or ""
    paths = resolve_paths(given_path, fs_options) if given_path or tiered_path is None else []
    if "brokerName" in opts and len(paths) > 1:
        raise InvalidArgumentError("option brokerName names a single store, but the path gives "
                                   f"{len(paths)} stores; their directory names are used as broker names")
    stores = tuple(StoreRef(p, opts["brokerName"] if "brokerName" in opts else broker_name_of(p),
                            fs_options if is_remote(p) else ()) for p in paths)
    if tiered_path is not None:
        check_tiered_read(opts, stores)
        if not stores:
            stores = (StoreRef("", opts.get("brokerName") or TieredQueues(tiered_path).broker or "tiered"),)
    brokers = [s.broker for s in stores]
    if len(set(brokers)) != len(brokers):
        raise InvalidArgumentError(f"two stores have the same broker name {brokers}; rename a directory")
    if "topics" in opts and "topicPattern" in opts:
        raise InvalidArgumentError("give either topics or topicPattern, not both")
    topics = None
    if "topics" in opts:
        topics = tuple(t.strip() for t in opts["topics"].split(",") if t.strip())
        if not topics:
            raise InvalidArgumentError("option topics is empty; give a comma-separated list of topics")
    if "topicPattern" in opts:
        try:
            re.compile(opts["topicPattern"])
        except re.error as e:
            raise InvalidArgumentError(f"option topicPattern is not a valid regex: {e}") from e
    tags = opts.get("tags")
    if tags is not None:
        Subscription.parse(tags)
    multi = len(stores) > 1
    starting = parse_offsets("startingOffsets", opts.get("startingOffsets"), multi)
    if stream and "startingOffsets" not in opts:
        starting = LATEST  # a stream follows what arrives from now on unless told otherwise (as Kafka's source)
    table = option(opts, "table")
    if "traceTopic" in opts and table != TABLE_MESSAGE_TRACES:
        raise InvalidArgumentError(f"option traceTopic names the clients' trace topic of table {TABLE_MESSAGE_TRACES}; "
                                   f"this read's table is {table}: drop traceTopic, or read "
                                   f'.option("table", "{TABLE_MESSAGE_TRACES}")')
    group = opts.get("startingGroup")
    if group is not None:
        if "startingOffsets" in opts or "startingTimestamp" in opts:
            raise InvalidArgumentError("give either startingGroup or startingOffsets/startingTimestamp, not both")
        starting = group_offsets(group, stores)
    ending = parse_offsets("endingOffsets", opts.get("endingOffsets"), multi)
    starting_times = parse_timestamps("startingOffsetsByTimestamp", opts.get("startingOffsetsByTimestamp"), multi)
    ending_times = parse_timestamps("endingOffsetsByTimestamp", opts.get("endingOffsetsByTimestamp"), multi)
    for name, given, others in (("startingOffsetsByTimestamp", starting_times,
                                 ("startingOffsets", "startingTimestamp", "startingGroup")),
                                ("endingOffsetsByTimestamp", ending_times, ("endingOffsets", "endingTimestamp"))):
        clash = [o for o in others if o in opts]
        if given is not None and clash:
            raise InvalidArgumentError(f"give either {name} or {clash[0]}, not both: both say where queues "
                                       f"{'start' if name.startswith('starting') else 'end'}")
    if "startingOffsets" in opts and "startingTimestamp" in opts:
        raise InvalidArgumentError("give either startingOffsets or startingTimestamp, not both")
    if "endingOffsets" in opts and "endingTimestamp" in opts:
        raise InvalidArgumentError("give either endingOffsets or endingTimestamp, not both")
    if not stream and ending == EARLIEST:
        raise InvalidArgumentError("endingOffsets=earliest would read nothing; use latest or JSON offsets")
    starting_ts, ending_ts = option(opts, "startingTimestamp"), option(opts, "endingTimestamp")
    if starting_ts is not None and ending_ts is not None and starting_ts >= ending_ts:
        raise InvalidArgumentError(
            f"startingTimestamp ({format_ms(starting_ts)}) is not before endingTimestamp ({format_ms(ending_ts)}), "
            "so the read would return nothing; swap them or widen the range")
    scan_mode = option(opts, "scanMode")
    if scan_mode == SCAN_RAW and (isinstance(starting, dict) or isinstance(ending, dict) or
                                  starting_times is not None or ending_times is not None):
        raise InvalidArgumentError("JSON startingOffsets/endingOffsets are queue offsets, which scanMode=raw does not "
                                   "use; filter on commitLogOffset, use timestamps or scanMode=auto/queue/commitlog")
    sizes = {key: option(opts, opt) for key, opt in (
        ("commit_log_file_size", "commitLogFileSize"), ("consume_queue_file_size", "consumeQueueFileSize"),
        ("index_hash_slots", "indexHashSlots"), ("index_max_entries", "indexMaxEntries")) if opt in opts}
    settings = BrokerSettings.of(
        batch_topics=opts.get("batchTopics"),
        batch_consume_queue_file_size=option(opts, "batchConsumeQueueFileSize"),
        force_verify_prop_crc=option(opts, "forceVerifyPropCrc"),
        dledger_self_id=opts.get("dledgerSelfId"), dledger_peers=opts.get("dledgerPeers"),
        commit_log_path=opts.get("commitLogPath")).as_options()
    if "commit_log_path" in settings and len(stores) > 1:
        raise InvalidArgumentError(f"option commitLogPath names one broker's commit-log directories, but the path "
                                   f"gives {len(stores)} stores; read each store with its own commitLogPath")
    for ref in stores if "dledger_self_id" in settings else ():
        logs = [p.parent.name for p in dledger_logs(ref.path)]
        if f"dledger-{settings['dledger_self_id']}" not in logs:
            raise InvalidArgumentError(f"option dledgerSelfId: no DLedger log for self id "
                                       f"{settings['dledger_self_id']!r} in {ref.path} (found {logs or 'none'})")
    return ReadOptions(
        stores=stores, topics=topics, topic_pattern=opts.get("topicPattern"),
        include_system_topics=option(opts, "includeSystemTopics"),
        include_retry_topics=option(opts, "includeRetryTopics"),
        include_lmq_topics=option(opts, "includeLmqTopics"),
        tags=tags, starting_offsets=starting, ending_offsets=ending,
        starting_timestamp=starting_ts, ending_timestamp=ending_ts,
        max_messages_per_partition=option(opts, "maxMessagesPerPartition"),
        max_bytes_per_partition=option(opts, "maxBytesPerPartition"),
        max_bytes_per_partition_given=opts.get("maxBytesPerPartition") is not None,
        min_partitions=option(opts, "minPartitions"),
        scan_mode=scan_mode,
        fail_on_data_loss=option(opts, "failOnDataLoss"),
        verify_crc=option(opts, "verifyCrc"),
        sizes=sizes,
        max_messages_per_trigger=option(opts, "maxMessagesPerTrigger"),
        max_bytes_per_trigger=option(opts, "maxBytesPerTrigger"),
        starting_timestamps=starting_times, ending_timestamps=ending_times,
        variant=None if opts.get("variant") is None else "+".join(parse_variant(opts["variant"])) or "default",
        settings=settings, table=table, starting_group=group, tiered_path=tiered_path,
        trace_topic=option(opts, "traceTopic"),
    )


def parse_tiered_path(opts: Mapping[str, str]) -> Optional[str]:
    """``tieredStorePath``: a local directory holding a broker's tiered segments (checked now, at ``load()``)."""
    value = opts.get("tieredStorePath")
    if value is None:
        return None
    if is_remote(str(value)):
        raise InvalidArgumentError(f"option tieredStorePath must be a local directory (or one every executor "
                                   f"mounts), found the URI {value!r}; copy the tiered segments to a mounted path")
    try:
        TieredQueues(value)  # a directory of one cluster's and broker's segments, or an error saying what was found
    except StoreFormatError as e:
        raise InvalidArgumentError(f"option tieredStorePath: {e}") from e
    return str(value)


def check_tiered_read(opts: Mapping[str, str], stores) -> None:
    """The options a read with ``tieredStorePath`` cannot honour, refused at ``load()``."""
    if len(stores) > 1:
        raise InvalidArgumentError(f"option tieredStorePath holds one broker's tiered storage, but the path gives "
                                   f"{len(stores)} stores; read each broker with its own tieredStorePath")
    if "startingGroup" in opts and not stores:
        raise InvalidArgumentError("option startingGroup reads the group's committed offsets from the local store "
                                   "(config/consumerOffset.json), but this read has the tiered storage alone: give "
                                   "the broker's store as the path too, or startingOffsets")
    if opts.get("scanMode", SCAN_AUTO).lower() not in (SCAN_AUTO, SCAN_QUEUE):
        raise InvalidArgumentError(f"option scanMode={opts['scanMode']} reads one commit log; with tieredStorePath "
                                   f"the history is read per queue: use scanMode=auto or queue")
    if opts.get("table", TABLE_MESSAGES) != TABLE_MESSAGES:
        raise InvalidArgumentError("option tieredStorePath reads messages; table=consumerOffsets reads the local "
                                   "store alone: drop one of the two options")


def group_offsets(group: str, stores) -> dict:
    """Where consumer ``group`` stands as JSON startingOffsets (``{broker: ...}`` for several stores): its
    committed offsets, and 0 for the other queues of the topics it consumes (:func:`group_positions`); a group
    no store's broker knows is an error listing the groups there are."""
    per_store, known = {}, set()
    for ref in stores:
        committed = group_positions(resolve_store_root(ref.path, dict(ref.fs_options)))
        known.update(c.group for c in committed)
        node: dict = {}
        for c in committed:
            if c.group == group:
                node.setdefault(c.topic, {})[str(c.queue_id)] = c.offset
        per_store[ref.broker] = node
    if not any(per_store.values()):
        raise InvalidArgumentError(f"option startingGroup: consumer group {group!r} has no committed offset in "
                                   f"config/consumerOffset.json of {', '.join(s.path for s in stores)}"
                                   f"{did_you_mean(group, known)}; the groups there are "
                                   f"{', '.join(sorted(known)) or 'none'}")
    return per_store if len(stores) > 1 else per_store[stores[0].broker]


def format_ms(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time, for messages."""
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")

