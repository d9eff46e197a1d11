"""What a RocketMQ producer decides for a message before the broker sees it: the queue it goes to
(``MessageQueueSelector``) and whether its body is compressed (``compressMsgBodyOverHowmuch``). The writers apply
them to tables of messages: the Spark sink for every task, :meth:`~.appender.StoreWriter.append` when asked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InvalidArgumentError, MessageValidationError
from ..format import layout as L
from ..format.java_hash import java_string_hashes

ROUND_ROBIN, HASH, PARTITION = "roundRobin", "hash", "partition"
QUEUE_SELECTORS = (ROUND_ROBIN, HASH, PARTITION)
COMPRESSION_CODES = {"zlib": L.COMPRESSION_ZLIB, "lz4": L.COMPRESSION_LZ4, "zstd": L.COMPRESSION_ZSTD}
COMPRESS_THRESHOLD = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch


def select_queues(table: pa.Table, counts: np.ndarray, selector: str, partition: int = 0,
                  row_base: int = 0) -> np.ndarray:
    """The queue id of each row of ``table`` (``counts``: each row's topic's number of queues): ``partition``
    sends a writer's rows to one queue (its ``partition`` number), ``hash`` hashes the ``shardingKey`` column (or
    the first key) as Java does (``SelectMessageQueueByHash``), ``roundRobin`` spreads rows from ``partition +
    row_base`` on."""
    n = table.num_rows
    if selector == PARTITION:
        return (np.full(n, partition) % counts).astype(np.int32)
    if selector == HASH:
        source = "shardingKey" if "shardingKey" in table.column_names else "keys"
        if source not in table.column_names:
            raise MessageValidationError("queueSelector=hash needs a shardingKey or keys column")
        col = table.column(source).combine_chunks()
        if pa.types.is_list(col.type):
            col = pc.list_element(pc.if_else(pc.greater(pc.list_value_length(col), 0), col,
                                             pa.scalar([""], col.type)), 0)
        hashes = np.abs(java_string_hashes(pc.fill_null(col.cast(pa.string()), "")))
        return (hashes % counts).astype(np.int32)
    if selector != ROUND_ROBIN:
        raise InvalidArgumentError(f"queue selector must be one of {list(QUEUE_SELECTORS)}, found {selector!r}")
    return ((partition + row_base + np.arange(n)) % counts).astype(np.int32)


def flag_compression(table: pa.Table, codec: str, threshold: int = COMPRESS_THRESHOLD) -> pa.Table:
    """Set RocketMQ's COMPRESSED flag and type bits (``codec``: zlib, lz4 or zstd) on the bodies longer than
    ``threshold`` that are not flagged yet (the producer's rule); the body is compressed when encoded."""
    if codec not in COMPRESSION_CODES:
        raise InvalidArgumentError(f"body compression must be one of {sorted(COMPRESSION_CODES)}, found {codec!r}")
    code = COMPRESSION_CODES[codec]
    lengths = np.asarray(pc.fill_null(pc.binary_length(table.column("body").combine_chunks()), 0))
    sysflag = np.asarray(pc.fill_null(table.column("sysFlag").combine_chunks(), 0), dtype=np.int64) \
        if "sysFlag" in table.column_names else np.zeros(table.num_rows, dtype=np.int64)
    big = (lengths > threshold) & ((sysflag & L.COMPRESSED_FLAG) == 0)
    sysflag = np.where(big, sysflag | L.COMPRESSED_FLAG | (code << L.COMPRESSION_TYPE_SHIFT), sysflag)
    column = pa.array(sysflag.astype(np.int32))
    if "sysFlag" in table.column_names:
        return table.set_column(table.column_names.index("sysFlag"), "sysFlag", column)
    return table.append_column("sysFlag", column)


__all__ = ["select_queues", "flag_compression", "QUEUE_SELECTORS", "COMPRESSION_CODES", "COMPRESS_THRESHOLD"]
