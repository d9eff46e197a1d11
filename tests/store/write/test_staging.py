"""A task's staging: where its record bytes go, in what pieces."""

import os

import numpy as np
import pyarrow as pa

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format.encoder import ENCODE_PIECE_BYTES
from rocketstore_spark.store.write import staging
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.staging import stage


def bodies(n, size, start=0):
    rng = np.random.default_rng(start)
    return pa.table({"topic": ["orders"] * n, "queueId": [i % 4 for i in range(n)],
                     "body": [rng.bytes(size) for _ in range(n)],
                     "keys": [[f"k{start + i}"] for i in range(n)]})


def test_staged_writes_fill_whole_aligned_pieces(tmp_path, monkeypatch):
    """Each staged write but the first and the last of a reservation begins and ends on a multiple of the piece
    size (so the page cache keeps each such piece as one large folio): counted on the writes themselves, for
    two reservations of about 7 MB in one file, which then publish as the messages staged."""
    root = tmp_path / "store"
    with RocketStore.open_writer(root) as w:
        w.append(bodies(3, 100))  # the job starts at an odd offset
    writes = []
    real_pwrite = os.pwrite

    def counting(fd, data, at):
        if "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):  # the staged records (not the reservation)
            writes.append((at, len(memoryview(data))))
        return real_pwrite(fd, data, at)

    monkeypatch.setattr(staging.os, "pwrite", counting)
    job = new_job_id()
    tables = [bodies(6000, 1111, start=1), bodies(6000, 1111, start=2)]
    stems = stage(root, job, "p", tables, store_host="10.0.0.1:10911")
    record_writes = [(at, n) for at, n in writes if n > 8]  # the BLANK markers aside (none in this job)
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
    with RocketStore.open(root) as s:
        got = [b for t in s.read_queue("orders", 1, columns=["body"]) for b in t.column("body").to_pylist()]
    want = [b for t in [bodies(3, 100)] + tables for b in t.filter(pa.compute.equal(t["queueId"], 1))
            .column("body").to_pylist()]
    assert got == want
