"""The Spark schema of rocketstore DataFrames and the conversion of store batches to what PySpark expects."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
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

from ..errors import InvalidArgumentError
from ..store import COLUMNS

BROKER_NAME = "brokerName"

_SPARK_TYPES: dict[str, DataType] = {
    "brokerName": StringType(), "topic": StringType(), "queueId": IntegerType(), "queueOffset": LongType(),
    "commitLogOffset": LongType(), "storeSize": IntegerType(), "msgId": StringType(), "uniqKey": StringType(),
    "tags": StringType(), "keys": ArrayType(StringType()), "body": BinaryType(),
    "properties": MapType(StringType(), StringType()), "bornTimestamp": TimestampType(),
    "storeTimestamp": TimestampType(), "bornHost": StringType(), "storeHost": StringType(),
    "sysFlag": IntegerType(), "flag": IntegerType(), "reconsumeTimes": IntegerType(), "bodyCRC": IntegerType(),
    "preparedTransactionOffset": LongType(),
}

#: Column order of every rocketstore DataFrame: brokerName, then the store layer's columns.
SPARK_COLUMNS = (BROKER_NAME,) + COLUMNS
SCHEMA = StructType([StructField(c, _SPARK_TYPES[c], True) for c in SPARK_COLUMNS])


def validate_user_schema(schema: StructType) -> tuple[str, ...]:
    """A user schema must be a subset of the rocketstore columns with the same types; returns its columns."""
    names = [f.name for f in schema.fields]
    unknown = [n for n in names if n not in _SPARK_TYPES]
    if unknown:
        raise InvalidArgumentError(
            f"schema column(s) {unknown} do not exist in rocketstore; choose a subset of {list(SPARK_COLUMNS)}")
    wrong = [f"{f.name}: {f.dataType.simpleString()} (expected {_SPARK_TYPES[f.name].simpleString()})"
             for f in schema.fields if f.dataType != _SPARK_TYPES[f.name]]
    if wrong:
        raise InvalidArgumentError(f"schema column type mismatch: {wrong}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"schema lists a column twice: {names}")
    return tuple(names)


def store_columns(spark_columns) -> tuple[str, ...]:
    """The store-layer columns to decode for the requested Spark columns."""
    return tuple(c for c in spark_columns if c != BROKER_NAME)


def arrow_schema_for(spark_columns) -> pa.Schema:
    """The Arrow schema the installed PySpark expects for these rocketstore columns."""
    return arrow_schema_of(StructType([StructField(c, _SPARK_TYPES[c], True) for c in spark_columns]))


def arrow_schema_of(spark_schema: StructType) -> pa.Schema:
    """The Arrow schema the installed PySpark uses for ``spark_schema`` (timestamps in µs UTC; list and map
    field names as that version names them)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    # Spark 4.0/4.1 take ``timestamp_utc`` (UTC by default); 4.3 takes ``timezone`` (naive unless given)
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(spark_schema, timezone="UTC")
    return to_arrow_schema(spark_schema)


def to_spark_batch(batch: pa.RecordBatch, broker: str, target: pa.Schema) -> pa.RecordBatch:
    """Add ``brokerName``, order the columns as ``target`` and cast (ms → µs timestamps) without copying
    strings or bodies."""
    arrays = []
    n = batch.num_rows
    for field in target:
        if field.name == BROKER_NAME:
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                         pa.array([broker])).cast(pa.string()))
            continue
        col = batch.column(field.name)
        if not col.type.equals(field.type):
            col = col.cast(field.type)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=target)
