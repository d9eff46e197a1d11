"""Writing into many queues costs one consume-queue write per queue and file, not one per queue per batch:
counted, never timed."""

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.write import appender, consume_queue_writer


def test_a_table_spread_over_many_queues_writes_each_queue_once(tmp_path, monkeypatch):
    monkeypatch.setattr(appender, "CHUNK_BYTES", 4096)  # the table is encoded in ~100 chunks
    writes, mkdirs = [], []

    class CountingOs:  # the consume-queue writer's os module, counting its writes
        def __getattr__(self, name):
            return getattr(os, name)

        def pwrite(self, fd, data, at):
            writes.append(at)
            return os.pwrite(fd, data, at)

    monkeypatch.setattr(consume_queue_writer, "os", CountingOs())
    real_create, counted = consume_queue_writer.create_full_size, writes

    def create_full_size(path, size, header=b"", writes=(), sync=False):
        counted.extend(at for at, _ in writes)  # a new file is created with its units in it
        return real_create(path, size, header, writes, sync)

    monkeypatch.setattr(consume_queue_writer, "create_full_size", create_full_size)
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self.parent.parent.name == "consumequeue":
            mkdirs.append(self)
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    n, topics = 6000, 30
    rng = np.random.default_rng(1)
    table = pa.table({"topic": [f"T{t}" for t in rng.integers(0, topics, n)],
                      "queueId": pa.array(rng.integers(0, 4, n), pa.int32()),
                      "body": pa.array([b"x" * 40] * n, pa.binary())})
    root = tmp_path / "store"
    with RocketStore.open_writer(root, consume_queue_file_size=20 * 100) as w:
        w.append(table)
        queues = {(t, q) for t, q in zip(table.column("topic").to_pylist(), table.column("queueId").to_pylist())}
        files = sum(-(-w.queue_next_offset(t, q) // 100) for t, q in queues)
    assert len(queues) == 4 * topics
    assert len(writes) == files  # one write per queue and consume-queue file, however many chunks
    # each queue's directory made once (its topic's directory made before it)
    assert len(set(mkdirs)) == len(queues) and len(mkdirs) == len(queues)
    with RocketStore.open(root) as store:
        assert sum(store.max_offset(t, q) for t, q in queues) == n
        rows = store.read_queues([(t, q, None, None) for t, q in sorted(queues)], columns=["queueOffset"])
        assert sum(b.num_rows for b in rows) == n
