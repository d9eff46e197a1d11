"""``verify_store`` on the golden store and on copies with one damaged index entry."""

import struct

import pytest

from rocketstore_spark.store import RocketStore, verify_store

pytestmark = pytest.mark.timeout(120)
ENTRIES_AT = 40 + 5000 * 4  # the golden index files: 5000 hash slots


def test_the_golden_store_verifies(golden_store):
    assert verify_store(golden_store) == []


@pytest.mark.parametrize("entry", [1, 777, 12345])  # not the newest: size detection checks that one
def test_an_index_entry_whose_key_hash_matches_no_key_of_its_record_is_reported(golden_copy, entry):
    path = sorted((golden_copy / "index").iterdir())[0]
    data = bytearray(path.read_bytes())
    at = ENTRIES_AT + entry * 20
    (key_hash,) = struct.unpack_from(">i", data, at)
    struct.pack_into(">i", data, at, (key_hash + 1) & 0x7FFFFFFF)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as store:
        problems = verify_store(store)
    assert [p.where for p in problems] == [f"{path} entry"]
    assert f"key hash {(key_hash + 1) & 0x7FFFFFFF} matches no key" in problems[0].message
