"""Recycled decode output memory: a block comes back only when no Arrow array uses it any more."""

import numpy as np
import pyarrow as pa

from rocketstore_spark.store.format.output_memory import ALIGNMENT, OutputMemory


def _array_over(block, part, values: bytes) -> pa.Array:
    view = block.view(part, len(values))
    view[:] = np.frombuffer(values, dtype=np.uint8)
    offsets = block.view(part + 1, 8, np.int32)
    offsets[:] = [0, len(values)]
    return pa.Array.from_buffers(pa.binary(), 1, [None, block.arrow(part + 1, 8), block.arrow(part, len(values))])


def test_parts_are_aligned_and_disjoint():
    block = OutputMemory().block([3, 100, 1, 65])
    addresses = [block.view(i, 1).ctypes.data for i in range(4)]
    assert all(a % ALIGNMENT == 0 for a in addresses)
    assert addresses == sorted(addresses) and len(set(addresses)) == 4
    assert addresses[1] - addresses[0] >= 3 and addresses[3] - addresses[2] >= 1


def test_a_block_in_use_is_not_handed_out_again():
    memory = OutputMemory(kept=4)
    first = memory.block([64, 8])
    kept = _array_over(first, 0, b"first batch")
    del first  # the array alone keeps the memory
    second = memory.block([64, 8])
    overwritten = _array_over(second, 0, b"other bytes")
    assert kept.to_pylist() == [b"first batch"]
    assert overwritten.to_pylist() == [b"other bytes"]
    assert second.view(0, 1).ctypes.data != kept.buffers()[2].address


def test_a_block_comes_back_once_its_arrays_are_gone():
    memory = OutputMemory(kept=4)
    block = memory.block([1000])
    address = block.view(0, 1).ctypes.data
    array = _array_over(memory.block([64, 8]), 0, b"x")  # another block, still in use
    del block
    again = memory.block([500])  # smaller fits: the free block is taken, not a new one
    assert again.view(0, 1).ctypes.data == address
    assert array.to_pylist() == [b"x"]


def test_a_larger_request_gets_new_memory_and_the_kept_blocks_stay_bounded():
    memory = OutputMemory(kept=2)
    arrays = [_array_over(memory.block([64 << i, 8]), 0, b"v%d" % i) for i in range(5)]
    assert [a.to_pylist() for a in arrays] == [[b"v%d" % i] for i in range(5)]
    assert len(memory) == 2



def test_a_block_larger_than_the_kept_size_is_not_kept(monkeypatch):
    from rocketstore_spark.store.format import output_memory

    monkeypatch.setattr(output_memory, "KEPT_BLOCK_BYTES", 1 << 12)
    memory = OutputMemory(kept=2)
    memory.block([1 << 13])
    assert len(memory) == 0
    memory.block([1 << 10])
    assert len(memory) == 1


def test_text_rooms_follow_the_last_batch_and_never_exceed_the_records():
    from rocketstore_spark.store.format.columns import TextRooms

    rooms = TextRooms()
    assert rooms.rooms(100, 50_000) == (50_000, 50_000)  # nothing seen: the records' bytes
    rooms.saw(100, 1_000, 7_000)  # 10 and 70 bytes a record
    assert rooms.rooms(1_000, 10**9) == (1_000 * (20 + rooms.SLACK), 1_000 * (140 + rooms.SLACK))
    assert rooms.rooms(1_000, 30_000) == (30_000, 30_000)
    rooms.saw(10, -5, -5)  # failed records' places do not make a room negative
    assert rooms.rooms(10, 1_000) == (10 * rooms.SLACK, 10 * rooms.SLACK)
    rooms.forget()
    assert rooms.rooms(10, 1_000) == (1_000, 1_000)
