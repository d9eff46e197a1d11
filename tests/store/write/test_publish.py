"""All-or-nothing publication of staged batches, with the publishing process killed at every step."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.errors import StrayFileWarning
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.known_end import KNOWN_END_FILE
from rocketstore_spark.store.read.verify import verify_store
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.staging import discard_staged, stage
from tests.store.write.test_writer import SMALL, messages, no_job_leftovers, tree_digest

STEPS = ["journal", "adopted", "moved", "part-0", "part-1", "before-done"]

NOW = 1_700_000_100_000  # the store time staged records get (the clock when reserved, by default)


@pytest.fixture
def base_store(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(messages(300))
    return root


def stage_job(root, job):
    return (stage(root, job, "p0", [messages(200, start=300), messages(50, topic="fresh", start=500)],
                  store_host="10.0.0.1:10911", new_topic_queues=lambda: {"fresh": 4})
            + stage(root, job, "p1", [messages(80, start=550)], store_host="10.0.0.1:10911", now_ms=NOW))


def run_publish(root, job, stems, step):
    code = ("import sys\nfrom rocketstore_spark.store.write.publish import publish_staged\n"
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
    with RocketStore.open_writer(base_store) as w:
        assert any("rolled back" in a for a in w.recovery_actions)
    assert tree_digest(base_store) == before
    assert no_job_leftovers(base_store)


def test_killed_after_the_commit_point_keeps_everything(base_store):
    job = new_job_id()
    assert run_publish(base_store, job, stage_job(base_store, job), "after-done").returncode == -9
    with RocketStore.open_writer(base_store) as w:
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
    assert tree_digest(base_store) == before and no_job_leftovers(base_store)
    job = new_job_id()
    result = publish_staged(base_store, job, stage_job(base_store, job), new_topic_queues={"fresh": 4})
    assert result["count"] == 330 and result["in_place"] and no_job_leftovers(base_store)
    with RocketStore.open(base_store) as s:
        bodies = [b for q in s.queue_ids("orders") for t in s.read_queue("orders", q, columns=["body"])
                  for b in t.column(0).to_pylist()]
        assert len(bodies) == len(set(bodies)) == 580
    assert stems


def test_sink_batches_are_idempotent(base_store):
    for attempt, batch_id in enumerate((7, 7, 8)):  # a replayed batch, then the query goes on in this process
        job = new_job_id()
        stems = stage(base_store, job, "p", [messages(10, start=1000 + 10 * attempt)], store_host="10.0.0.1:10911",
                      now_ms=NOW)
        result = publish_staged(base_store, job, stems, sink=("sink-a", batch_id))
        assert result.get("skipped", False) == (attempt == 1)
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 320


def test_overwrite_replaces_and_rolls_back(base_store):
    before = tree_digest(base_store)
    job = new_job_id()
    stems = stage(base_store, job, "p", [pa.table({"topic": ["other"], "body": [b"only"]})],
                  store_host="10.0.0.1:10911", now_ms=NOW)
    # sizes given, as the sink does from its options: a store this small can leave its index sizes ambiguous
    code = ("from rocketstore_spark.store.write.publish import publish_staged\n"
            f"publish_staged({str(base_store)!r}, {job!r}, {stems!r}, overwrite=True, sizes={SMALL!r})\n")
    assert subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ROCKETSTORE_FAULT_AT="part-0"),
                          timeout=120).returncode == -9
    RocketStore.open_writer(base_store, **SMALL).close()
    assert tree_digest(base_store) == before
    job = new_job_id()
    stems = stage(base_store, job, "p", [pa.table({"topic": ["other"], "body": [b"only"]})],
                  store_host="10.0.0.1:10911", now_ms=NOW)
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
    stems = stage(root, job, "p0", tables, store_host="10.0.0.1:10911", rows_per_file=40,
                  now_ms=1_700_000_000_000)
    assert len(stems) == 2  # 30+20 rows (closed on reaching 40), then 25+10
    publish_staged(root, job, stems, new_topic_queues={"fresh": 3, "third": 3},
                   **({"sizes": SMALL}))
    with RocketStore.open(root) as s:
        rows = [r for b in s.scan_raw(columns=("topic", "body", "keys", "queueOffset")) for r in b.to_pylist()]
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
    # the commit protocol's own files follow the data: forced under SYNC_FLUSH (the journal before the store
    # changes, the done mark, the topic table), left to write-back under ASYNC_FLUSH, where nothing is forced
    journal_synced = [p for p in synced if "/.rocketstore/journal/" in p]
    if sync_flush:
        assert len(journal_synced) >= 2 and any(p.endswith("topics.json.tmp") or "/config" in p for p in synced)
    else:
        assert synced == []
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300 + 200 + 80


def same_bytes(a, b):
    """Every file byte-identical, except that index files are named by the time they were created and the
    broker's topic table carries the time it was changed."""
    import json

    def content(path):
        if path.parts[-2:] == ("config", "topics.json"):
            table = json.loads(path.read_text())
            table["dataVersion"].pop("timestamp")
            return table
        return path.read_bytes()

    def files(root):
        names = sorted(p.relative_to(root) for p in root.rglob("*")
                       if p.is_file() and p.name not in ("lock", KNOWN_END_FILE))
        index = [n for n in names if n.parts[0] == "index"]
        return [(n if n.parts[0] != "index" else f"index#{index.index(n)}", content(root / n)) for n in names]

    return files(a) == files(b)


