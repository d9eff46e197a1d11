"""The tables of special topics, ``option("table", ...)``: ``pendingTransactions`` (the transactional messages
still waiting on a commit or rollback, ``RocketStore.pending_transactions``), ``timerMessages`` (the messages
sent with a delivery time and their state in the timer wheel, ``RocketStore.timer_messages``) and
``messageTraces`` (the clients' trace records, ``RocketStore.message_traces``) and ``compactedValues`` (the
latest value per key of the compaction topics, ``RocketStore.compacted_values``). One partition per store
(broker), each read through the store facade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..store import (
    COMPACTED_FIELDS,
    MESSAGE_TRACE_FIELDS,
    PENDING_TRANSACTION_FIELDS,
    TIMER_MESSAGE_FIELDS,
    RocketStore,
)
from .options import (
    TABLE_COMPACTED_VALUES,
    TABLE_MESSAGE_TRACES,
    TABLE_PENDING_TRANSACTIONS,
    TABLE_TIMER_MESSAGES,
    ReadOptions,
)
from .schema import BROKER_NAME
from .user_errors import message_first

_TYPES: dict[str, DataType] = {
    "topic": StringType(), "queueId": IntegerType(), "transactionId": StringType(), "producerGroup": StringType(),
    "checkTimes": IntegerType(), "bornTimestamp": TimestampType(), "storeTimestamp": TimestampType(),
    "halfQueueId": IntegerType(), "halfOffset": LongType(), "commitLogOffset": LongType(),
    "uniqKey": StringType(), "tags": StringType(), "keys": ArrayType(StringType()), "bornHost": StringType(),
    "properties": MapType(StringType(), StringType()), "body": BinaryType(), "state": StringType(),
    "deliverTime": TimestampType(), "requestedDeliverTime": TimestampType(), "rollTimes": IntegerType(),
    "timerQueueOffset": LongType(), "traceType": StringType(), "timestamp": TimestampType(),
    "regionId": StringType(), "groupName": StringType(), "requestId": StringType(), "msgId": StringType(),
    "storeHost": StringType(), "bodyLength": IntegerType(), "costTime": IntegerType(), "msgType": StringType(),
    "offsetMsgId": StringType(), "success": BooleanType(), "clientHost": StringType(),
    "retryTimes": IntegerType(), "consumeResult": StringType(),
    "transactionState": StringType(), "fromTransactionCheck": BooleanType(), "traceQueueId": IntegerType(),
    "traceQueueOffset": LongType(), "traceCommitLogOffset": LongType(), "traceStoreTimestamp": TimestampType(),
    "key": StringType(), "queueOffset": LongType(), "versions": IntegerType(), "source": StringType(),
}
_NOT_NULL = {"halfQueueId", "halfOffset", "commitLogOffset", "checkTimes", "state", "rollTimes", "timerQueueOffset",
             "traceType", "traceQueueId", "traceQueueOffset", "traceCommitLogOffset", "key", "queueOffset",
             "versions", "source"}
_TIMES = {name for name, t in _TYPES.items() if isinstance(t, TimestampType)}


@dataclass(frozen=True)
class SpecialTable:
    """A table of a special topic: its columns and how a store answers its rows."""

    fields: tuple
    rows: Callable  # (store, read options) → list of dicts with ``fields``
    types: dict = None  # columns typed differently than in _TYPES

    @property
    def schema(self) -> StructType:
        return StructType([StructField(BROKER_NAME, StringType(), False)] +
                          [StructField(name, (self.types or {}).get(name, _TYPES[name]), name not in _NOT_NULL)
                           for name in self.fields])


def _pending_transactions(store, opts: ReadOptions):
    return [r for r in store.pending_transactions() if opts.topics is None or r["topic"] in opts.topics]


def _timer_messages(store, opts: ReadOptions):
    return [r for r in store.timer_messages() if opts.topics is None or r["topic"] in opts.topics]


def _message_traces(store, opts: ReadOptions):
    rows = store.message_traces(opts.trace_topic)
    if opts.topics is None:
        return rows
    # the consumers' records name no topic: they follow the messages the producers' records of the topics name
    traced = {r["msgId"] for r in rows if r["topic"] in opts.topics}
    return [r for r in rows if r["topic"] in opts.topics or (r["topic"] is None and r["msgId"] in traced)]


def _compacted_values(store, opts: ReadOptions):
    return [r for r in store.compacted_values() if opts.topics is None or r["topic"] in opts.topics]


SPECIAL_TABLES = {
    TABLE_PENDING_TRANSACTIONS: SpecialTable(PENDING_TRANSACTION_FIELDS, _pending_transactions),
    TABLE_TIMER_MESSAGES: SpecialTable(TIMER_MESSAGE_FIELDS, _timer_messages),
    # a trace record's keys are the client's text (space-separated), its timestamp and cost as the client measured
    TABLE_MESSAGE_TRACES: SpecialTable(MESSAGE_TRACE_FIELDS, _message_traces, {"keys": StringType()}),
    TABLE_COMPACTED_VALUES: SpecialTable(COMPACTED_FIELDS, _compacted_values),
}


class StorePart(InputPartition):
    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


class SpecialTableReader(DataSourceReader):
    """One partition per store: the rows its facade answers for the table (``topics`` selects real topics)."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self.table = SPECIAL_TABLES[opts.table]

    @message_first
    def partitions(self):
        return [StorePart(i) for i in range(len(self.opts.stores))]

    def read(self, partition) -> Iterator[tuple]:
        import datetime as dt

        ref = self.opts.stores[partition.index]
        with RocketStore.open(ref.path, variant=self.opts.variant, fs_options=dict(ref.fs_options),
                              **self.opts.sizes, **self.opts.settings) as store:
            rows = self.table.rows(store, self.opts)
        for r in rows:
            for name in _TIMES.intersection(r):
                ms = r[name]
                r[name] = None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
            yield (ref.broker, *(r[name] for name in self.table.fields))
