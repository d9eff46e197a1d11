"""``encode_units``: consume-queue units gathered from per-record columns by the native kernel."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store.files.consume_queue import encode_units
from rocketstore_spark.store.format import layout as L

RECORDS = st.lists(st.tuples(st.integers(0, 1 << 50), st.integers(1, (1 << 31) - 1),
                             st.integers(-(1 << 63), (1 << 63) - 1)), min_size=1, max_size=30)


@given(RECORDS, st.data())
def test_units_hold_the_chosen_records_fields_in_order(records, data):
    rows = np.array(data.draw(st.lists(st.integers(0, len(records) - 1), max_size=40)), dtype=np.int64)
    phy, size, tags = (np.array(c, dtype=np.int64) for c in zip(*records))
    units = encode_units(rows, phy, size, tags)
    assert units.dtype == L.CQ_UNIT_DTYPE
    assert units["phy_offset"].tolist() == phy[rows].tolist()
    assert units["size"].tolist() == size[rows].tolist()
    assert units["tags_code"].tolist() == tags[rows].tolist()


def test_a_row_outside_the_batch_is_an_error():
    one = np.array([5], dtype=np.int64)
    with pytest.raises(StoreFormatError, match="unit 1: expected a record among the 1 of the batch, found row 3"):
        encode_units(np.array([0, 3]), one, one, one)