def fixed(n, start, **extra):
    """Messages whose bytes do not depend on when they are encoded (uniqKey and born time given)."""
    return messages(n, start=start, uniqKey=[f"{start + i:032X}" for i in range(n)],
                    bornTimestamp=[1_700_000_000_000 + start + i for i in range(n)], **extra)


@pytest.mark.parametrize("put_keys", [1, 150, 2_000_000])  # index keys put batch by batch, in groups, all at once
def test_in_place_and_copied_publications_give_the_same_bytes(base_store, tmp_path, monkeypatch, put_keys):
    """Staged at the offsets they get, records are published in place (the staged files become the store's);
    an attempt that failed after reserving room leaves a gap, and then every record is copied instead. Both
    give byte-identical stores, equal to appending the same messages directly."""
    import shutil

    from rocketstore_spark.store.write import appender

    monkeypatch.setattr(appender, "INDEX_PUT_KEYS", put_keys)

    copies = {name: shutil.copytree(base_store, tmp_path / name) for name in ("in_place", "copied", "direct")}
    tables = [fixed(200, 1000), fixed(30, 2000, topic="fresh"), fixed(120, 3000)]
    job = new_job_id()
    stems = stage(copies["in_place"], job, "a", tables[:2], store_host="10.0.0.1:10911", now_ms=NOW)
    stems += stage(copies["in_place"], job, "b", tables[2:], store_host="10.0.0.1:10911", now_ms=NOW)
    staged = sorted((copies["in_place"] / ".rocketstore" / "staging" / job / "commitlog").iterdir())
    inodes = {p.name: p.stat().st_ino for p in staged}
    result = publish_staged(copies["in_place"], job, stems)
    assert result["in_place"] and result["count"] == 350
    moved = {n for n, ino in inodes.items() if (copies["in_place"] / "commitlog" / n).stat().st_ino == ino}
    assert moved == set(inodes) - {sorted((base_store / "commitlog").iterdir())[-1].name}  # all but the old end's

    job = new_job_id()
    stems = stage(copies["copied"], job, "a", tables[:2], store_host="10.0.0.1:10911", now_ms=NOW)
    stage(copies["copied"], job, "failed", [fixed(50, 9000)], store_host="10.0.0.1:10911", now_ms=NOW)  # not committed
    stems += stage(copies["copied"], job, "b", tables[2:], store_host="10.0.0.1:10911", now_ms=NOW)
    result = publish_staged(copies["copied"], job, stems)
    assert not result["in_place"] and result["count"] == 350

    from rocketstore_spark.store.format.encoder import UniqKeyFactory
    from rocketstore_spark.store.write.appender import StoreWriter
    from rocketstore_spark.store.write.encoded_batch import encode_table

    with StoreWriter.open(copies["direct"], store_host="10.0.0.1:10911") as w:
        for t in tables:
            w.append_encoded(encode_table(t, store_host="10.0.0.1:10911", uniq_factory=UniqKeyFactory()),
                             now_ms=NOW)
    assert same_bytes(copies["in_place"], copies["copied"]) and same_bytes(copies["in_place"], copies["direct"])
    with RocketStore.open(copies["in_place"]) as s:
        assert verify_store(s) == []
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300 + 320


