"""The index writer's native ``putKey``: files byte-identical to a line-by-line transcription of
``IndexFile.putKey``, whatever the batches and however many files they fill."""

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.store.write.index_writer import IndexWriter

SLOTS, MAX_ENTRIES = 7, 40


def java_put_keys(file: bytearray, slots: int, max_entries: int, keys) -> None:
    """``IndexFile.putKey`` for each (hash, phy, ts) while ``indexCount < indexNum``, as Java writes it."""
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = struct.unpack_from(">qqqqii", file, 0)
    for key_hash, phy, ts in keys:
        if count >= max_entries:
            break
        slot_at = 40 + (key_hash % slots) * 4
        slot_value = struct.unpack_from(">i", file, slot_at)[0]
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        delta = ts - begin_ts
        diff = abs(delta) // 1000 * (1 if delta >= 0 else -1)  # Java's long division truncates towards zero
        if begin_ts <= 0:
            diff = 0
        diff = min(max(diff, 0), (1 << 31) - 1)
        struct.pack_into(">iqii", file, 40 + slots * 4 + count * 20, key_hash, phy, diff, slot_value)
        struct.pack_into(">i", file, slot_at, count)
        if count <= 1:
            begin_phy, begin_ts = phy, ts
        if slot_value == 0:
            slot_count += 1
        count += 1
        end_phy, end_ts = phy, ts
    struct.pack_into(">qqqqii", file, 0, begin_ts, end_ts, begin_phy, end_phy, slot_count, count)


KEYS = st.lists(st.tuples(st.integers(0, (1 << 31) - 1), st.integers(0, 1 << 40), st.integers(0, 1 << 42)),
                max_size=60)


@settings(max_examples=40, deadline=None)
@given(KEYS, st.lists(st.integers(1, 25), min_size=1, max_size=6))
def test_index_files_equal_javas_put_key(tmp_path_factory, keys, batch_sizes):
    directory = tmp_path_factory.mktemp("index")
    writer = IndexWriter(directory, SLOTS, MAX_ENTRIES)
    at = 0
    while at < len(keys):
        part = keys[at:at + batch_sizes[at % len(batch_sizes)]]
        writer.put(*(np.array(column, dtype=np.int64) for column in zip(*part)))
        at += len(part)
    writer.close()
    files = sorted(p for p in directory.iterdir() if p.is_file())
    assert len(files) == (0 if not keys else -(-len(keys) // (MAX_ENTRIES - 1)))
    done = 0
    begin_ts = begin_phy = 0
    for path in files:
        want = bytearray(40 + SLOTS * 4 + MAX_ENTRIES * 20)
        struct.pack_into(">qqqqii", want, 0, begin_ts, begin_ts, begin_phy, begin_phy, 0, 1)
        java_put_keys(want, SLOTS, MAX_ENTRIES, keys[done:])
        assert path.read_bytes() == bytes(want)
        done += struct.unpack_from(">i", want, 36)[0] - 1
        _, begin_ts, _, begin_phy = struct.unpack_from(">qqqq", want, 0)  # the next file begins at this one's end
    assert done == len(keys)
