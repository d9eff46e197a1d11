"""What opening a store and finding queue ends cost, counted through the file layer (files opened, bytes and
pages read), never timed; and the peak resident size of a process over 2,000 preallocated consume-queue files.

The store has the broker's default file sizes: every consume queue is a 6 MB preallocated (sparse) file holding
a few units, the shape of a young queue on a production broker.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L

TOPICS, QUEUES, PER_QUEUE = 250, 8, 3  # 2,000 consume queues of 3 messages each


def many_queues_table(topics: int, queues: int, per_queue: int, body: int = 100) -> pa.Table:
    n = topics * queues * per_queue
    i = np.arange(n)
    return pa.table({"topic": pa.array([f"t{k // (queues * per_queue):04d}" for k in range(n)]),
                     "queueId": pa.array(((i // per_queue) % queues).astype(np.int32)),
                     "tags": pa.array(["rare" if k % 97 == 0 else "common" for k in range(n)]),
                     "body": pa.array([b"x" * body] * n, pa.binary())})


@pytest.fixture(scope="module")
def sparse_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("many") / "store"
    with RocketStore.open_writer(root) as writer:
        writer.append(many_queues_table(TOPICS, QUEUES, PER_QUEUE))
    return root


def test_the_store_has_the_production_shape(sparse_store):
    files = list((sparse_store / L.CONSUMEQUEUE_DIR).glob("*/*/*"))
    assert len(files) == TOPICS * QUEUES
    assert {f.stat().st_size for f in files} == {L.DEFAULT_CONSUME_QUEUE_FILE_SIZE}
    assert sum(f.stat().st_blocks * 512 for f in files) < len(files) * 64 * 1024  # sparse: a page or so each


def test_open_and_every_queue_end_read_one_window_per_queue(sparse_store):
    with counting() as cost, RocketStore.open(sparse_store) as store:
        ends = {(t, q): store.max_offset(t, q) for t in store.topics() for q in store.queue_ids(t)}
    assert len(ends) == TOPICS * QUEUES and set(ends.values()) == {PER_QUEUE}
    queues = len(ends)
    # the end search: one read up to the file's first hole, which also gives recovery its hints (the units
    # pointing into the last commit-log file); reading each file whole was 6 MB
    assert cost.files_opened == cost.reads == queues
    assert cost.pages_read <= 2 * queues
    assert cost.bytes_read <= 5 * 1024 * queues
    assert cost.files_mapped <= 2  # the commit log's file (recovery walks it); no consume-queue file is mapped


def test_a_lookup_in_one_queue_reads_only_that_queue(sparse_store):
    with RocketStore.open(sparse_store) as store:
        store.max_phy_offset()
        with counting() as cost:
            result = store.get_message("t0100", 5, 1, max_nums=2)
            rows = pa.Table.from_batches(list(store.read_queue("t0007", 3, 0, 3, columns=("queueOffset",))))
    assert result.messages.num_rows == 2
    assert rows.column("queueOffset").to_pylist() == [0, 1, 2]
    # a few units of the two queues: no other queue's file is opened and no file is read past its units
    assert cost.files_opened <= 8 and cost.bytes_read <= 4 * 1024


def test_no_consume_queue_file_is_read_past_its_units(sparse_store):
    """Not one page of preallocated zeros beyond the first hole is read, across opening, ends, a queue read
    and a tag-filtered read of every queue."""
    with counting() as cost, RocketStore.open(sparse_store) as store:
        for t in store.topics()[:20]:
            for q in store.queue_ids(t):
                list(store.read_queue(t, q, None, None, tags="rare", columns=("queueOffset",)))
    assert cost.bytes_read < 20 * QUEUES * 12 * 1024 + TOPICS * QUEUES * 5 * 1024


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forked parent (pytest's own size)
PEAK_RSS_SCRIPT = textwrap.dedent("""
    import sys

    def peak_kib():
        with open("/proc/self/status") as fh:
            return int(fh.read().split("VmHWM:")[1].split()[0])

    from rocketstore_spark.store import RocketStore
    base = peak_kib()
    rows = 0
    with RocketStore.open(sys.argv[1]) as store:
        ranges = [(t, q, None, None) for t in store.topics() for q in store.queue_ids(t)]
        ends = sum(store.max_offset(t, q) for t, q, _, _ in ranges)
        for batch in store.read_queues(ranges, columns=("topic", "queueOffset", "body")):
            rows += batch.num_rows
    print(ends, rows, base, peak_kib())
