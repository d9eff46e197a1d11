"""The planning worker's check that a local store did not change since it was opened: stats, no listing of
queue directories (a queue's directory stated only where its next unit starts a file), and every kind of change
seen (store_snapshot)."""

import os
import time

import numpy as np
import pytest

from rocketstore_spark.spark.store_snapshot import StoreSnapshot
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format import layout as L
from tests.spark.test_planning import age
from tests.store.write.test_writer import SMALL, messages


@pytest.fixture
def store_root(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(messages(60))
        w.append(messages(5, topic="other", queueId=[0, 1, 0, 1, 0]))
        w.append(messages(10, topic="filled", queueId=[0] * 10))  # its one file full: the next unit starts a file
    age(root)
    return root


def snapshot(root):
    opened = time.time_ns()
    with RocketStore.open(root) as store:
        return StoreSnapshot.of(store, str(root), opened), store


def test_an_untouched_store_is_unchanged_and_checked_by_stats_alone(store_root, monkeypatch):
    snap, store = snapshot(store_root)
    queues = sum(len(store.queue_ids(t)) for t in store.topics())
    files = sum(1 for d in (L.COMMITLOG_DIR, L.INDEX_DIR) for _ in (store_root / d).iterdir())
    listed = []
    monkeypatch.setattr(os, "scandir", lambda *a: listed.append(a) or pytest.fail("listed"))
    monkeypatch.setattr(os, "listdir", lambda *a: listed.append(a) or pytest.fail("listed"))
    assert snap.trusted and snap.unchanged() and not listed
    # root, abort, checkpoint, the two directories and their files, consumequeue/, topics, last files, and the
    # directories of the queues whose last file is full (20 units in each queue of orders, 10 in filled's: files
    # of 10 units), not those of other's queues (3 and 2 units)
    full = {str(store_root / L.CONSUMEQUEUE_DIR / t / str(q)) for t, q in
            [("orders", 0), ("orders", 1), ("orders", 2), ("filled", 0)]}
    assert len(snap.entries) == 3 + 2 + files + 1 + len(store.topics()) + queues + len(full)
    stated = {p for p, _, _ in snap.entries}
    assert full <= stated and not any(p.endswith(("other/0", "other/1")) for p in stated)


def test_a_store_written_just_before_the_open_is_not_trusted(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(messages(10))
    snap, _ = snapshot(root)
    assert not snap.trusted and not snap.unchanged()


def appended_unit(root):
    last = sorted((root / L.CONSUMEQUEUE_DIR / "other" / "0").iterdir())[-1]  # 3 units of 10
    units = np.fromfile(last, dtype=L.CQ_UNIT_DTYPE)
    at = int(np.flatnonzero(units["size"] == 0)[0])
    units[at] = units[at - 1]
    units.tofile(last)


def new_queue(root):
    (root / L.CONSUMEQUEUE_DIR / "orders" / "77").mkdir()


def new_topic(root):
    (root / L.CONSUMEQUEUE_DIR / "brand-new" / "0").mkdir(parents=True)


def removed_commit_log_file(root):
    sorted((root / L.COMMITLOG_DIR).iterdir())[0].unlink()


def crash_marker(root):
    (root / L.ABORT_FILE).write_bytes(b"")


def checkpoint_rewritten(root):
    path = root / L.CHECKPOINT_FILE
    path.write_bytes(path.read_bytes())


def next_file(directory):
    last = sorted(directory.iterdir())[-1]
    (directory / f"{int(last.name) + last.stat().st_size:020d}").write_bytes(b"\0" * last.stat().st_size)


def new_file_after_a_full_one(root):
    next_file(root / L.CONSUMEQUEUE_DIR / "filled" / "0")  # the last file untouched: the directory shows it


def last_file_filled_then_a_new_one(root):
    directory = root / L.CONSUMEQUEUE_DIR / "other" / "1"
    last = sorted(directory.iterdir())[-1]
    units = np.fromfile(last, dtype=L.CQ_UNIT_DTYPE)
    units[2:] = units[1]
    units.tofile(last)
    next_file(directory)


@pytest.mark.parametrize("change", [appended_unit, new_queue, new_topic, removed_commit_log_file, crash_marker,
                                    checkpoint_rewritten, new_file_after_a_full_one,
                                    last_file_filled_then_a_new_one])
def test_every_kind_of_change_is_seen(store_root, change):
    snap, _ = snapshot(store_root)
    assert snap.unchanged()
    change(store_root)
    assert not snap.unchanged()
