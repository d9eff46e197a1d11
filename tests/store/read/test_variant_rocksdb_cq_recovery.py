"""Recovery of a rocksdb-cq store whose database lost its tail (RocksDB's WAL is not flushed: a crash can lose
the last units): the database's own dispatch checkpoint (``CHECKPOINT_TOPIC`` in the ``offset`` column family,
``getMaxPhyOffsetInConsumeQueue``) is the consume queues' max physical offset, picks the file an abnormal
recovery starts from (``isMappedFileMatchedRecover``: the first record's PHYSICALOFFSET at or before it), and
bounds what a normal recovery dispatches (records past it); re-dispatch puts the lost units back in memory by
queue offset (holes where a record was skipped). The database is never modified.

Checked with the referee (VView) on the same copies: after a crash every unit comes back (messages, queues and
time queries equal to the golden view); after a normal exit the record AT the checkpoint is not dispatched
(``commitLogOffset > maxPhyOffsetOfConsumeQueue``) and its queue keeps a hole (OFFSET_FOUND_NULL)."""

import copy as copying
import shutil

import pytest

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format.rocksdb_cq import (
    CHECKPOINT_TOPIC,
    CHECKPOINT_VALUE,
    DEFAULT_CF,
    MAX_BYTES,
    OFFSET_CF,
    ROCKSDB_OFFSET_VALUE,
    cq_key,
    offset_key,
)
from tests.conftest import sizes_from_args
from tests.store.read.variant_view import (
    compare_key_queries,
    compare_offsets,
    compare_queue_reads,
    compare_time_queries,
    run_vview,
    variant_fixtures,
)

golden, view, _store, copy = variant_fixtures("rocksdb-cq", own_store=True)

CUT = 13500000  # units of records at or past this offset lost


def lose_units(store_dir, manifest: list, cut: int, abort: bool) -> int:
    """Delete the units of records at or past ``cut`` from a COPY's database (written with rocksdict: the test
    makes the damaged store, rocketstore only reads it), set the ``max`` keys and the dispatch checkpoint back to
    what is left (the end of the last kept record); returns that checkpoint."""
    from rocksdict import Options, Rdict

    db_dir = store_dir / "consumequeue"
    families = Rdict.list_cf(str(db_dir), Options(raw_mode=True))
    db = Rdict(str(db_dir), Options(raw_mode=True),
               column_families={cf: Options(raw_mode=True) for cf in families if cf != DEFAULT_CF})
    units, offsets = db.get_column_family(DEFAULT_CF), db.get_column_family(OFFSET_CF)
    last, kept_end = {}, 0
    for m in (m for m in manifest if m["inConsumeQueue"]):
        if m["commitLogOffset"] >= cut:
            del units[cq_key(m["topic"], m["queueId"], m["queueOffset"])]
        else:
            last[(m["topic"], m["queueId"])] = (m["commitLogOffset"], m["queueOffset"])
            kept_end = max(kept_end, m["commitLogOffset"] + m["storeSize"])
    for topic, qid in {(m["topic"], m["queueId"]) for m in manifest if m["inConsumeQueue"]}:
        key = offset_key(topic, qid, MAX_BYTES)
        if (topic, qid) in last:
            offsets[key] = ROCKSDB_OFFSET_VALUE.pack(*last[(topic, qid)])
        else:
            del offsets[key]
    offsets[offset_key(CHECKPOINT_TOPIC, 0, MAX_BYTES)] = CHECKPOINT_VALUE.pack(kept_end)
    db.close()
    for extra in db_dir.glob("rocksdict-config.json"):
        extra.unlink()
    if abort:
        (store_dir / "abort").write_bytes(b"")
    return kept_end


def database_files(store_dir) -> dict:
    return {p.name: p.read_bytes() for p in (store_dir / "consumequeue").iterdir() if p.is_file()}


def test_after_a_crash_the_lost_units_are_rebuilt(copy, golden, view):
    dispatched = lose_units(copy, view["manifest"], CUT, abort=True)
    before = database_files(copy)
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        assert s.recovery.mode == "abnormal" and s.dispatched() == dispatched
        # the walk starts at the last file whose first record is at or before the checkpoint, guided by the units
        assert [w.file_index for w in s.recovery.walks] == [12, 13, 14] and 12 * 1048576 <= dispatched
        compare_offsets(s, view)
        assert compare_queue_reads(s, view) == 4493
        compare_time_queries(s, view["time_queries"])
    assert database_files(copy) == before


def test_after_a_normal_exit_records_past_the_checkpoint_are_dispatched_around_a_hole(copy, golden, view):
    dispatched = lose_units(copy, view["manifest"], CUT, abort=False)
    hole = next(m for m in view["manifest"] if m["commitLogOffset"] == dispatched)
    expected = copying.deepcopy({k: view[k] for k in ("messages", "queues", "summary")})
    expected["messages"] = [m for m in expected["messages"] if m["commitLogOffset"] != dispatched]
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        assert s.recovery.mode == "normal"
        compare_offsets(s, expected)  # the hole's queue still ends where the golden one does
        assert compare_queue_reads(s, expected) == 4492
        got = s.read_queue(hole["topic"], hole["queueId"], start=hole["cqOffset"], end=hole["cqOffset"] + 1)
        assert sum(b.num_rows for b in got) == 0


def test_hints_come_from_the_database_units(copy, golden):
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        queues = [q for _, q in sorted(s.queues.loaded_items(), key=lambda item: item[0])]
        hints = sorted(int(p) for q in queues for p in q.phy_offsets_from(14680064))
        assert hints and all(p >= 14680064 for p in hints)
        assert hints == sorted(int(p) for q in queues for p in q.phy_offsets_between(14680064, 1 << 40))


@pytest.mark.slow
@pytest.mark.parametrize("abort", [True, False])
def test_recovery_equals_the_referees_answers(copy, golden, view, tmp_path, abort):
    lose_units(copy, view["manifest"], CUT, abort)
    ours = tmp_path / "ours"
    shutil.copytree(copy, ours)
    real = run_vview(copy, tmp_path / "view", golden)
    assert real["summary"]["recoveryMode"] == ("abnormal" if abort else "normal")
    with RocketStore.open(ours, **sizes_from_args(golden / "sizes.args")) as s:
        compare_offsets(s, real)
        assert compare_queue_reads(s, real) == real["summary"]["messageCount"]
        compare_time_queries(s, real["time_queries"])
        compare_key_queries(s, view["manifest"], real["queries"])