""")


def test_a_process_over_2000_preallocated_queues_stays_small(sparse_store):
    """Opening the store, every queue's end and a read of every queue, in a fresh process: the peak resident
    size grows by metadata per queue, not by the 12 GB of preallocated consume-queue files."""
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_SCRIPT, str(sparse_store)], capture_output=True,
                         text=True, check=True).stdout.split()
    ends, rows, base_kib, peak_kib = map(int, out)
    assert ends == rows == TOPICS * QUEUES * PER_QUEUE
    assert peak_kib < 300 * 1024
    assert peak_kib - base_kib < 64 * 1024  # above the imports: per-queue metadata and bounded buffers


def test_a_reader_with_a_known_valid_end_loads_only_the_queues_it_names(sparse_store):
    """What an executor does for a queue partition: no listing of the 2,000 queues, no end search of theirs."""
    with RocketStore.open(sparse_store) as full:
        valid_end, sizes = full.max_phy_offset(), full.sizes
        expected = pa.Table.from_batches(list(full.read_queue("t0042", 6, columns=("body", "queueOffset"))))
    with counting() as cost, RocketStore.open(sparse_store, valid_end=valid_end, lazy_queues=True,
                                              consume_queue_file_size=sizes.consume_queue_file_size,
                                              commit_log_file_size=sizes.commit_log_file_size) as store:
        got = pa.Table.from_batches(list(store.read_queue("t0042", 6, columns=("body", "queueOffset"))))
        assert store.topics() == ["t0042"] and not store.has_queue("t9999", 0)
    assert got.equals(expected)
    assert cost.files_opened <= 4


def test_short_ranges_of_many_queues_are_decoded_together(tmp_path):
    """A micro-batch spread over many queues (a few messages each) decodes a few batches, not one per queue,
    and returns every row once with each queue's rows in queue-offset order."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root, consume_queue_file_size=20 * 1000) as w:
        w.append(many_queues_table(25, 8, 3))
    with RocketStore.open(root) as store:
        ranges = [(t, q, 1, 3) for t in store.topics() for q in store.queue_ids(t)]
        batches = list(store.read_queues(ranges, columns=["topic", "queueId", "queueOffset"]))
    rows = [r for b in batches for r in b.to_pylist()]
    assert len(ranges) == 200 and len(rows) == 400 and len(batches) <= 2
    by_queue: dict = {}
    for r in rows:
        by_queue.setdefault((r["topic"], r["queueId"]), []).append(r["queueOffset"])
    assert all(offsets == [1, 2] for offsets in by_queue.values()) and len(by_queue) == 200


def test_reads_scattered_over_a_large_commit_log_hold_a_bounded_part_of_it(tmp_path):
    """A read of many queues whose records interleave through ~300 MB of commit log (a queue plan over a
    production store): the mapped pages it holds are let go in steps, so a fresh process's peak stays far below
    the bytes it read (the kernel maps whole page-cache folios around each touched record)."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root, consume_queue_file_size=20 * 100_000) as w:
        for _ in range(6):
            w.append(many_queues_table(50, 8, 250, body=200))  # 100k messages over 400 queues, interleaved
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_SCRIPT, str(root)], capture_output=True,
                         text=True, check=True).stdout.split()
    ends, rows, base_kib, peak_kib = map(int, out)
    assert ends == rows == 600_000
    log_bytes = sum(p.stat().st_size for p in (root / L.COMMITLOG_DIR).iterdir())
    assert log_bytes > 150 << 20
    assert peak_kib - base_kib < 160 * 1024  # the budget (64 MiB of mapped pages) and one decode's buffers


def test_scattered_records_are_decoded_in_pieces_of_bounded_reach():
    from rocketstore_spark.store.read.queue_reads import FAULT_WINDOW, SCATTER_WINDOWS, _resident_pieces

    pos = np.arange(5000, dtype=np.int64) * FAULT_WINDOW * 3  # every record in a window of its own
    pieces = list(_resident_pieces(pos, np.arange(5000)))
    assert sum(len(p) for p, _ in pieces) == 5000 and all(w <= SCATTER_WINDOWS for _, w in pieces)
    close = np.arange(5000, dtype=np.int64) * 100  # records side by side: one piece
    assert len(list(_resident_pieces(close, np.arange(5000)))) == 1


@pytest.fixture(scope="module")
def spread_store(tmp_path_factory):
    """200 queues whose "rare" records (1 in 97) lie ~200 KB apart: alone in their page windows."""
    root = tmp_path_factory.mktemp("spread") / "store"
    with RocketStore.open_writer(root, consume_queue_file_size=20 * 1000) as w:
        w.append(many_queues_table(25, 8, 40, body=2000))
    return root


def rare_rows(store, verify_crc=False):
    return [r for t in store.topics() for q in store.queue_ids(t)
            for b in store.read_queue(t, q, tags="rare", columns=["queueOffset", "commitLogOffset", "storeSize",
                                                                  "body"], verify_crc=verify_crc)
            for r in b.to_pylist()]


def test_a_selective_read_copies_just_the_records_it_returns(spread_store):
    """Records scattered over the commit log are copied with a read each: the bytes read are the consume
    queues' units and those records, nothing around them, and no commit-log page is mapped for them."""
    with RocketStore.open(spread_store) as store:
        units = sum(store.max_offset(t, q) for t in store.topics() for q in store.queue_ids(t))
        everything = [r for t in store.topics() for q in store.queue_ids(t)
                      for b in store.read_queue(t, q, columns=["queueOffset", "commitLogOffset", "storeSize", "tags",
                                                               "body"]) for r in b.to_pylist()]
        with counting() as cost:
            rows = rare_rows(store)
    expected = [{k: r[k] for k in ("queueOffset", "commitLogOffset", "storeSize", "body")}
                for r in everything if r["tags"] == "rare"]
    assert rows == expected and len(rows) == 25 * 8 * 40 // 97 + 1
    assert cost.bytes_read == units * L.CQ_STORE_UNIT_SIZE + sum(r["storeSize"] for r in rows)
    assert cost.files_mapped == 0


