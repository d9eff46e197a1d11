"""``LiveTail`` gives every queue's end exactly as checking every queue does, while a trigger with nothing new
reads one record header and a trigger with new data re-checks only the queues its records went to."""

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.store import LiveTail, RocketStore
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.read import live_tail

SIZES = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=20 * L.CQ_STORE_UNIT_SIZE)


def messages(pairs, body=200) -> pa.Table:
    """One message per (topic, queue id) in ``pairs``."""
    return pa.table({"topic": pa.array([t for t, _ in pairs]),
                     "queueId": pa.array([q for _, q in pairs], pa.int32()),
                     "body": pa.array([b"y" * body] * len(pairs), pa.binary())})


def append(root, pairs):
    with RocketStore.open_writer(root, **SIZES) as writer:
        writer.append(messages(pairs))


def full_ends(root) -> dict:
    with RocketStore.open(root, valid_end=1 << 62, **SIZES) as store:
        return {t: {str(q): store.complete_queue_end(t, q) for q in store.queue_ids(t)} for t in store.topics()}


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    append(root, [(f"t{t:02d}", q) for t in range(30) for q in range(4) for _ in range(3)])
    return root


def test_new_messages_are_followed_from_the_commit_log(store):
    tail = LiveTail.open(store, **SIZES)
    assert tail.ends() == full_ends(store)
    # new messages in a few queues, across commit-log and consume-queue file boundaries, and a new topic
    append(store, [("t03", 1)] * 40 + [("t17", 2)] * 5 + [("new", 0)] * 3)
    with counting() as cost:
        ends = tail.ends()
    assert ends == full_ends(store) and ends["t03"]["1"] == 43 and ends["new"] == {"0": 3}
    assert tail.full_checks == 1
    assert cost.files_opened <= 3 * 4  # the three touched queues' files, not the other 117 queues'


def test_a_trigger_with_nothing_new_opens_no_consume_queue(store):
    tail = LiveTail.open(store, **SIZES)
    first = tail.ends()
    with counting() as cost:
        assert tail.ends() == first
    assert cost.files_opened == 0 and cost.bytes_read == 0 and tail.full_checks == 1


def test_units_that_arrive_after_their_records_are_picked_up(store):
    """Dispatch lags behind the commit log: a queue whose records are there but whose units are not is checked
    again on every call until they arrive."""
    tail = LiveTail.open(store, **SIZES)
    tail.ends()
    append(store, [("t05", 3)] * 6)
    cq_file = sorted((store / L.CONSUMEQUEUE_DIR / "t05" / "3").iterdir())[-1]
    saved = cq_file.read_bytes()
    units = np.frombuffer(saved, dtype=L.CQ_UNIT_DTYPE)
    written = int(np.count_nonzero(units["size"] > 0))
    cq_file.write_bytes(saved[:(written - 4) * L.CQ_STORE_UNIT_SIZE] + bytes(len(saved) - (written - 4) * 20))
    assert tail.ends()["t05"]["3"] == 9 - 4 + (int(cq_file.name) // 20)  # not dispatched yet
    cq_file.write_bytes(saved)
    assert tail.ends() == full_ends(store)
    assert tail.ends()["t05"]["3"] == 9 and tail.full_checks == 1


def test_a_large_backlog_or_a_replaced_store_checks_every_queue(store, monkeypatch, tmp_path):
    tail = LiveTail.open(store, **SIZES)
    tail.ends()
    monkeypatch.setattr(live_tail, "MAX_WALK_BYTES", 1024)
    append(store, [(f"t{t:02d}", 0) for t in range(30)])
    assert tail.ends() == full_ends(store) and tail.full_checks == 2
    monkeypatch.undo()
    other = tmp_path / "other"
    append(other, [("t00", 0)])
    tail.root = other  # the directory now holds a smaller store: its commit log ends before our position
    assert tail.ends() == full_ends(other) and tail.full_checks == 3


def test_unwanted_topics_are_left_out(store):
    tail = LiveTail.open(store, lambda t: t.startswith("t1"), **SIZES)
    append(store, [("t01", 0), ("t11", 0)])
    ends = tail.ends()
    assert set(ends) == {f"t{t}" for t in range(10, 20)} and ends["t11"]["0"] == 4
