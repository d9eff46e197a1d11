"""Limits the golden store cannot show (its queues hold at most ~1000 units, its consume-queue files 300): stores
written by the package's writer with long queues.

1. The 10,000-row default batch size of the readers.
2. getMessage's per-call scan limit.

RocketMQ 5.x (``DefaultMessageStore.getMessage``)::

    final int maxFilterMessageSize = Math.max(16000, maxMsgNums * consumeQueue.getUnitSize());
    ...
    if ((cqUnit.getQueueOffset() - offset) * consumeQueue.getUnitSize() > maxFilterMessageSize) break;
    ...
    nextBeginOffset = cqUnit.getQueueOffset() + cqUnit.getBatchNum();

so unit ``offset + k`` is examined while ``k * 20 <= maxFilterMessageSize``: 801 units for the default 16000.
"""

import pyarrow as pa
import pytest

from rocketstore_spark.store import RocketStore

SIZES = dict(commit_log_file_size=1 << 20, consume_queue_file_size=1500 * 20, index_hash_slots=64,
             index_max_entries=4096)
COUNT = 1200


@pytest.fixture(scope="module")
def long_queue(tmp_path_factory):
    root = tmp_path_factory.mktemp("long-queue") / "store"
    table = pa.table({"topic": ["Long"] * COUNT, "queueId": [0] * COUNT,
                      "tags": pa.array(["X"] * (COUNT - 1) + ["Y"], pa.string()),
                      "body": pa.array([b"m%d" % i for i in range(COUNT)], pa.binary())})
    with RocketStore.open_writer(root, **SIZES) as w:
        w.append(table)
    with RocketStore.open(root, **SIZES) as s:
        assert s.max_offset("Long", 0) == COUNT
        assert s.consume_queue("Long", 0).units_per_file == 1500
        yield s


def expected_examined(max_nums: int, offset: int = 0) -> int:
    limit = max(16000, max_nums * 20)
    return min(limit // 20 + 1, COUNT - offset)


@pytest.mark.parametrize("max_nums", [1, 32, 900])
def test_no_matched_message_examines_max_filter_message_size_worth_of_units(long_queue, max_nums):
    res = long_queue.get_message("Long", 0, 0, max_nums=max_nums, tags="Z")
    assert res.status == "NO_MATCHED_MESSAGE" and res.messages.num_rows == 0
    assert res.next_begin_offset == expected_examined(max_nums), (max_nums, res.next_begin_offset)


def test_a_match_beyond_the_scan_limit_is_not_reached_in_one_call(long_queue):
    res = long_queue.get_message("Long", 0, 0, tags="Y")
    assert res.status == "NO_MATCHED_MESSAGE"
    offset, calls = 0, 0
    while True:
        res = long_queue.get_message("Long", 0, offset, tags="Y", columns=["queueOffset"])
        calls += 1
        if res.status == "FOUND":
            assert res.messages.column(0).to_pylist() == [COUNT - 1]
            break
        assert res.status == "NO_MATCHED_MESSAGE" and res.next_begin_offset > offset
        offset = res.next_begin_offset
    assert calls == 2


def test_found_pages_are_capped_by_count_not_by_the_scan_limit(long_queue):
    res = long_queue.get_message("Long", 0, 0, max_nums=32, tags="X", columns=["queueOffset"])
    assert (res.status, res.next_begin_offset) == ("FOUND", 32)
    assert res.messages.column(0).to_pylist() == list(range(32))
    res = long_queue.get_message("Long", 0, 0, max_nums=100, columns=["queueOffset"])
    assert (res.status, res.next_begin_offset, res.messages.num_rows) == ("FOUND", 32, 32)  # 32 in memory
    res = long_queue.get_message("Long", 0, 0, max_nums=100, columns=["queueOffset"], in_memory=False)
    assert (res.status, res.next_begin_offset, res.messages.num_rows) == ("FOUND", 8, 8)  # 8 on disk


def test_default_batches_hold_at_most_10000_rows(tmp_path):
    n = 25_000
    sizes = dict(commit_log_file_size=4 << 20, consume_queue_file_size=30_000 * 20, index_hash_slots=1000,
                 index_max_entries=4000)
    with RocketStore.open_writer(tmp_path / "store", **sizes) as w:
        w.append(pa.table({"topic": ["Big"] * n, "queueId": [0] * n,
                           "body": pa.array([b"%d" % i for i in range(n)], pa.binary())}))
    with RocketStore.open(tmp_path / "store", **sizes) as s:
        batches = list(s.read_queue("Big", 0, columns=["queueOffset", "body"]))
        assert [b.num_rows for b in batches] == [10_000, 10_000, 5_000]
        assert [o for b in batches for o in b.column(0).to_pylist()] == list(range(n))
        assert batches[2].column(1).to_pylist()[-1] == b"%d" % (n - 1)
        scanned = [b.num_rows for b in s.scan_raw(columns=["queueOffset"])]
        assert max(scanned) <= 10_000 and sum(scanned) == n
        small = [b.num_rows for b in s.read_queue("Big", 0, columns=["queueOffset"], batch_rows=3000)]
        assert max(small) <= 3000 and sum(small) == n
