"""Copies of a store with commit-log files missing in the middle: the store opens as the broker's does (its
``MappedFileQueue.checkSelf`` logs the gap, recovery walks the files there are), the units pointing into the
missing files are lost ranges per queue (several per queue when several stretches are missing), reads skip or
refuse them, lookups find nothing there. Expected rows come from the golden manifest's commit-log offsets and
expected lost counts from the consume-queue files' own bytes, both independently of the reader."""

import hashlib
import json
import os
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.store import RocketStore, verify_store
from tests.store.read.variant_view import REFEREE

FILE_SIZE = 1048576
CQ_UNIT = struct.Struct(">qiq")  # commit-log offset, size, tags code: a consume-queue unit


def drop_files(store: Path, indexes) -> list[tuple[int, int]]:
    """Delete the commit-log files at ``indexes`` (of the sorted listing); the missing ranges, merged."""
    files = sorted((store / "commitlog").iterdir())
    gaps: list = []
    for i in sorted(indexes):
        start = int(files[i].name)
        files[i].unlink()
        if gaps and gaps[-1][1] == start:
            gaps[-1] = (gaps[-1][0], start + FILE_SIZE)
        else:
            gaps.append((start, start + FILE_SIZE))
    return gaps


def in_gaps(phy: int, gaps) -> bool:
    return any(a <= phy < b for a, b in gaps)


def units_in_gaps(store: Path, gaps) -> dict:
    """(topic, queue id) → [(queue offset, commit-log offset)] of the consume-queue units on disk pointing into
    ``gaps``, read from the files' bytes."""
    out: dict = {}
    for qdir in sorted((store / "consumequeue").glob("*/*")):
        for f in sorted(qdir.iterdir()):
            data = f.read_bytes()
            first = int(f.name) // CQ_UNIT.size
            for k in range(len(data) // CQ_UNIT.size):
                phy, size, _ = CQ_UNIT.unpack_from(data, k * CQ_UNIT.size)
                if phy == 0 and size == 0:
                    break
                if in_gaps(phy, gaps):
                    out.setdefault((qdir.parent.name, int(qdir.name)), []).append((first + k, phy))
    return out


def ranges_of(units: list) -> list[tuple[int, int]]:
    """Runs of consecutive queue offsets, as [start, end)."""
    runs: list = []
    for offset, _ in units:
        if runs and runs[-1][1] == offset:
            runs[-1][1] += 1
        else:
            runs.append([offset, offset + 1])
    return [tuple(r) for r in runs]


def store_digest(store: Path) -> dict:
    return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns,
                                        hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(store.rglob("*")) if p.is_file()}


def all_rows(s) -> set:
    rows = set()
    for t in s.topics():
        for q in s.queue_ids(t):
            for b in s.read_queue(t, q, columns=["queueOffset", "commitLogOffset"], fail_on_data_loss=False):
                rows.update((t, q, o, p) for o, p in zip(b.column(0).to_pylist(), b.column(1).to_pylist()))
    return rows


