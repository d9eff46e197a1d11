"""New topics' consume-queue skeletons: made by the tasks, moved into the store by the commit, never a trace
of an attempt that was not committed."""

import shutil
from pathlib import Path

import pyarrow as pa

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.queue_skeleton import skeleton_dir
from rocketstore_spark.store.write.staging import stage
from rocketstore_spark.store.write.store_meta import remove_empty_dirs, staging_dir
from tests.store.write.test_publish import base_store  # noqa: F401 - the fixture is used by name
from tests.store.write.test_writer import messages, no_job_leftovers

HOST = "10.0.0.1:10911"
NOW_MS = 1_700_000_000_000


def _queue_files(root: Path) -> dict:
    """Every consume-queue directory and file of a store: relative path → the file's bytes (None: directory)."""
    cq = root / L.CONSUMEQUEUE_DIR
    return {str(p.relative_to(cq)): (p.read_bytes() if p.is_file() else None) for p in sorted(cq.rglob("*"))}


def _fresh(n, start, queues):
    table = messages(n, topic="fresh", start=start)
    return table.set_column(table.column_names.index("queueId"), "queueId",
                            pa.array([queues[i % len(queues)] for i in range(n)]))


def _publish(root, with_skeleton: bool):
    job = new_job_id()
    new = (lambda: {"fresh": 4}) if with_skeleton else None
    stems = stage(root, job, "p0", [messages(40, start=300), _fresh(30, 400, [0, 1, 2])], store_host=HOST,
                  now_ms=NOW_MS, new_topic_queues=new)
    stems += stage(root, job, "p1", [_fresh(25, 500, [1, 2])], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
    made = skeleton_dir(staging_dir(root, job), 200)
    assert made.is_dir() == with_skeleton
    if with_skeleton:  # every queue's directory, first files only for queues written to (0, 1, 2)
        assert sorted(p.name for p in (made / "fresh").iterdir()) == ["0", "1", "2", "3"]
        assert [q for q in "0123" if (made / "fresh" / q / L.offset_to_file_name(0)).is_file()] == ["0", "1", "2"]
        assert all(p.stat().st_size == 200 for p in made.rglob("0" * 20))
    remove_empty_dirs(root / ".rocketstore")  # the housekeeping leaves a running job's skeleton alone
    assert made.is_dir() == with_skeleton
    publish_staged(root, job, stems, new_topic_queues={"fresh": 4})
    return root


def test_a_published_skeleton_gives_the_same_queues_as_the_driver_making_them(base_store, tmp_path):  # noqa: F811
    plain = tmp_path / "plain"
    shutil.copytree(base_store, plain)
    with_skeleton = _queue_files(_publish(base_store, True))
    assert with_skeleton == _queue_files(_publish(plain, False))
    assert "fresh/3" in with_skeleton and not any(k.startswith("fresh/3/") for k in with_skeleton)
    assert no_job_leftovers(base_store)
    with RocketStore.open(base_store) as s:
        assert s.queue_ids("fresh") == [0, 1, 2, 3]
        assert [s.max_offset("fresh", q) for q in range(4)] == [10, 23, 22, 0]


def test_an_attempt_that_was_not_committed_leaves_no_file(base_store):  # noqa: F811
    job = new_job_id()
    new = lambda: {"fresh": 4}  # noqa: E731
    stems = stage(base_store, job, "p0", [_fresh(12, 400, [0, 1])], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
    # a failed attempt of another partition wrote to queue 3 before it died; its retry wrote to queue 2
    stage(base_store, job, "p1-attempt0", [_fresh(5, 500, [3])], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
    stems += stage(base_store, job, "p1-attempt1", [_fresh(5, 500, [2])], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
    publish_staged(base_store, job, stems, new_topic_queues={"fresh": 4})
    queues = _queue_files(base_store)
    assert [k for k, v in queues.items() if k.startswith("fresh/") and v is None] == [f"fresh/{q}" for q in range(4)]
    assert not any(k.startswith("fresh/3/") for k in queues)  # only the uncommitted attempt wrote there
    assert [k for k in queues if k.startswith("fresh/2/")] == ["fresh/2/" + L.offset_to_file_name(0)]
    with RocketStore.open(base_store) as s:
        assert [s.max_offset("fresh", q) for q in range(4)] == [6, 6, 5, 0]


def test_a_topic_that_appeared_meanwhile_is_not_replaced(base_store):  # noqa: F811
    job = new_job_id()
    stems = stage(base_store, job, "p0", [_fresh(6, 400, [0])], store_host=HOST, now_ms=NOW_MS,
                  new_topic_queues=lambda: {"fresh": 2})
    with RocketStore.open_writer(base_store) as w:  # another writer created the topic before this commit
        w.append(_fresh(3, 900, [1]))
    publish_staged(base_store, job, stems, new_topic_queues={"fresh": 2})
    with RocketStore.open(base_store) as s:
        assert [s.max_offset("fresh", q) for q in range(2)] == [6, 3]


def test_each_topic_skeleton_is_made_by_one_attempt_and_the_commit_fills_in(base_store, tmp_path):  # noqa: F811
    plain = tmp_path / "plain"
    shutil.copytree(base_store, plain)

    def publish(root, with_skeleton):
        job = new_job_id()
        new = (lambda: {"fresh": 4, "other": 2}) if with_skeleton else None
        stems = stage(root, job, "p0", [_fresh(8, 400, [0])], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
        other = messages(6, topic="other", start=600)
        stems += stage(root, job, "p1", [_fresh(8, 500, [1]), other], store_host=HOST, now_ms=NOW_MS,
                   new_topic_queues=new)
        made = skeleton_dir(staging_dir(root, job), 200)
        if with_skeleton:  # p0 made fresh's directory first: p1 made nothing under it, but all of "other"
            assert [q for q in "0123" if (made / "fresh" / q / L.offset_to_file_name(0)).is_file()] == ["0"]
            assert sorted(p.name for p in (made / "other").iterdir()) == ["0", "1"]
        publish_staged(root, job, stems, new_topic_queues={"fresh": 4, "other": 2})
        return _queue_files(root)

    assert publish(base_store, True) == publish(plain, False)
    assert no_job_leftovers(base_store)
    with RocketStore.open(base_store) as s:
        assert [s.max_offset("fresh", q) for q in range(4)] == [8, 8, 0, 0]
