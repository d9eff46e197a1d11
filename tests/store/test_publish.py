"""All-or-nothing publication of staged batches, with the publishing process killed at every step."""

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.publish import discard_staged, new_job_id, publish_staged, stage
from tests.store.test_writer import SMALL, messages, tree_digest

STEPS = ["journal", "part-0", "part-1", "before-done"]


@pytest.fixture
def base_store(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open(root, mode="a", **SMALL) as w:
        w.append(messages(300))
    return root


def stage_job(root, job):
    return (stage(root, job, "p0", [messages(200, start=300), messages(50, topic="fresh", start=500)],
                  store_host="10.0.0.1:10911")
            + stage(root, job, "p1", [messages(80, start=550)], store_host="10.0.0.1:10911"))


def run_publish(root, job, stems, step):
    code = ("import sys\nfrom rocketstore_spark.store.publish import publish_staged\n"
            f"publish_staged({str(root)!r}, {job!r}, {stems!r}, new_topic_queues={{'fresh': 4}})\n")
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ROCKETSTORE_FAULT_AT=step),
                          timeout=120)


@pytest.mark.parametrize("step", STEPS)
def test_killed_before_the_commit_point_rolls_back_completely(base_store, step):
    before = tree_digest(base_store)
    job = new_job_id()
    result = run_publish(base_store, job, stage_job(base_store, job), step)
    assert result.returncode == -9  # the fault really fired
    with RocketStore.open(base_store) as s:  # readable without error while the journal is pending
        assert s.max_phy_offset() > 0
    with RocketStore.open(base_store, mode="a") as w:
        assert any("rolled back" in a for a in w.recovery_actions)
    assert tree_digest(base_store) == before
    assert not (base_store / ".rocketstore").exists()


def test_killed_after_the_commit_point_keeps_everything(base_store):
    job = new_job_id()
    assert run_publish(base_store, job, stage_job(base_store, job), "after-done").returncode == -9
    with RocketStore.open(base_store, mode="a") as w:
        assert any("committed" in a for a in w.recovery_actions)
    with RocketStore.open(base_store) as s:
        assert s.topics() == ["fresh", "orders"] and s.queue_ids("fresh") == [0, 1, 2, 3]
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300 + 200 + 80
        assert sum(s.max_offset("fresh", q) for q in range(4)) == 50 and s.max_offset("fresh", 3) == 0


def test_publish_and_abort(base_store):
    before = tree_digest(base_store)
    job = new_job_id()
    stems = stage_job(base_store, job)
    discard_staged(base_store, job)
    assert tree_digest(base_store) == before and not list((base_store / ".rocketstore").rglob("*.rec"))
    job = new_job_id()
    result = publish_staged(base_store, job, stage_job(base_store, job), new_topic_queues={"fresh": 4})
    assert result["count"] == 330 and not (base_store / ".rocketstore").exists()
    with RocketStore.open(base_store) as s:
        bodies = [b for q in s.queue_ids("orders") for t in s.read_queue("orders", q, columns=["body"])
                  for b in t.column(0).to_pylist()]
        assert len(bodies) == len(set(bodies)) == 580
    assert stems


def test_sink_batches_are_idempotent(base_store):
    for attempt in range(2):
        job = new_job_id()
        stems = stage(base_store, job, "p", [messages(10, start=1000)], store_host="10.0.0.1:10911")
        result = publish_staged(base_store, job, stems, sink=("sink-a", 7))
        assert result.get("skipped", False) == (attempt == 1)
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 310


def test_overwrite_replaces_and_rolls_back(base_store):
    before = tree_digest(base_store)
    job = new_job_id()
    stems = stage(base_store, job, "p", [pa.table({"topic": ["other"], "body": [b"only"]})],
                  store_host="10.0.0.1:10911")
    # sizes given, as the sink does from its options: a store this small can leave its index sizes ambiguous
    code = ("from rocketstore_spark.store.publish import publish_staged\n"
            f"publish_staged({str(base_store)!r}, {job!r}, {stems!r}, overwrite=True, sizes={SMALL!r})\n")
    assert subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ROCKETSTORE_FAULT_AT="part-0"),
                          timeout=120).returncode == -9
    RocketStore.open(base_store, mode="a", **SMALL).close()
    assert tree_digest(base_store) == before
    job = new_job_id()
    stems = stage(base_store, job, "p", [pa.table({"topic": ["other"], "body": [b"only"]})],
                  store_host="10.0.0.1:10911")
    publish_staged(base_store, job, stems, overwrite=True, sizes=SMALL)
    with RocketStore.open(base_store, **SMALL) as s:
        assert s.topics() == ["other"]