@pytest.mark.parametrize("dropped", [(10,), (3, 20), (12, 13)], ids=["one", "two-apart", "two-adjacent"])
def test_a_missing_middle_file_is_read_around_and_its_units_are_lost(golden_copy, manifest, dropped, caplog):
    gaps = drop_files(golden_copy, dropped)
    on_disk = units_in_gaps(golden_copy, gaps)
    before = store_digest(golden_copy)
    expected_rows = {(m["topic"], m["queueId"], m["cqOffset"], m["commitLogOffset"]) for m in manifest
                     if m["inConsumeQueue"] and not in_gaps(m["commitLogOffset"], gaps)}
    lost_in_manifest = Counter((m["topic"], m["queueId"]) for m in manifest
                               if m["inConsumeQueue"] and in_gaps(m["commitLogOffset"], gaps))
    assert Counter({k: len(v) for k, v in on_disk.items()}) == lost_in_manifest  # the two sources agree
    caplog.set_level("WARNING", logger="rocketstore_spark")
    with RocketStore.open(golden_copy) as s:
        # the broker's view: every file there is read, the log ends where the last record does
        assert s.max_phy_offset() == max(m["commitLogOffset"] + m["storeSize"] for m in manifest)
        assert s.min_phy_offset() == 0
        names = [f"{a:020d}" for start, end in gaps for a in range(start, end, FILE_SIZE)]
        assert s.missing_commit_log_files() == names
        ranges = s.lost_ranges()
        got = {}
        for r in ranges:
            got.setdefault((r.topic, r.queue_id), []).append((r.start, r.end))
            assert r.count == r.end - r.start and r.gap_end is not None
            name = f"{r.phy_offset - r.phy_offset % FILE_SIZE:020d}"
            assert r.file == f"{golden_copy / 'commitlog' / name} (missing)"
        # a range per missing stretch a queue has units in (two for some queues when two stretches are missing)
        assert got == {k: ranges_of(v) for k, v in on_disk.items()}
        assert {(r.topic, r.queue_id, r.start): r.phy_offset for r in ranges} == \
            {(k[0], k[1], start): next(p for o, p in v if o == start) for k, v in on_disk.items()
             for start, _ in ranges_of(v)}
        if len(gaps) > 1:
            assert any(len(v) > 1 for v in got.values())
        # what is left reads, without them: the manifest's rows outside the missing files
        assert all_rows(s) == expected_rows
        # a read that asks for them fails, naming the queue, the offsets, the count and the missing file
        victim = max((r for r in ranges if len(got[(r.topic, r.queue_id)]) == 1), key=lambda r: r.count)
        with pytest.raises(DataLossError) as info:
            list(s.read_queue(victim.topic, victim.queue_id))
        text = str(info.value)
        assert f"{victim.topic}/{victim.queue_id} offsets {victim.start}..{victim.end} ({victim.count} messages)" \
            in text and victim.file in text
        with pytest.raises(DataLossError):
            list(s.read_queue(victim.topic, victim.queue_id, tags="TagA || TagB"))
        with pytest.raises(DataLossError):  # also a range starting inside them
            list(s.read_queue(victim.topic, victim.queue_id, victim.start + victim.count // 2, victim.end + 1))
        # bounds around them need no flag
        first = s.min_offset(victim.topic, victim.queue_id)
        assert sum(b.num_rows for b in s.read_queue(victim.topic, victim.queue_id, first, victim.start)) == \
            victim.start - first
        after = sum(b.num_rows for b in s.read_queue(victim.topic, victim.queue_id, victim.end,
                                                     s.max_offset(victim.topic, victim.queue_id)))
        assert after == sum(1 for t, q, o, _ in expected_rows
                            if (t, q) == (victim.topic, victim.queue_id) and o >= victim.end)
        problems = verify_store(s)
        assert sorted(p.where for p in problems if "missing between others" in p.message) == \
            [str(golden_copy / "commitlog" / n) for n in names]
        assert len([p for p in problems if p.message.startswith("lost messages")]) == len(ranges)
        assert len(problems) == len(ranges) + len(names)
    warning = next(r.getMessage() for r in caplog.records if "missing between" in r.getMessage())
    assert all(n in warning for n in names)
    assert store_digest(golden_copy) == before  # nothing is modified by reading


def test_lookups_find_nothing_in_a_missing_file(golden_copy, manifest):
    """Key and msgId lookups, getMessage and commit-log scans skip what a missing file held, as the broker's
    ``queryMessage`` and ``getMessage`` find no file there."""
    gaps = drop_files(golden_copy, (10,))
    gone = [m for m in manifest if in_gaps(m["commitLogOffset"], gaps)]
    kept = [m for m in manifest if not in_gaps(m["commitLogOffset"], gaps)]
    with RocketStore.open(golden_copy) as s:
        assert s.look_message_by_msg_id(gone[0]["msgId"]) is None
        assert s.look_message_by_msg_id(kept[0]["msgId"])["commitLogOffset"] == kept[0]["commitLogOffset"]
        lost_keys = [m for m in gone if m["uniqKey"] and m["inConsumeQueue"]][:20]
        for m in lost_keys:
            table = s.query_by_key(m["topic"], m["uniqKey"], columns=["commitLogOffset"])
            assert not [o for o in table.column(0).to_pylist() if in_gaps(o, gaps)]
        hot = s.query_by_key("TopicTest", "order-42", max_num=10_000, columns=["commitLogOffset"])
        expected = sorted(m["commitLogOffset"] for m in kept  # ROLLBACK records are never indexed
                          if m["topic"] == "TopicTest" and "order-42" in (m["keys"] or "").split(" ")
                          and m["transactionType"] != "ROLLBACK")
        assert len(expected) < sum(1 for m in manifest if m["topic"] == "TopicTest" and "order-42" in
                                   (m["keys"] or "").split(" ") and m["transactionType"] != "ROLLBACK")
        assert sorted(hot.column(0).to_pylist()) == expected
        table = s.read_records_at([m["commitLogOffset"] for m in gone[:5] + kept[:5]], ["commitLogOffset"])
        assert table.column(0).to_pylist() == [m["commitLogOffset"] for m in kept[:5]]
        # getMessage steps over the lost units to the next message there is
        r = next(r for r in s.lost_ranges() if r.topic == "TopicTest")
        got = s.get_message(r.topic, r.queue_id, r.start, columns=["queueOffset"])
        assert got.status == "FOUND" and got.messages.column(0).to_pylist()[0] == r.end
        # a commit-log-ordered scan of the missing file's offsets is data loss, or nothing with the flag off
        selected = [(t, tuple(s.queue_ids(t))) for t in s.topics()]
        with pytest.raises(DataLossError, match=f"{gaps[0][0]:020d}.* is missing"):
            list(s.scan_queue_records(gaps[0][0], gaps[0][1], selected))
        assert list(s.scan_queue_records(gaps[0][0], gaps[0][1], selected, fail_on_data_loss=False)) == []
        # the files on each side scan as before
        after = sum(b.num_rows for b in s.scan_queue_records(gaps[0][1], gaps[0][1] + FILE_SIZE, selected))
        assert after == sum(1 for m in kept if m["inConsumeQueue"]
                            and gaps[0][1] <= m["commitLogOffset"] < gaps[0][1] + FILE_SIZE
                            and m["topic"] in dict(selected))
        raw = sum(b.num_rows for b in s.scan_raw(gaps[0][0] - FILE_SIZE, gaps[0][1] + FILE_SIZE))
        assert raw == sum(1 for m in kept if gaps[0][0] - FILE_SIZE <= m["commitLogOffset"] < gaps[0][1] + FILE_SIZE)


def test_abnormal_recovery_walks_across_a_missing_file(golden_copy, manifest):
    """After a crash recovery starts at the file the checkpoint matches and, as the broker's
    ``recoverAbnormally`` does, goes on from a file that ends in BLANK to the next file there is."""
    gaps = drop_files(golden_copy, (10,))
    first_times = {}
    for m in manifest:
        first_times.setdefault(m["commitLogOffset"] // FILE_SIZE, m["storeTimestamp"])
    safe = first_times[5] + 3000 + 1  # min(physic, logics) - 3 s: file 5's first record, not file 6's
    cp = bytearray((golden_copy / "checkpoint").read_bytes())
    cp[0:24] = struct.pack(">qqq", safe, safe, safe)
    (golden_copy / "checkpoint").write_bytes(bytes(cp))
    (golden_copy / "abort").touch()
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "abnormal" and s.recovery.start_file_index == 5
        assert [w.file_index for w in s.recovery.walks] == list(range(5, len(s.commitlog.queue.files)))
        assert s.max_phy_offset() == max(m["commitLogOffset"] + m["storeSize"] for m in manifest)
        assert sum(r.count for r in s.lost_ranges()) == \
            sum(1 for m in manifest if m["inConsumeQueue"] and in_gaps(m["commitLogOffset"], gaps))


def test_a_live_tail_follows_a_log_with_a_missing_file(golden_copy, manifest):
    """A stream's tail of a copy with a hole: the queues' ends are every unit's (the lost ones are reported,
    not waited for)."""
    from rocketstore_spark.store import LiveTail

    drop_files(golden_copy, (10,))
    tail = LiveTail.open(golden_copy, lambda topic: True)
    ends = {(t, int(q)): n for t, queues in tail.ends().items() for q, n in queues.items()}
    expected = Counter((m["topic"], m["queueId"]) for m in manifest if m["inConsumeQueue"])
    assert {k: v for k, v in ends.items() if v} == dict(expected)


# --- the real store on the same copies ---------------------------------------------------------------------


def referee_verify(store: Path, out: Path, sizes_args: Path) -> dict:
    """The referee's Verify (RocketMQ 5.3.3's DefaultMessageStore: load, recover, getMessage over every queue) on
    ``store`` (a copy: it opens it read-write as a broker does)."""
    env = dict(os.environ, REFEREE_PYTHON=sys.executable)
    r = subprocess.run([str(REFEREE), "Verify", "--store", str(store), "--out", str(out)]
                       + sizes_args.read_text().split(), env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return {"summary": json.loads((out / "summary.json").read_text(encoding="utf-8")),
            "messages": [json.loads(line) for line in (out / "messages.jsonl").open(encoding="utf-8")],
            "stderr": r.stderr}


@pytest.mark.slow
def test_the_real_store_reads_around_a_missing_file_the_same_way(golden_copy, golden_dir, tmp_path):
    drop_files(golden_copy, (3, 20))
    ours = tmp_path / "ours"
    import shutil

    shutil.copytree(golden_copy, ours)
    real = referee_verify(golden_copy, tmp_path / "out", golden_dir / "sizes.args")
    assert "adjacent mappedFile's offset don't match" in real["stderr"]  # MappedFileQueue.checkSelf
    summary = real["summary"]
    assert summary["loaded"] and summary["recoveryMode"] == "normal"
    with RocketStore.open(ours) as s:
        assert (s.min_phy_offset(), s.max_phy_offset()) == (summary["minPhyOffset"], summary["maxPhyOffset"])
        assert {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"]) for q in summary["queues"]} == \
            {(t, q): (s.min_offset(t, q), s.max_offset(t, q)) for t in s.topics() for q in s.queue_ids(t)}
        assert all_rows(s) == {(m["topic"], m["queueId"], m["cqOffset"], m["commitLogOffset"])
                               for m in real["messages"]}
        # every unit getMessage could not read is one of ours lost
        unreadable = [p for p in summary["problems"] if "could not be read" in p]
        assert len(unreadable) == sum(r.count for r in s.lost_ranges())
        assert np.all([r.gap_end is not None for r in s.lost_ranges()])


# --- storage variants ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["prop-crc", "lmq"])
def test_a_variant_store_missing_a_middle_file(variant_golden, tmp_path, variant):
    """The prop-CRC and LMQ golden stores (real-broker-written) with a middle file deleted: the rows the real
    store answered on the intact store, minus those in the missing file; lost counts from the queues' bytes (LMQ
    queues included)."""
    import shutil

    from tests.conftest import sizes_from_args
    from tests.store.read.variant_view import load_view

    golden = variant_golden(variant)
    store = tmp_path / "store"
    shutil.copytree(golden / "store", store)
    gaps = drop_files(store, (7,))
    on_disk = units_in_gaps(store, gaps)
    view = load_view(golden)
    expected_rows = {(m["topic"], m["queueId"], m["cqOffset"], m["commitLogOffset"]) for m in view["messages"]
                     if not in_gaps(m["commitLogOffset"], gaps)}
    assert len(expected_rows) < len({(m["topic"], m["queueId"], m["cqOffset"]) for m in view["messages"]})
    with RocketStore.open(store, **sizes_from_args(golden / "sizes.args")) as s:
        assert s.missing_commit_log_files() == [f"{gaps[0][0]:020d}"]
        got = {}
        for r in s.lost_ranges():
            got.setdefault((r.topic, r.queue_id), []).append((r.start, r.end))
        assert got == {k: ranges_of(v) for k, v in on_disk.items()}
        if variant == "lmq":
            assert any(t.startswith("%LMQ%") for t, _ in got)
        assert all_rows(s) == expected_rows

