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

from ..errors import InvalidArgumentError, StoreNotFoundError
from ..store import (
    BrokerSettings,
    FsOptions,
    Subscription,
    dledger_logs,
    glob_remote,
    is_remote,
    parse_variant,
    resolve_store_root,
    store_path,
)
from ..store.format import layout as L

EARLIEST = "earliest"
LATEST = "latest"
SCAN_AUTO = "auto"  # the planner chooses queue or commitlog from cheap estimates
SCAN_QUEUE = "queue"  # consume-queue plan
SCAN_COMMITLOG = "commitlog"  # commit-log-ordered plan: the rows of the queue plan, read in commit-log order
SCAN_RAW = "raw"  # every record of the commit log, those no consume queue references included
SCAN_MODES = (SCAN_AUTO, SCAN_QUEUE, SCAN_COMMITLOG, SCAN_RAW)
DEFAULT_MAX_MESSAGES_PER_PARTITION = 1_000_000
DEFAULT_MAX_BYTES_PER_PARTITION = 128 << 20
MIN_BYTES_PER_PARTITION = 1 << 16

READ_OPTIONS = (
    "path", "paths", "brokerName", "topics", "topicPattern", "includeSystemTopics", "includeRetryTopics", "tags",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp", "maxMessagesPerPartition",
    "maxBytesPerPartition", "minPartitions", "scanMode", "failOnDataLoss", "verifyCrc", "commitLogFileSize",
    "consumeQueueFileSize", "indexHashSlots", "indexMaxEntries", "variant", "includeLmqTopics", "batchTopics",
    "batchConsumeQueueFileSize", "forceVerifyPropCrc", "dledgerSelfId", "dledgerPeers",
)
STREAM_OPTIONS = ("maxMessagesPerTrigger",)

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
    min_partitions: Optional[int] = None
    scan_mode: str = SCAN_AUTO
    fail_on_data_loss: bool = True
    verify_crc: bool = False
    sizes: dict = field(default_factory=dict)
    max_messages_per_trigger: Optional[int] = None
    variant: Optional[str] = None  # the storage variant where the files leave it open (None: detected)
    # the broker settings the files leave open (BrokerSettings, as RocketStore.open keyword arguments)
    settings: dict = field(default_factory=dict)

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
    """Map lower-cased option names back to their documented spelling; reject unknown ones. ``fs.*`` options
    pass through as given (:func:`parse_fs_options` validates them)."""
    by_lower = {name.lower(): name for name in allowed}
    out = {}
    for key, value in options.items():
        if key.lower().startswith(FS_PREFIX):
            out[key] = value
            continue
        name = by_lower.get(key.lower())
        if name is None:
            raise InvalidArgumentError(
                f"unknown option {key!r} for rocketstore; known options are: {', '.join(sorted(allowed))}")
        out[name] = value
    return out


def parse_bool(name: str, value, default: bool) -> bool:
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name} must be true or false, found {value!r}")


