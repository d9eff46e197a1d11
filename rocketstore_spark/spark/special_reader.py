"""The tables of special topics, ``option("table", ...)``: ``pendingTransactions`` (the transactional messages
still waiting on a commit or rollback, ``RocketStore.pending_transactions``) and ``timerMessages`` (the messages
sent with a delivery time and their state in the timer wheel, ``RocketStore.timer_messages``). One partition per
store (broker), each read through the store facade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..store import PENDING_TRANSACTION_FIELDS, TIMER_MESSAGE_FIELDS, RocketStore
from .options import TABLE_PENDING_TRANSACTIONS, TABLE_TIMER_MESSAGES, ReadOptions
from .schema import BROKER_NAME
from .user_errors import message_first

_TYPES: dict[str, DataType] = {
    "topic": StringType(), "queueId": IntegerType(), "transactionId": StringType(), "producerGroup": StringType(),
    "checkTimes": IntegerType(), "bornTimestamp": TimestampType(), "storeTimestamp": TimestampType(),
    "halfQueueId": IntegerType(), "halfOffset": LongType(), "commitLogOffset": LongType(),
    "uniqKey": StringType(), "tags": StringType(), "keys": ArrayType(StringType()), "bornHost": StringType(),
    "properties": MapType(StringType(), StringType()), "body": BinaryType(), "state": StringType(),
    "deliverTime": TimestampType(), "requestedDeliverTime": TimestampType(), "rollTimes": IntegerType(),
    "timerQueueOffset": LongType(),
}
_NOT_NULL = {"halfQueueId", "halfOffset", "commitLogOffset", "checkTimes", "state", "rollTimes", "timerQueueOffset"}
_TIMES = {name for name, t in _TYPES.items() if isinstance(t, TimestampType)}


def _schema(fields) -> StructType:
    return StructType([StructField(BROKER_NAME, StringType(), False)] +
                      [StructField(name, _TYPES[name], name not in _NOT_NULL) for name in fields])


@dataclass(frozen=True)
class SpecialTable:
    """A table of a special topic: its columns and how a store answers its rows."""

    fields: tuple
    rows: Callable  # (store, topics) → list of dicts with ``fields``

    @property
    def schema(self) -> StructType:
        return _schema(self.fields)


def _pending_transactions(store, topics):
    return [r for r in store.pending_transactions() if topics is None or r["topic"] in topics]


def _timer_messages(store, topics):
    return [r for r in store.timer_messages() if topics is None or r["topic"] in topics]


SPECIAL_TABLES = {
    TABLE_PENDING_TRANSACTIONS: SpecialTable(PENDING_TRANSACTION_FIELDS, _pending_transactions),
    TABLE_TIMER_MESSAGES: SpecialTable(TIMER_MESSAGE_FIELDS, _timer_messages),
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
            rows = self.table.rows(store, self.opts.topics)
        for r in rows:
            for name in _TIMES.intersection(r):
                ms = r[name]
                r[name] = None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
            yield (ref.broker, *(r[name] for name in self.table.fields))
