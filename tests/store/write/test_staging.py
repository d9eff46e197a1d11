"""A task's staging: where its record bytes go, in what pieces, and what they hold."""

import ctypes
import errno
import os

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files import writable_window
from rocketstore_spark.store.format.encoder import ENCODE_PIECE_BYTES
from rocketstore_spark.store.write import staging
from rocketstore_spark.store.write.encoded_batch import EncodedBatch
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.staging import stage


def bodies(n, size, start=0):
    rng = np.random.default_rng(start)
    return pa.table({"topic": ["orders"] * n, "queueId": [i % 4 for i in range(n)],
                     "body": [rng.bytes(size) for _ in range(n)],
                     "keys": [[f"k{start + i}"] for i in range(n)]})


def _count_stores(monkeypatch):
    """Record ``(offset in file, bytes)`` of every store into the staged commit log: through a window, or by
    ``pwrite``."""
    stores = {"window": [], "pwrite": []}
    real_pwrite, real_write = os.pwrite, writable_window.WritableWindow.write

    def counting_pwrite(fd, data, at):
        if "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):  # the staged records (not the reservation)
            stores["pwrite"].append((at, len(memoryview(data))))
        return real_pwrite(fd, data, at)

    def counting_write(window, at, data):
        stores["window"].append((at, len(data)))
        return real_write(window, at, data)

    monkeypatch.setattr(staging.os, "pwrite", counting_pwrite)
    monkeypatch.setattr(writable_window.WritableWindow, "write", counting_write)
    return stores


def _orders_bodies(root, queue_id=1):
    with RocketStore.open(root) as s:
        return [b for t in s.read_queue("orders", queue_id, columns=["body"]) for b in t.column("body").to_pylist()]


def test_staged_records_go_through_allocated_windows_in_whole_aligned_pieces(tmp_path, monkeypatch):
    """Records are stored through maps of their reservations (allocated first), in pieces that begin and end on
    multiples of the piece size except a reservation's first and last: counted on the stores themselves, for two
    reservations of about 7 MB in one file, which then publish as the messages staged."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root) as w:
        w.append(bodies(3, 100))  # the job starts at an odd offset
    stores = _count_stores(monkeypatch)
    job = new_job_id()
    tables = [bodies(6000, 1111, start=1), bodies(6000, 1111, start=2)]
    stems = stage(root, job, "p", tables, store_host="10.0.0.1:10911")
    assert stores["pwrite"] == []  # this filesystem allocates ahead: no record went by pwrite
    record_writes = [(at, n) for at, n in stores["window"] if n > 8]  # the BLANK markers aside (none in this job)
    assert len(record_writes) >= 8
    assert sum(n for _, n in record_writes) > 14_000_000
    ends = {at + n for at, n in record_writes}
    starts = {at for at, n in record_writes}
    # a reservation's first write begins where the records do, its last ends where they end: inside, every cut
    # is a multiple of the piece size
    unaligned_starts = sorted(at for at in starts if at % ENCODE_PIECE_BYTES)
    unaligned_ends = sorted(e for e in ends if e % ENCODE_PIECE_BYTES)
    assert len(unaligned_starts) <= 2 and len(unaligned_ends) <= 2
    assert all(n <= ENCODE_PIECE_BYTES + 1111 + 300 for _, n in record_writes)
    publish_staged(root, job, stems, store_host="10.0.0.1:10911")
    want = [b for t in [bodies(3, 100)] + tables for b in t.filter(pa.compute.equal(t["queueId"], 1))
            .column("body").to_pylist()]
    assert _orders_bodies(root) == want


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.ENOSYS])
def test_a_filesystem_that_cannot_allocate_ahead_gets_the_records_by_pwrite(tmp_path, monkeypatch, refusal):
    """Where ``fallocate`` is refused (network and FUSE filesystems), no map is made — a store through a map into
    unallocated blocks would meet a full disk as SIGBUS — and the same bytes go by ``pwrite``."""
    def refusing(fd, mode, offset, length):
        ctypes.set_errno(refusal)
        return -1

    roots = {}
    for name in ("allocated", "refused"):
        root = roots[name] = tmp_path / name
        with RocketStore.open_writer(root) as w:
            w.append(bodies(3, 100))
        with monkeypatch.context() as patched:
            stores = _count_stores(patched)
            if name == "refused":
                patched.setattr(writable_window, "_FALLOCATE", refusing)
            job = new_job_id()
            tables = [bodies(500, 700, start=1), bodies(300, 900, start=2)]
            # fixed ids and born times: the staged bytes of both runs compare equal
            tables = [t.append_column("uniqKey", pa.array([f"U{i:031d}" for i in range(t.num_rows)]))
                      .append_column("bornTimestamp", pa.array([1_600_000_000_000] * t.num_rows)) for t in tables]
            stems = stage(root, job, "p", tables, store_host="10.0.0.1:10911", now_ms=1_700_000_000_000)
            staged = sorted((root / ".rocketstore" / "staging" / job / "commitlog").iterdir())
            assert stores["window" if name == "allocated" else "pwrite"]
            assert not stores["pwrite" if name == "allocated" else "window"]
            roots[name + "-bytes"] = [p.read_bytes() for p in staged]
        publish_staged(root, job, stems, store_host="10.0.0.1:10911")
    assert roots["allocated-bytes"] == roots["refused-bytes"]
    assert _orders_bodies(roots["allocated"]) == _orders_bodies(roots["refused"])


def test_staged_records_hold_their_final_queue_offsets_and_store_time(tmp_path):
    """A task encodes records final: each holds the queue offset its reservation took (continuing the store's
    queue, and the job's earlier reservations) and the reservation's store time; the metadata says the same."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root) as w:
        w.append(bodies(10, 100))  # queues 0..3 hold 3, 3, 2, 2 messages
    job = new_job_id()
    stems = stage(root, job, "p", [bodies(8, 100, start=1), bodies(4, 100, start=2)], store_host="10.0.0.1:10911",
                  now_ms=1_700_000_000_000, rows_per_file=1)
    batches = [EncodedBatch.load(stem, root / ".rocketstore" / "staging" / job / "commitlog", 1 << 30)
               for stem in stems]
    assert [b.staged_queue_offset.tolist() for b in batches] == [[3, 3, 2, 2, 4, 4, 3, 3], [5, 5, 4, 4]]
    assert all((b.store_ts == 1_700_000_000_000).all() for b in batches)
    publish_staged(root, job, stems, store_host="10.0.0.1:10911")
    with RocketStore.open(root) as s:
        rows = [r for t in s.read_queue("orders", 0, columns=["queueOffset", "storeTimestamp"]) for r in t.to_pylist()]
    assert [r["queueOffset"] for r in rows] == list(range(6))
    stamped = [r["storeTimestamp"] for r in rows[3:]]
    assert all(ts == stamped[0] for ts in stamped) and str(stamped[0]).startswith("2023-11-14")
