"""The batch sink's writer without a Spark session: how Spark's Arrow batches are put together for encoding."""

import pyarrow as pa

from rocketstore_spark.spark.writer import merged_batches


def batches(sizes, body=b"x" * 10):
    start = 0
    for n in sizes:
        yield pa.record_batch({"queueId": pa.array(range(start, start + n), pa.int32()),
                               "body": pa.array([body] * n, pa.binary()),
                               "keys": pa.array([[f"k{i}"] for i in range(start, start + n)], pa.list_(pa.string()))})
        start += n


def test_consecutive_batches_merge_up_to_the_row_limit_in_order():
    tables = list(merged_batches(batches([3, 3, 3, 5, 1]), max_rows=7, max_bytes=1 << 30))
    assert [t.num_rows for t in tables] == [6, 3, 6]
    # each column one contiguous array, but the bodies: they stay in their batches' buffers (no copy)
    assert all(t.column(name).num_chunks == 1 for t in tables for name in t.column_names if name != "body")
    assert [t.column("body").num_chunks for t in tables] == [2, 1, 2]
    ids = [i for t in tables for i in t.column("queueId").to_pylist()]
    assert ids == list(range(15))
    whole = pa.Table.from_batches(list(batches([3, 3, 3, 5, 1])))
    assert pa.concat_tables(tables).equals(whole)


def test_a_byte_limit_splits_too_and_a_large_batch_stays_alone():
    one = next(batches([4])).nbytes
    tables = list(merged_batches(batches([4, 4, 40, 4]), max_rows=1000, max_bytes=2 * one))
    assert [t.num_rows for t in tables] == [8, 40, 4]


def test_no_batches_no_tables():
    assert list(merged_batches(iter([]))) == []