def test_staged_parts_of_many_tables_publish_in_order_with_their_topics_and_keys(tmp_path):
    """Tables are encoded one by one into shared staging files (topic names remapped per file); publishing
    gives the same store as appending the tables directly."""
    tables = [messages(30, start=0), messages(20, topic="fresh", start=30), messages(25, start=50),
              messages(10, topic="third", start=75)]
    job = new_job_id()
    root = tmp_path / "staged"
    stems = stage(root, job, "p0", tables, store_host="10.0.0.1:10911", rows_per_file=40)
    assert len(stems) == 2  # 30+20 rows (closed on reaching 40), then 25+10
    publish_staged(root, job, stems, new_topic_queues={"fresh": 3, "third": 3}, now_ms=1_700_000_000_000,
                   **({"sizes": SMALL}))
    with RocketStore.open(root) as s:
        rows = [r for b in s.scan_commitlog(columns=("topic", "body", "keys", "queueOffset")) for r in b.to_pylist()]
    expected = [r for t in tables for r in t.select(["topic", "body", "keys"]).to_pylist()]
    assert [(r["topic"], r["body"], r["keys"]) for r in rows] == \
        [(r["topic"], r["body"], r["keys"]) for r in expected]
    with RocketStore.open(root) as s:
        for i in (0, 31, 60, 80):
            key = expected[i]["keys"][0]
            found = s.query_by_key(expected[i]["topic"], key, columns=("body",)).column(0).to_pylist()
            assert found == [expected[i]["body"]], key


@pytest.mark.parametrize("sync_flush", [True, False])
def test_sync_flush_forces_the_commit_log_to_disk_and_async_leaves_it_to_the_kernel(base_store, monkeypatch,
                                                                                  sync_flush):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                 real_fsync(fd)))
    job = new_job_id()
    stems = stage_job(base_store, job)
    synced.clear()
    publish_staged(base_store, job, stems, new_topic_queues={"fresh": 4}, sync_flush=sync_flush)
    commitlog_synced = [p for p in synced if "/commitlog/" in p]
    assert bool(commitlog_synced) == sync_flush
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300 + 200 + 80


def test_staging_files_close_at_a_byte_limit_and_each_is_deleted_once_published(base_store, monkeypatch):
    """Small staging files, deleted as soon as their records are in the commit log, let the commit log reuse
    the page cache they held; a crash after that point still rolls back from the journal alone."""
    from rocketstore_spark.store import publish

    job = new_job_id()
    stems = stage(base_store, job, "p", [messages(40, start=1000), messages(40, start=2000)],
                  store_host="10.0.0.1:10911", bytes_per_file=1)
    assert len(stems) == 2  # one file per table: each reached the byte limit
    seen = []
    real = publish.StoreWriter.append_encoded
    monkeypatch.setattr(publish.StoreWriter, "append_encoded", lambda self, batch, **kw: (
        seen.append([os.path.exists(s + ".rec") for s in stems]), real(self, batch, **kw)))
    publish_staged(base_store, job, stems)
    assert seen == [[True, True], [False, True]]
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 380
    before = tree_digest(base_store)
    job = new_job_id()
    stems = stage(base_store, job, "p", [messages(30, start=3000), messages(30, start=4000)],
                  store_host="10.0.0.1:10911", bytes_per_file=1)
    assert run_publish(base_store, job, stems, "part-1").returncode == -9
    assert not os.path.exists(stems[0] + ".rec") and not os.path.exists(stems[1] + ".rec")
    RocketStore.open(base_store, mode="a").close()
    assert tree_digest(base_store) == before
