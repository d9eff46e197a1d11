"""``option("table", "consumerOffsets")``: the consumer groups' committed offsets as a DataFrame, one partition per
store (broker), each read through the store facade (``RocketStore.consumer_offsets``)."""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from ..store import GROUP_OFFSET_FIELDS, RocketStore
from .options import ReadOptions
from .schema import BROKER_NAME
from .user_errors import message_first

_TYPES = {"group": StringType(), "topic": StringType(), "queueId": IntegerType(), "committedOffset": LongType(),
          "minOffset": LongType(), "maxOffset": LongType(), "lag": LongType(),
          "nextMessageStoreTime": TimestampType(), "source": StringType()}
CONSUMER_OFFSETS_SCHEMA = StructType([StructField(BROKER_NAME, StringType(), False)] +
                                     [StructField(name, _TYPES[name], name in ("nextMessageStoreTime", "source"))
                                      for name in GROUP_OFFSET_FIELDS])


class StorePart(InputPartition):
    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


class ConsumerOffsetsReader(DataSourceReader):
    """One partition per store: its broker's committed offsets, measured against its queues."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts

    @message_first
    def partitions(self):
        return [StorePart(i) for i in range(len(self.opts.stores))]

    def read(self, partition) -> Iterator[tuple]:
        import datetime as dt

        ref = self.opts.stores[partition.index]
        with RocketStore.open(ref.path, variant=self.opts.variant, fs_options=dict(ref.fs_options),
                              **self.opts.sizes, **self.opts.settings) as store:
            rows = store.consumer_offsets()
        for r in rows:
            if self.opts.topics is not None and r["topic"] not in self.opts.topics:
                continue
            ms = r["nextMessageStoreTime"]
            r["nextMessageStoreTime"] = None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
            yield (ref.broker, *(r[name] for name in GROUP_OFFSET_FIELDS))
