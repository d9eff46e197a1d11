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
from .options import canonical, parse_bool, parse_int

WRITE_OPTIONS = (
    "path", "topic", "queueSelector", "queueNums", "storeHost", "compressBody", "compressBodyThreshold",
    "overwrite", "ignoreExtraColumns", "maxMessageSize", "commitLogFileSize", "consumeQueueFileSize",
    "indexHashSlots", "indexMaxEntries", "sinkId", "checkpointLocation", "flushDiskType",
)
#: RocketMQ's FlushDiskType: SYNC_FLUSH forces the commit log to disk before a job commits; ASYNC_FLUSH (the
#: broker's default) leaves write-back to the kernel, which costs a killed driver nothing but lets an OS crash
#: lose the newest messages, exactly as for a broker configured that way.
FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
QUEUE_SELECTORS = ("roundRobin", "hash", "partition")
COMPRESSIONS = ("none", "zlib", "lz4", "zstd")
DEFAULT_COMPRESS_THRESHOLD = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch

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
    opts = canonical(options, WRITE_OPTIONS)
    path = opts.get("path")
    if not path:
        raise InvalidArgumentError("no store path: use .save('/path/to/store') or .option('path', ...)")
    path = str(local_store_path(path, writing=True))  # a remote URI fails here, at save(), saying why
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreNotFoundError(f"{path} is a file; the rocketstore sink writes a store directory")
    if overwrite and opts.get("overwrite") != "replace":
        raise InvalidArgumentError(
            "mode('overwrite') replaces every message of the store; confirm with .option('overwrite', 'replace')")
    selector = opts.get("queueSelector", "roundRobin")
    if selector not in QUEUE_SELECTORS:
        raise InvalidArgumentError(f"queueSelector must be one of {QUEUE_SELECTORS}, found {selector!r}")
    compress = str(opts.get("compressBody", "none")).lower()
    if compress not in COMPRESSIONS:
        raise InvalidArgumentError(f"compressBody must be one of {COMPRESSIONS}, found {compress!r}")
    sizes = {key: parse_int(opt, opts.get(opt), 1) for key, opt in (
        ("commit_log_file_size", "commitLogFileSize"), ("consume_queue_file_size", "consumeQueueFileSize"),
        ("index_hash_slots", "indexHashSlots"), ("index_max_entries", "indexMaxEntries")) if opt in opts}
    flush = str(opts.get("flushDiskType", "ASYNC_FLUSH")).upper()
    if flush not in FLUSH_DISK_TYPES:
        raise InvalidArgumentError(f"flushDiskType must be one of {FLUSH_DISK_TYPES}, found {flush!r}")
    host = opts.get("storeHost", DEFAULT_STORE_HOST)
    try:
        parse_host(host)
    except ValueError as e:
        raise InvalidArgumentError(f"storeHost must be 'a.b.c.d:port' or '[v6]:port', found {host!r}") from e
    return WriteOptions(
        path=path, topic=opts.get("topic"), queue_selector=selector,
        queue_nums=parse_int("queueNums", opts.get("queueNums"), 1) or 8, store_host=host,
        compress_body=compress,
        compress_threshold=parse_int("compressBodyThreshold", opts.get("compressBodyThreshold"), 0)
        if "compressBodyThreshold" in opts else DEFAULT_COMPRESS_THRESHOLD,
        ignore_extra_columns=parse_bool("ignoreExtraColumns", opts.get("ignoreExtraColumns"), False),
        max_message_size=parse_int("maxMessageSize", opts.get("maxMessageSize"), 1) or L.DEFAULT_MAX_MESSAGE_SIZE,
        sizes=sizes, sink_id=opts.get("sinkId"), flush_disk_type=flush)


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
