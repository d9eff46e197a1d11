"""``put_keys``: the native ``IndexFile.putKey`` on an index file's bytes, and its errors."""

import struct

import numpy as np
import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store.files.index_file import index_file_size, put_keys

SLOTS, MAX_ENTRIES = 5, 4


def new_file() -> bytearray:
    file = bytearray(index_file_size(SLOTS, MAX_ENTRIES))
    struct.pack_into(">qqqqii", file, 0, 0, 0, 0, 0, 0, 1)
    return file


def keys(*hashes):
    """One part, a record per key."""
    n = len(hashes)
    return [(np.array(hashes, np.int64), None, np.arange(100, 100 + n, dtype=np.int64), np.full(n, 9000, np.int64))]


def test_keys_are_put_while_the_file_has_room():
    file = new_file()
    put, header = put_keys(file, SLOTS, MAX_ENTRIES, keys(3, 8, 4, 1), path="index/x")
    assert put == 3  # entry numbers 1..3: indexCount reaches maxIndexNum
    assert (header.index_count, header.hash_slot_count) == (4, 2)  # 3 and 8 share bucket 3
    assert (header.begin_phy_offset, header.end_phy_offset) == (100, 102)
    slot_3 = struct.unpack_from(">i", file, 40 + 3 * 4)[0]
    assert slot_3 == 2
    entry_2 = struct.unpack_from(">iqii", file, 40 + SLOTS * 4 + 2 * 20)
    assert entry_2 == (8, 101, 0, 1)


@pytest.mark.parametrize("count", [-1, MAX_ENTRIES + 1])
def test_a_damaged_header_names_the_file_and_offset(count):
    file = new_file()
    struct.pack_into(">i", file, 36, count)
    with pytest.raises(StoreFormatError, match="indexCount") as e:
        put_keys(file, SLOTS, MAX_ENTRIES, keys(1), path="index/20240101000000000")
    assert e.value.path == "index/20240101000000000" and e.value.offset == 36


def test_a_hash_outside_index_key_hash_values_is_refused():
    with pytest.raises(StoreFormatError, match=r"key 1: expected an indexKeyHashMethod value \(0 ..= 2\^31-1\), "
                                               "found -7"):
        put_keys(new_file(), SLOTS, MAX_ENTRIES, keys(1, -7), path="index/x")


def test_keys_of_several_parts_name_their_records_by_row():
    """Keys of two parts, each key naming the row of its record: the same file as the keys given one by one."""
    phy, ts = np.array([500, 600, 700], np.int64), np.array([9000, 9000, 9000], np.int64)
    parts = [(np.array([3, 8], np.int32), np.array([2, 0], np.int32), phy, ts),
             (np.array([4], np.int32), np.array([1], np.int32), phy, ts)]
    by_parts, flat = new_file(), new_file()
    put_keys(by_parts, SLOTS, MAX_ENTRIES, parts, path="index/x")
    put_keys(flat, SLOTS, MAX_ENTRIES, [(np.array([3, 8, 4]), None, np.array([700, 500, 600]), ts)], path="index/x")
    assert by_parts == flat


def test_a_row_outside_its_records_is_refused():
    part = (np.array([3, 8], np.int32), np.array([0, 5], np.int32), np.array([1, 2], np.int64),
            np.array([9, 9], np.int64))
    with pytest.raises(StoreFormatError, match="key 1: expected the row of its record among the 2 given, found row 5"):
        put_keys(new_file(), SLOTS, MAX_ENTRIES, [part], path="index/x")