def test_a_zombie_attempt_cannot_write_once_the_job_is_committed_or_aborted(base_store):
    """An attempt still running when the driver commits (a speculative copy, a task Spark gave up on) must not
    touch the files that just became the store's: its next reservation or write fails."""
    from rocketstore_spark.errors import JobClosedError

    for finish in ("commit", "abort"):
        job = new_job_id()
        stems = stage(base_store, job, "p0", [fixed(40, 1000)], store_host="10.0.0.1:10911", now_ms=NOW)
        before = None

        def zombie_tables(finish=finish, job=job, stems=stems):
            nonlocal before
            yield fixed(10, 5000)
            if finish == "commit":
                publish_staged(base_store, job, stems)
            else:
                discard_staged(base_store, job)
            before = tree_digest(base_store)
            yield fixed(10, 6000)

        with pytest.raises(JobClosedError, match="already committed or aborted"):
            stage(base_store, job, "zombie", zombie_tables(), store_host="10.0.0.1:10911", now_ms=NOW)
        assert tree_digest(base_store) == before
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 340


@pytest.mark.parametrize("step", ["part-0", "part-1"])
def test_a_copied_publication_killed_midway_rolls_back(base_store, step):
    before = tree_digest(base_store)
    job = new_job_id()
    stems = stage(base_store, job, "a", [fixed(30, 1000), fixed(30, 2000)], store_host="10.0.0.1:10911", now_ms=NOW)
    stage(base_store, job, "failed", [fixed(5, 9000)], store_host="10.0.0.1:10911", now_ms=NOW)
    stems += stage(base_store, job, "b", [fixed(30, 3000)], store_host="10.0.0.1:10911", now_ms=NOW)
    assert run_publish(base_store, job, stems, step).returncode == -9
    RocketStore.open_writer(base_store).close()
    assert tree_digest(base_store) == before


def test_recovery_removes_staging_of_closed_jobs_and_keeps_open_ones(base_store):
    """A driver that died between closing its job and deleting the staged files leaves them behind; the next
    writer removes them. A job whose reservation is still open may be running elsewhere and is left alone."""
    from rocketstore_spark.store.write.reservation import JobReservation
    from rocketstore_spark.store.write.store_meta import staging_dir

    closed, running = new_job_id(), new_job_id()
    stage(base_store, closed, "p", [fixed(20, 1000)], store_host="10.0.0.1:10911", now_ms=NOW)
    stage(base_store, running, "p", [fixed(20, 2000)], store_host="10.0.0.1:10911", now_ms=NOW)
    with JobReservation(staging_dir(base_store, closed)) as reservation:
        reservation.close()
    with RocketStore.open_writer(base_store) as w:
        assert any(closed in a and "removed" in a for a in w.recovery_actions)
        assert not any(running in a for a in w.recovery_actions)
    assert not staging_dir(base_store, closed).exists()
    assert (staging_dir(base_store, running) / "commitlog").is_dir()
    with RocketStore.open(base_store) as s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300


def test_files_half_made_by_a_crash_are_skipped_by_readers_and_removed_by_recovery(base_store):
    """Store files are created full size under a hidden name, then renamed: a crash in between leaves only the
    hidden file, which readers skip (the broker would refuse the directory) and recovery deletes."""
    from rocketstore_spark.store.files.store_files import temporary_name

    before = tree_digest(base_store)
    half_made = [temporary_name(base_store / "commitlog" / "00000000000001048576"),
                 temporary_name(base_store / "index" / "20991231235959999"),
                 temporary_name(base_store / "consumequeue" / "orders" / "0" / "00000000000000006000")]
    for path in half_made:
        path.write_bytes(b"")
    with pytest.warns(StrayFileWarning) as caught:  # skipped, and each one named
        s = RocketStore.open(base_store)
    with s:
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == 300
        assert sorted(x.path for x in s.stray_files) == sorted(half_made)
    assert all(any(str(p) in str(w.message) for w in caught) for p in half_made)
    with RocketStore.open_writer(base_store) as w:
        assert sum("a crash interrupted" in a for a in w.recovery_actions) == 3
    assert not any(p.exists() for p in half_made) and tree_digest(base_store) == before


def test_a_task_with_no_rows_or_failing_input_stages_nothing(base_store):
    """Spark aborts a job without waiting for its other tasks: one that runs after the abort must leave nothing."""
    before = tree_digest(base_store)
    listing = sorted(p.relative_to(base_store) for p in base_store.rglob("*"))
    assert stage(base_store, new_job_id(), "p", [], store_host="10.0.0.1:10911", now_ms=NOW) == []

    def failing():
        raise ValueError("bad row")
        yield  # pragma: no cover - a generator failing on its first table

    with pytest.raises(ValueError, match="bad row"):
        stage(base_store, new_job_id(), "p", failing(), store_host="10.0.0.1:10911", now_ms=NOW)
    assert sorted(p.relative_to(base_store) for p in base_store.rglob("*")) == listing
    assert tree_digest(base_store) == before


