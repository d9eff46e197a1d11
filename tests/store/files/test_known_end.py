"""The last writer's record of the commit log's end: trusted only while nothing recovery looks at has changed."""

import os

import pytest

import rocketstore_spark.store.read.redispatch as redispatch
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.known_end import KNOWN_END_FILE, known_end
from rocketstore_spark.store.files.sizes import detect_sizes
from rocketstore_spark.store.format import layout as L
from tests.store.write.test_writer import SMALL, messages


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "s"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(messages(120))
    return root


def _sizes(root):
    return detect_sizes(root, **SMALL)


def _walked(monkeypatch) -> list:
    """Calls of recovery's walk from now on."""
    calls = []
    real = redispatch.recover
    monkeypatch.setattr(redispatch, "recover", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_the_next_writer_appends_at_the_recorded_end_without_walking(store, tmp_path, monkeypatch):
    with RocketStore.open(store) as s:
        end = s.max_phy_offset()
    assert known_end(store, _sizes(store)) == end
    twin = tmp_path / "twin"
    os.system(f"cp -a {store} {twin}")
    (twin / ".rocketstore" / KNOWN_END_FILE).unlink()  # the same store, found by walking
    walked = _walked(monkeypatch)
    with RocketStore.open_writer(store, **SMALL) as w:
        w.append(messages(40, start=500))
    assert walked == []
    with RocketStore.open_writer(twin, **SMALL) as w:
        w.append(messages(40, start=500))
    assert walked == [1]
    with RocketStore.open(store) as a, RocketStore.open(twin) as b:
        assert a.max_phy_offset() == b.max_phy_offset() > end
        assert [a.max_offset("orders", q) for q in range(3)] == [b.max_offset("orders", q) for q in range(3)]
        assert a.read_queue("orders", 0, columns=["body"]).__next__().column(0).to_pylist() == \
            b.read_queue("orders", 0, columns=["body"]).__next__().column(0).to_pylist()


def test_a_crash_marker_or_a_new_checkpoint_means_walking_again(store):
    end = known_end(store, _sizes(store))
    assert end is not None
    (store / L.ABORT_FILE).write_text("1")
    assert known_end(store, _sizes(store)) is None
    (store / L.ABORT_FILE).unlink()
    checkpoint = store / L.CHECKPOINT_FILE
    data = bytearray(checkpoint.read_bytes())
    data[7] ^= 1
    checkpoint.write_bytes(bytes(data))
    assert known_end(store, _sizes(store)) is None


def test_records_appended_behind_its_back_are_found(store):
    """A record written at the end with the file's modification time put back (a copy tool, a clock step) is
    still seen: the bytes at the end are checked."""
    end = known_end(store, _sizes(store))
    last = sorted((store / L.COMMITLOG_DIR).iterdir())[-1]
    st = last.stat()
    with open(last, "r+b") as fh:
        fh.seek(0)
        head = fh.read(8)  # the first record's TOTALSIZE and MAGICCODE, as a next record would start
        fh.seek(end - int(last.name))
        fh.write(head)
    os.utime(last, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert known_end(store, _sizes(store)) is None


def test_a_touched_commit_log_file_means_walking_again(store):
    last = sorted((store / L.COMMITLOG_DIR).iterdir())[-1]
    st = last.stat()
    os.utime(last, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert known_end(store, _sizes(store)) is None


def test_after_a_crash_the_writer_walks_repairs_and_records_what_a_walk_finds(store, monkeypatch):
    """A killed writer leaves ``abort`` and a torn tail: the record is not trusted, the next writer repairs the
    store the broker's way, and the end it records is the one a fresh walk finds."""
    end = known_end(store, _sizes(store))
    last = sorted((store / L.COMMITLOG_DIR).iterdir())[-1]
    with open(last, "r+b") as fh:  # half a record past the end, as a killed writer leaves it
        fh.seek(end - int(last.name))
        fh.write(L.BLANK_MARKER.pack(300, L.MESSAGE_MAGIC_CODE) + b"\x01" * 40)
    (store / L.ABORT_FILE).write_text("1")
    walked = _walked(monkeypatch)
    with RocketStore.open_writer(store, **SMALL) as w:
        w.append(messages(5, start=900))
        written_end = w.next_phy
    assert walked and known_end(store, _sizes(store)) == written_end
    (store / ".rocketstore" / KNOWN_END_FILE).unlink()
    with RocketStore.open(store) as s:
        assert s.max_phy_offset() == written_end
        assert sum(s.max_offset("orders", q) for q in range(3)) == 125


def test_a_reader_may_trust_the_record_and_then_needs_no_walk(store, monkeypatch):
    with RocketStore.open(store) as s:
        walked_end, queues = s.max_phy_offset(), [s.max_offset("orders", q) for q in range(3)]
    walked = _walked(monkeypatch)
    with RocketStore.open(store, trust_recorded_end=True) as s:
        assert s.max_phy_offset() == walked_end and [s.max_offset("orders", q) for q in range(3)] == queues
    assert walked == []
    (store / L.ABORT_FILE).write_text("1")  # a crash since: the record says nothing
    with RocketStore.open(store, trust_recorded_end=True) as s:
        s.max_phy_offset()
    assert walked == [1]
