"""Cut copies of a store: consume-queue units that point past the commit log's valid end are lost messages,
reported per queue (the store API, verify, reads that ask for them), never dropped silently. Expected rows and
lost counts are computed from the golden manifest, independently of the reader."""

from collections import Counter

import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.store import RocketStore, verify_store

FILE_SIZE = 1048576


def cut_copy(store, keep_files: int, cut_at=None):
    """Keep the first ``keep_files`` commit-log files, the last of them cut to ``cut_at`` bytes."""
    files = sorted((store / "commitlog").iterdir())
    for f in files[keep_files:]:
        f.unlink()
    if cut_at is not None:
        with open(files[keep_files - 1], "r+b") as fh:
            fh.truncate(cut_at)
    return files[keep_files - 1]


def expected(manifest, log_end: int):
    """(valid end, rows per queue that remain, lost per queue) for a commit log whose bytes end at ``log_end``:
    recovery keeps every record that ends within it, the queues lose every unit pointing at or past that end."""
    valid_end = max(m["commitLogOffset"] + m["storeSize"] for m in manifest
                    if m["commitLogOffset"] + m["storeSize"] <= log_end)
    kept, lost = Counter(), Counter()
    for m in manifest:
        if m["inConsumeQueue"]:
            (kept if m["commitLogOffset"] < valid_end else lost)[(m["topic"], m["queueId"])] += 1
    return valid_end, kept, lost


@pytest.mark.parametrize("keep, cut_at", [(1, 500_000), (1, 20_000), (4, 777_777), (6, None), (28, 12_345)])
def test_cut_copies_report_what_they_lost(golden_copy, manifest, keep, cut_at):
    last = cut_copy(golden_copy, keep, cut_at)
    log_end = int(last.name) + (cut_at if cut_at is not None else FILE_SIZE)
    valid_end, kept, lost = expected(manifest, log_end)
    # the files' own size is 1 MiB; a lone cut file is no size a broker writes, so it is named
    with RocketStore.open(golden_copy, commit_log_file_size=FILE_SIZE) as s:
        assert s.max_phy_offset() == valid_end
        ranges = s.lost_ranges()
        assert {(r.topic, r.queue_id): r.count for r in ranges} == dict(lost)
        for r in ranges:
            assert r.start == kept[(r.topic, r.queue_id)] and r.end == r.start + lost[(r.topic, r.queue_id)]
            assert r.phy_offset >= valid_end
            assert r.file.startswith(str(golden_copy / "commitlog"))
        # reads that ask for the lost messages fail, naming queue, offsets, count and file
        victim = ranges[0]
        with pytest.raises(DataLossError) as info:
            list(s.read_queue(victim.topic, victim.queue_id))
        text = str(info.value)
        assert f"{victim.topic}/{victim.queue_id} offsets {victim.start}..{victim.end} ({victim.count} messages)" \
            in text and victim.file in text
        with pytest.raises(DataLossError):
            list(s.read_queue(victim.topic, victim.queue_id, tags="TagA || TagB"))
        # what is left reads, without them: on request, or up to where the loss starts
        rows = {(t, q): sum(b.num_rows for b in s.read_queue(t, q, columns=["queueOffset"], fail_on_data_loss=False))
                for t in s.topics() for q in s.queue_ids(t)}
        assert {k: v for k, v in rows.items() if v} == {k: v for k, v in kept.items() if v}
        assert sum(b.num_rows for b in s.read_queue(victim.topic, victim.queue_id, 0, victim.start)) == victim.start
        problems = [p for p in verify_store(s) if p.message.startswith("lost messages")]
        assert len(problems) == len(ranges)


def test_a_lone_cut_file_is_not_taken_for_the_file_size(golden_copy, manifest, caplog):
    cut_copy(golden_copy, 1, 500_000)
    caplog.set_level("WARNING", logger="rocketstore_spark")
    with RocketStore.open(golden_copy) as s:
        assert s.sizes.commit_log_file_size == 1 << 30  # the broker's default, not the cut file's 500,000 bytes
        valid_end, kept, lost = expected(manifest, 500_000)
        assert s.max_phy_offset() == valid_end
        assert sum(r.count for r in s.lost_ranges()) == sum(lost.values())
    warning = next(r.getMessage() for r in caplog.records if "is cut" in r.getMessage())
    assert "500000 bytes" in warning and "commit_log_file_size" in warning


def test_an_intact_store_lost_nothing(golden_store):
    assert golden_store.lost_ranges() == []


CQ_FILE_SIZE = 6000  # the golden store's consume-queue files: 300 units each


@pytest.mark.parametrize("multi_file, cut_at", [(True, 4010), (True, 2000), (False, 1234)])
def test_a_cut_consume_queue_file_is_not_taken_for_the_file_size(golden_copy, dispatched, caplog, multi_file, cut_at):
    """A queue's last file cut short (a partial unit, or whole units short of its siblings) is read as cut: the
    size comes from the other files, a warning names the file and the size option, the units up to the cut read."""
    queues = sorted(golden_copy.glob("consumequeue/*/*"))
    victim = next(q for q in queues if (len(list(q.iterdir())) > 1) == multi_file
                  and len(dispatched.get((q.parent.name, int(q.name)), ())) % 300 * 20 >= cut_at)
    last = sorted(victim.iterdir())[-1]
    with open(last, "r+b") as fh:
        fh.truncate(cut_at)
    key = (victim.parent.name, int(victim.name))
    kept = int(last.name) // 20 + cut_at // 20
    caplog.set_level("WARNING", logger="rocketstore_spark")
    with RocketStore.open(golden_copy) as s:
        assert s.sizes.consume_queue_file_size == CQ_FILE_SIZE
        assert s.max_offset(*key) == kept
        rows = [r for b in s.read_queue(*key, columns=["queueOffset", "commitLogOffset"]) for r in b.to_pylist()]
        assert [r["commitLogOffset"] for r in rows] == [m["commitLogOffset"] for m in dispatched[key][:kept]]
        other = next(k for k in dispatched if k != key)
        assert s.max_offset(*other) == len(dispatched[other])
    warning = next(r.getMessage() for r in caplog.records if "is cut" in r.getMessage())
    assert str(last) in warning and f"{cut_at} bytes" in warning and "consume_queue_file_size" in warning
    assert "--cq-size" in warning


def test_a_cut_copy_on_s3_reports_the_same_lost_ranges(golden_copy, manifest, s3_server):
    """The same cut copy, local and on an S3-compatible server: the same lost ranges, files named in each place."""
    from tests.store.read.test_remote_reads import s3_options

    cut_copy(golden_copy, 2, 777_777)
    _, _, lost = expected(manifest, FILE_SIZE + 777_777)
    uri = s3_server.upload(golden_copy, "rst", "lost-ranges/cut/store")
    with RocketStore.open(golden_copy, commit_log_file_size=FILE_SIZE) as local:
        here = local.lost_ranges()
    with RocketStore.open(uri, commit_log_file_size=FILE_SIZE, fs_options=s3_options(s3_server)) as remote:
        there = remote.lost_ranges()
        victim = there[0]
        with pytest.raises(DataLossError, match=f"{victim.topic}/{victim.queue_id} offsets {victim.start}"):
            list(remote.read_queue(victim.topic, victim.queue_id))
    assert {(r.topic, r.queue_id): r.count for r in here} == dict(lost)

    def facts(r):
        return (r.topic, r.queue_id, r.start, r.end, r.phy_offset, r.valid_end, r.file.rsplit("commitlog/", 1)[1])

    assert [facts(r) for r in there] == [facts(r) for r in here]
    assert all(r.file.startswith(uri) for r in there)