@pytest.mark.parametrize("base, sync_flush, replaced", [(100, True, True), (100, False, False), (60, True, False)])
def test_the_file_the_store_ended_in_gets_the_smaller_copy(tmp_path, base, sync_flush, replaced):
    """The store's last file holds the store's records and the job's: under SYNC_FLUSH, when the job's part is
    the larger, the store's records are copied into the staged file, which is forced and replaces the store's;
    otherwise (or under ASYNC_FLUSH, where forcing it would cost a write-back of its own) the job's part is
    copied into the store's file. Either way the bytes equal appending the same messages directly, and a
    publication killed right after the move rolls back to the store as it was."""
    import shutil

    from rocketstore_spark.store.format.encoder import UniqKeyFactory
    from rocketstore_spark.store.write.appender import StoreWriter
    from rocketstore_spark.store.write.encoded_batch import encode_table

    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(fixed(base, 0))
    direct, killed = shutil.copytree(root, tmp_path / "direct"), shutil.copytree(root, tmp_path / "killed")
    last = sorted((root / "commitlog").iterdir())[-1]
    store_file = last.stat().st_ino
    job_rows = fixed(60, 1000)  # ~11 KiB: more than the store has in its last file at 100 rows, less at 60

    job = new_job_id()
    stems = stage(root, job, "a", [job_rows], store_host="10.0.0.1:10911", now_ms=NOW)
    staged_file = (root / ".rocketstore" / "staging" / job / "commitlog" / last.name).stat().st_ino
    result = publish_staged(root, job, stems, sync_flush=sync_flush)
    assert result["in_place"] and result["count"] == 60
    assert last.stat().st_ino == (staged_file if replaced else store_file)
    with StoreWriter.open(direct, store_host="10.0.0.1:10911") as w:
        w.append_encoded(encode_table(job_rows, store_host="10.0.0.1:10911", uniq_factory=UniqKeyFactory()),
                         now_ms=NOW)
    assert same_bytes(root, direct)
    with RocketStore.open(root) as s:
        assert verify_store(s) == []
        assert sum(s.max_offset("orders", q) for q in s.queue_ids("orders")) == base + 60

    before = tree_digest(killed)
    job = new_job_id()
    stems = stage(killed, job, "a", [job_rows], store_host="10.0.0.1:10911", now_ms=NOW)
    code = ("from rocketstore_spark.store.write.publish import publish_staged\n"
            f"publish_staged({str(killed)!r}, {job!r}, {stems!r}, sync_flush={sync_flush})\n")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ROCKETSTORE_FAULT_AT="moved"),
                          timeout=120)
    assert done.returncode == -9  # killed after the move
    with RocketStore.open_writer(killed) as w:
        assert any("rolled back" in a for a in w.recovery_actions)
    assert tree_digest(killed) == before


def test_offsets_a_job_was_staged_with_that_the_store_no_longer_gives_are_assigned_afresh(base_store, tmp_path):
    """Queue offsets taken by a reservation whose attempt died before it reserved commit-log room leave a gap in a
    queue although the commit log is whole: the job is published by copy, every queue dense from its old end, and
    the bytes are the ones a publication of the same records with no gap gives."""
    import shutil

    from rocketstore_spark.store.write.reservation import JobReservation
    from rocketstore_spark.store.write.store_meta import staging_dir

    clean = shutil.copytree(base_store, tmp_path / "clean")
    tables = [fixed(40, 1000), fixed(30, 2000)]
    results = {}
    for root in (base_store, clean):
        job = new_job_id()
        stems = stage(root, job, "a", tables[:1], store_host="10.0.0.1:10911", now_ms=NOW)
        if root == base_store:  # a died attempt's queue-log block: offsets taken, no room reserved
            with JobReservation(staging_dir(root, job)) as reservation:
                reservation.queue_log.take([("orders", 1)], np.array([3]), lambda keys: np.zeros(len(keys)))
        stems += stage(root, job, "b", tables[1:], store_host="10.0.0.1:10911", now_ms=NOW)
        results[root] = publish_staged(root, job, stems)
    assert not results[base_store]["in_place"] and results[clean]["in_place"]
    assert same_bytes(base_store, clean)
    with RocketStore.open(base_store) as s:
        assert verify_store(s) == []
