"""Write options of ``df.write.format("rocketstore")`` and the checks made before any task runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Optional

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from ..errors import InvalidArgumentError, StoreNotFoundError
from ..store import DEFAULT_STORE_HOST, local_store_path, parse_host
from ..store import existing_queue_counts as store_queue_counts
from ..store.format import layout as L
from .option_spec import BOOLEAN, CHOICE, INTEGER, PATH, STRING, OptionSpec
from .options import canonical

#: RocketMQ's FlushDiskType: SYNC_FLUSH forces the commit log, and the commit's journal around it, to disk before
#: a job commits; ASYNC_FLUSH (the broker's default) leaves write-back to the kernel, which costs a killed driver
#: nothing but lets an OS crash lose the newest messages, exactly as for a broker configured that way.
FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
QUEUE_SELECTORS = ("roundRobin", "hash", "partition")
COMPRESSIONS = ("none", "zlib", "lz4", "zstd")
DEFAULT_COMPRESS_THRESHOLD = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch

_SIZE = "the broker's `{}` for a new store (an existing store keeps its own)"

#: every write option, once: validation and the documentation's table come from here
WRITE_SPEC = (
    OptionSpec("path", PATH, "the store directory, created when absent; usually given as `save(path)`",
               scopes=("write",)),
    OptionSpec("topic", STRING, "the topic of every row, when the DataFrame has no `topic` column",
               scopes=("write",)),
    OptionSpec("queueSelector", CHOICE, "without a `queueId` column: `roundRobin`, `hash` (Java hash of "
               "`shardingKey` or the first key) or `partition` (the Spark partition)", default="roundRobin",
               choices=QUEUE_SELECTORS, scopes=("write",)),
    OptionSpec("queueNums", INTEGER, "queues of a new topic (more when the data names higher queue ids); an "
               "existing topic keeps its queues", default=8, minimum=1, scopes=("write",)),
    OptionSpec("storeHost", STRING, "the store host recorded in records, and so in msgIds",
               default=DEFAULT_STORE_HOST, scopes=("write",)),
    OptionSpec("compressBody", CHOICE, "compress bodies over `compressBodyThreshold` bytes, byte-identical to "
               "RocketMQ's producer", default="none", choices=COMPRESSIONS, scopes=("write",)),
    OptionSpec("compressBodyThreshold", INTEGER, "bodies larger than this are compressed (with `compressBody`)",
               default=DEFAULT_COMPRESS_THRESHOLD, minimum=0, scopes=("write",)),
    OptionSpec("overwrite", CHOICE, "with `mode(\"overwrite\")`: confirms that every message of the store is "
               "replaced", choices=("replace",), scopes=("write",)),
    OptionSpec("ignoreExtraColumns", BOOLEAN, "drop columns that are no message field instead of failing",
               default=False, scopes=("write",)),
    OptionSpec("maxMessageSize", INTEGER, "body size limit (the broker's `maxMessageSize`)",
               default=L.DEFAULT_MAX_MESSAGE_SIZE, minimum=1, scopes=("write",)),
    OptionSpec("commitLogFileSize", INTEGER, _SIZE.format("mappedFileSizeCommitLog"), minimum=1,
               shown_default="RocketMQ's default", scopes=("write",)),
    OptionSpec("consumeQueueFileSize", INTEGER, _SIZE.format("mappedFileSizeConsumeQueue"), minimum=1,
               shown_default="RocketMQ's default", scopes=("write",)),
    OptionSpec("indexHashSlots", INTEGER, _SIZE.format("maxHashSlotNum"), minimum=1,
               shown_default="RocketMQ's default", scopes=("write",)),
    OptionSpec("indexMaxEntries", INTEGER, _SIZE.format("maxIndexNum"), minimum=1,
               shown_default="RocketMQ's default", scopes=("write",)),
    OptionSpec("sinkId", STRING, "streaming: the id under which committed batch ids are kept in the store",
               shown_default="from the path", scopes=("write",)),
    OptionSpec("checkpointLocation", PATH, "streaming: Spark's checkpoint directory", scopes=("write",)),
    OptionSpec("flushDiskType", CHOICE, "as the broker's setting: `ASYNC_FLUSH` leaves write-back to the kernel "
               "(an OS crash can lose the newest job); `SYNC_FLUSH` forces everything to disk before the commit "
               "point", default="ASYNC_FLUSH", choices=FLUSH_DISK_TYPES, scopes=("write",)),
)
WRITE_OPTIONS = tuple(s.name for s in WRITE_SPEC)
_WRITE = {s.name: s for s in WRITE_SPEC}


_STRINGY = (StringType,)
#: input column → accepted Spark types
INPUT_TYPES = {
    "body": (BinaryType, StringType), "topic": _STRINGY, "queueId": (IntegerType, LongType), "tags": _STRINGY,
    "keys": (ArrayType, StringType), "properties": (MapType,), "uniqKey": _STRINGY, "shardingKey": _STRINGY,
    "bornTimestamp": (TimestampType, LongType), "storeTimestamp": (TimestampType, LongType),
    "bornHost": _STRINGY, "storeHost": _STRINGY, "flag": (IntegerType, LongType),
    "reconsumeTimes": (IntegerType, LongType), "sysFlag": (IntegerType, LongType),
    "preparedTransactionOffset": (LongType, IntegerType),
}
#: columns of a rocketstore read that are derived from where a record lands: accepted and ignored
DERIVED = ("brokerName", "msgId", "commitLogOffset", "storeSize", "queueOffset", "bodyCRC")
#: what tasks pass on to the store layer
PASSED = tuple(c for c in INPUT_TYPES if c != "shardingKey")


@dataclass(frozen=True)
class WriteOptions:
    path: str
    topic: Optional[str] = None
    queue_selector: str = "roundRobin"
    queue_nums: int = 8
    store_host: str = DEFAULT_STORE_HOST
    compress_body: str = "none"
    compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD
    ignore_extra_columns: bool = False
    max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE
    sizes: dict = field(default_factory=dict)
    sink_id: Optional[str] = None
    flush_disk_type: str = "ASYNC_FLUSH"
    passed_columns: tuple = PASSED

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"


def parse_write_options(options: Mapping[str, str], overwrite: bool) -> WriteOptions:
    """Validate every write option against :data:`WRITE_SPEC` (the documentation's option table)."""
    opts = canonical(options, WRITE_SPEC)

    def option(name):
        return _WRITE[name].parse(opts.get(name))

    path = opts.get("path")
    if not path:
        raise InvalidArgumentError("no store path: use .save('/path/to/store') or .option('path', ...)")
    path = str(local_store_path(path, writing=True))  # a remote URI fails here, at save(), saying why
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreNotFoundError(f"{path} is a file; the rocketstore sink writes a store directory")
    if overwrite and opts.get("overwrite") != "replace":
        raise InvalidArgumentError(
            "mode('overwrite') replaces every message of the store; confirm with .option('overwrite', 'replace')")
    sizes = {key: option(opt) for key, opt in (
        ("commit_log_file_size", "commitLogFileSize"), ("consume_queue_file_size", "consumeQueueFileSize"),
        ("index_hash_slots", "indexHashSlots"), ("index_max_entries", "indexMaxEntries")) if opt in opts}
    host = option("storeHost")
    try:
        parse_host(host)
    except ValueError as e:
        raise InvalidArgumentError(f"storeHost must be 'a.b.c.d:port' or '[v6]:port', found {host!r}") from e
    return WriteOptions(
        path=path, topic=opts.get("topic"), queue_selector=option("queueSelector"),
        queue_nums=option("queueNums"), store_host=host, compress_body=option("compressBody"),
        compress_threshold=option("compressBodyThreshold"),
        ignore_extra_columns=option("ignoreExtraColumns"), max_message_size=option("maxMessageSize"),
        sizes=sizes, sink_id=opts.get("sinkId"), flush_disk_type=option("flushDiskType"))


def validate_input_schema(schema: StructType, opts: WriteOptions) -> None:
    """Columns by name: known ones with accepted types, derived ones ignored, others rejected."""
    names = [f.name for f in schema.fields]
    extra = [n for n in names if n not in INPUT_TYPES and n not in DERIVED]
    if extra and not opts.ignore_extra_columns:
        raise InvalidArgumentError(
            f"column(s) {extra} are not rocketstore message fields; drop them or set ignoreExtraColumns=true "
            f"(accepted: {sorted(INPUT_TYPES)})")
    if "body" not in names:
        raise InvalidArgumentError("the DataFrame needs a 'body' column (binary or string)")
    if "topic" not in names and not opts.topic:
        raise InvalidArgumentError("no topic: add a 'topic' column or set .option('topic', ...)")
    for f in schema.fields:
        accepted = INPUT_TYPES.get(f.name)
        if accepted and not isinstance(f.dataType, accepted):
            raise InvalidArgumentError(
                f"column {f.name!r} has type {f.dataType.simpleString()}; expected "
                f"{' or '.join(t.typeName() for t in accepted)}")
    for name, inner in (("keys", StringType), ("properties", StringType)):
        dtype = schema[name].dataType if name in names else None
        if isinstance(dtype, ArrayType) and not isinstance(dtype.elementType, inner):
            raise InvalidArgumentError("column keys must be array<string> or a space-separated string")
        if isinstance(dtype, MapType) and not (isinstance(dtype.keyType, StringType)
                                               and isinstance(dtype.valueType, StringType)):
            raise InvalidArgumentError("column properties must be map<string,string>")


def existing_queue_counts(path: str) -> dict:
    """Topic → number of queues of an existing store (queue directories and the broker's topic table)."""
    return store_queue_counts(path)