def test_a_broken_record_read_through_a_copy_is_named_by_its_place_in_the_file(spread_store, tmp_path):
    import shutil

    from rocketstore_spark.errors import CorruptRecordError

    root = tmp_path / "store"
    shutil.copytree(spread_store, root)
    with RocketStore.open(root) as store:
        victim = rare_rows(store)[7]["commitLogOffset"]
        size = store.commitlog.file_size
    path = root / L.COMMITLOG_DIR / f"{victim - victim % size:020d}"
    with open(path, "r+b") as fh:  # a byte of its body: only the body CRC can tell
        fh.seek(victim % size)
        record = fh.read(rows_size(root, victim))
        fh.seek(victim % size + record.index(b"x" * 2000) + 1000)
        fh.write(b"?")
    with RocketStore.open(root, check_crc_on_recover=False) as store:
        assert len(rare_rows(store)) == 83
        with pytest.raises(CorruptRecordError, match="CRC") as e:
            rare_rows(store, verify_crc=True)
    assert str(e.value.path) == str(path) and e.value.offset == victim % size


def rows_size(root, offset):
    with RocketStore.open(root) as store:
        return next(r["storeSize"] for r in rare_rows(store) if r["commitLogOffset"] == offset)


def test_records_are_copied_when_scattered_and_mapped_when_close():
    from rocketstore_spark.store.read.queue_reads import COPY_BYTES, FAULT_WINDOW, _scattered

    apart = np.arange(100, dtype=np.int64) * FAULT_WINDOW
    assert _scattered(apart, np.full(100, 500))
    assert not _scattered(np.arange(100, dtype=np.int64) * 500, np.full(100, 500))  # side by side
    assert not _scattered(apart, np.full(100, COPY_BYTES // 50))  # too many bytes to copy at once


OPEN_PEAK_SCRIPT = textwrap.dedent("""
    import sys

    def peak_kib():
        with open("/proc/self/status") as fh:
            return int(fh.read().split("VmHWM:")[1].split()[0])

    from rocketstore_spark.store import RocketStore
    base = peak_kib()
    with RocketStore.open(sys.argv[1]) as store:
        end = store.max_phy_offset()
        mode = store.recovery.mode
    print(end, mode, base, peak_kib())
""")


def test_recovery_after_a_crash_holds_a_bounded_part_of_the_commit_log(tmp_path):
    """Opening after a crash with no checkpoint walks and re-dispatches every record from the first file, the
    way the broker's abnormal recovery does: a fresh process lets the pages go step by step and keeps no parse of
    a whole file, so its peak grows far less than the commit log it walks."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root, commit_log_file_size=64 << 20) as w:
        for _ in range(6):
            w.append(many_queues_table(50, 8, 250, body=200))
    end = sum(p.stat().st_size for p in (root / L.COMMITLOG_DIR).iterdir() if p.stat().st_size)
    (root / "checkpoint").unlink()
    (root / "abort").touch()
    out = subprocess.run([sys.executable, "-c", OPEN_PEAK_SCRIPT, str(root)], capture_output=True,
                         text=True, check=True).stdout.split()
    valid_end, mode, base_kib, peak_kib = int(out[0]), out[1], int(out[2]), int(out[3])
    assert mode == "abnormal" and 150 << 20 < valid_end <= end
    assert peak_kib - base_kib < 100 * 1024
