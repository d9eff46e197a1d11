"""Op records and check counts read as the broker's ``TransactionalMessageServiceImpl`` reads them."""

import pytest

from rocketstore_spark.store.format.transaction import REMOVE_TAG, check_times, java_long, op_offsets


@pytest.mark.parametrize("body, offsets", [
    (b"0,1,3,4,6,7,", [0, 1, 3, 4, 6, 7]),  # a batched op record, as a 5.3.3 broker wrote it
    (b"12,", [12]),
    (b"5", [5]),
    (b"1,,2,", [1, -1, 2]),  # an empty entry is not a number: -1, below every half offset
    (b"1,x,", [1, -1]),
    (b"", []),
])
def test_op_offsets(body, offsets):
    assert op_offsets(REMOVE_TAG, body) == offsets


def test_op_records_with_another_tag_resolve_nothing():
    assert op_offsets("x", b"1,2,") == [] and op_offsets(None, b"1,") == []


@pytest.mark.parametrize("text, value", [("7", 7), ("+7", 7), ("-1", -1), (" 7", -1), ("7.0", -1), ("", -1),
                                         ("1_000", -1)])
def test_java_long(text, value):
    assert java_long(text) == value


def test_check_times():
    assert check_times({}) == 0
    assert check_times({"TRANSACTION_CHECK_TIMES": "21"}) == 21
    assert check_times({"TRANSACTION_CHECK_TIMES": "bad"}) == 0