def parse_int(name: str, value, minimum: int = 0) -> Optional[int]:
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError as e:
        raise InvalidArgumentError(f"option {name} must be an integer, found {value!r}") from e
    if number < minimum:
        raise InvalidArgumentError(f"option {name} must be >= {minimum}, found {number}")
    return number


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
    """Validate every read option (see the README's option table)."""
    opts = canonical(options, READ_OPTIONS + (STREAM_OPTIONS if stream else ()))
    fs_options = parse_fs_options(opts)
    paths = resolve_paths(opts.get("path") or opts.get("paths") or "", fs_options)
    if "brokerName" in opts and len(paths) > 1:
        raise InvalidArgumentError("option brokerName names a single store, but the path gives "
                                   f"{len(paths)} stores; their directory names are used as broker names")
    stores = tuple(StoreRef(p, opts["brokerName"] if "brokerName" in opts else broker_name_of(p),
                            fs_options if is_remote(p) else ()) for p in paths)
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
    ending = parse_offsets("endingOffsets", opts.get("endingOffsets"), multi)
    if "startingOffsets" in opts and "startingTimestamp" in opts:
        raise InvalidArgumentError("give either startingOffsets or startingTimestamp, not both")
    if "endingOffsets" in opts and "endingTimestamp" in opts:
        raise InvalidArgumentError("give either endingOffsets or endingTimestamp, not both")
    if not stream and ending == EARLIEST:
        raise InvalidArgumentError("endingOffsets=earliest would read nothing; use latest or JSON offsets")
    scan_mode = str(opts.get("scanMode", SCAN_AUTO)).lower()
    if scan_mode not in SCAN_MODES:
        raise InvalidArgumentError(f"option scanMode must be one of {', '.join(SCAN_MODES)}, found {scan_mode!r}")
    if scan_mode == SCAN_RAW and (isinstance(starting, dict) or isinstance(ending, dict)):
        raise InvalidArgumentError("JSON startingOffsets/endingOffsets are queue offsets, which scanMode=raw does not "
                                   "use; filter on commitLogOffset, use timestamps or scanMode=auto/queue/commitlog")
    sizes = {key: parse_int(opt, opts.get(opt), 1) for key, opt in (
        ("commit_log_file_size", "commitLogFileSize"), ("consume_queue_file_size", "consumeQueueFileSize"),
        ("index_hash_slots", "indexHashSlots"), ("index_max_entries", "indexMaxEntries")) if opt in opts}
    settings = BrokerSettings.of(
        batch_topics=opts.get("batchTopics"),
        batch_consume_queue_file_size=parse_int("batchConsumeQueueFileSize", opts.get("batchConsumeQueueFileSize"), 1),
        force_verify_prop_crc=None if opts.get("forceVerifyPropCrc") is None
        else parse_bool("forceVerifyPropCrc", opts["forceVerifyPropCrc"], False),
        dledger_self_id=opts.get("dledgerSelfId"), dledger_peers=opts.get("dledgerPeers")).as_options()
    for ref in stores if "dledger_self_id" in settings else ():
        logs = [p.parent.name for p in dledger_logs(ref.path)]
        if f"dledger-{settings['dledger_self_id']}" not in logs:
            raise InvalidArgumentError(f"option dledgerSelfId: no DLedger log for self id "
                                       f"{settings['dledger_self_id']!r} in {ref.path} (found {logs or 'none'})")
    return ReadOptions(
        stores=stores, topics=topics, topic_pattern=opts.get("topicPattern"),
        include_system_topics=parse_bool("includeSystemTopics", opts.get("includeSystemTopics"), False),
        include_retry_topics=parse_bool("includeRetryTopics", opts.get("includeRetryTopics"), False),
        include_lmq_topics=parse_bool("includeLmqTopics", opts.get("includeLmqTopics"), False),
        tags=tags, starting_offsets=starting, ending_offsets=ending,
        starting_timestamp=parse_int("startingTimestamp", opts.get("startingTimestamp")),
        ending_timestamp=parse_int("endingTimestamp", opts.get("endingTimestamp")),
        max_messages_per_partition=parse_int("maxMessagesPerPartition", opts.get("maxMessagesPerPartition"), 1)
        or DEFAULT_MAX_MESSAGES_PER_PARTITION,
        max_bytes_per_partition=parse_int("maxBytesPerPartition", opts.get("maxBytesPerPartition"),
                                          MIN_BYTES_PER_PARTITION) or DEFAULT_MAX_BYTES_PER_PARTITION,
        min_partitions=parse_int("minPartitions", opts.get("minPartitions"), 1),
        scan_mode=scan_mode,
        fail_on_data_loss=parse_bool("failOnDataLoss", opts.get("failOnDataLoss"), True),
        verify_crc=parse_bool("verifyCrc", opts.get("verifyCrc"), False),
        sizes=sizes,
        max_messages_per_trigger=parse_int("maxMessagesPerTrigger", opts.get("maxMessagesPerTrigger"), 1),
        variant=None if opts.get("variant") is None else "+".join(parse_variant(opts["variant"])) or "default",
        settings=settings,
    )
