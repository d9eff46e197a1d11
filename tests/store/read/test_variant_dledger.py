"""The dledger golden store (``enableDLegerCommitLog=true``): records found through the 48-byte entry headers,
physical offsets as the broker reports them (entry pos + 48), DLedger blank tails, every answer equal to the real
store's; torn last entries recovered as the real 5.3.3 store recovers them; bad entries are clear errors."""

import copy as copying

import numpy as np
import pytest

from rocketstore_spark.errors import CorruptRecordError
from rocketstore_spark.store import RocketStore
from tests.store.read.variant_view import (
    compare_key_queries,
    compare_offsets,
    compare_queue_reads,
    compare_scan_with_manifest,
    compare_time_queries,
    sample_queries,
    variant_fixtures,
)

FILE_SIZE = 1048576
HEADER = 48


golden, view, store, copy = variant_fixtures("dledger")


def test_detected_as_dledger_with_its_log(store, golden):
    assert store.variant.name == "dledger"
    assert store.commitlog.queue.directory == golden / "store" / "dledger-n0" / "data"
    assert store.sizes.commit_log_file_size == FILE_SIZE  # detected from the DLedger data files


def test_recovery_and_offsets_match_the_real_store(store, view):
    assert store.recovery.mode == view["summary"]["recoveryMode"] == "normal"
    compare_offsets(store, view)
    assert store.min_phy_offset() == 0 and store.max_phy_offset() == 14851785


def test_records_are_entry_bodies_at_entry_pos_plus_48(store, view):
    manifest = view["manifest"]
    assert all(m["commitLogOffset"] == m["dledger"]["entryPos"] + HEADER and m["dledger"]["pos"] == m["dledger"][
        "entryPos"] and m["dledger"]["size"] == HEADER + m["storeSize"] for m in manifest)
    assert manifest[0]["commitLogOffset"] == 48
    compare_scan_with_manifest(store, manifest, verify_crc=True)


def test_every_file_but_the_last_ends_with_a_dledger_blank(store, view):
    walks = [store.commitlog.walk_file(i) for i in range(len(store.commitlog.queue.files))]
    assert [w.end_kind for w in walks] == ["blank"] * 14 + ["end"] == ["blank"] * view["summary"]["commitLogBlanks"] \
        + ["end"]
    assert sum(len(w.fields) for w in walks) == view["summary"]["commitLogRecords"] == 4468


def test_walks_guided_by_queue_units_equal_entry_by_entry_walks(store):
    """Consume-queue units mark entries (record - 48): runs of them are checked in vectorised steps."""
    files = store.commitlog.queue.files
    hints = np.concatenate([q.phy_offsets_between(0, 1 << 40) for q in store.queues.loaded_queues()])
    for i, f in enumerate(files):
        plain = store.commitlog.walk_file(i, check_crc=False)
        local = hints[(hints >= f.from_offset) & (hints < f.from_offset + FILE_SIZE)] - f.from_offset
        for guided in (store.commitlog.walk_file(i, check_crc=False, hints=local),
                       store.commitlog.walk_file(i, check_crc=False, hints=local[::3])):  # with gaps
            assert guided.fields.position.tolist() == plain.fields.position.tolist()
            assert (guided.end_position, guided.end_kind) == (plain.end_position, plain.end_kind)


def test_every_queue_row_equals_the_real_getmessage(store, view):
    assert compare_queue_reads(store, view) == len(view["messages"]) == 4468


def test_lookups_by_msg_id_and_offset(store, view):
    line = view["messages"][100]
    assert store.look_message_by_msg_id(line["msgId"], ["commitLogOffset"])["commitLogOffset"] == \
        line["commitLogOffset"]
    with pytest.raises(CorruptRecordError):  # an entry header is no record
        store.look_message_by_offset(line["commitLogOffset"] - HEADER)
    res = store.get_message(line["topic"], line["queueId"], line["cqOffset"], columns=["commitLogOffset"])
    assert res.status == "FOUND" and res.messages.column(0)[0].as_py() == line["commitLogOffset"]


def test_key_queries_sample(store, view):
    chosen = sample_queries(view["queries"], 8)
    assert len(chosen) > 1000
    compare_key_queries(store, view["manifest"], chosen)


@pytest.mark.slow
def test_key_queries_all(store, view):
    compare_key_queries(store, view["manifest"], view["queries"])


def test_time_queries(store, view):
    compare_time_queries(store, view["time_queries"])


# --- torn and damaged copies ---------------------------------------------------------------------------------



def _zero(store_dir, start: int, end: int) -> None:
    path = store_dir / "dledger-n0" / "data" / f"{(start // FILE_SIZE) * FILE_SIZE:020d}"
    with open(path, "r+b") as fh:
        fh.seek(start % FILE_SIZE)
        fh.write(bytes(end - start))


def _without(view, dropped: dict, max_phy: int) -> dict:
    """The golden view with the last unit of each queue in ``dropped`` gone (queue → its new max offset)."""
    out = copying.deepcopy({k: view[k] for k in ("messages", "queues", "summary")})
    out["messages"] = [m for m in out["messages"]
                       if not ((m["topic"], m["queueId"]) in dropped and m["cqOffset"] >= dropped[(m["topic"],
                                                                                                   m["queueId"])])]
    for q in out["queues"]:
        q["maxOffset"] = dropped.get((q["topic"], q["queueId"]), q["maxOffset"])
    out["summary"]["maxPhyOffset"] = max_phy
    return out


def _last_two(view):
    last, before = view["manifest"][-1], view["manifest"][-2]
    return last, before


@pytest.mark.parametrize("where,max_phy", [("record", 14851785), ("header", 14851414)])
def test_a_torn_last_entry_after_a_crash_is_recovered_as_the_real_store_does(copy, view, where, max_phy):
    """Observed with the real 5.3.3 store (the referee's VView on these copies, ``abort`` present): a tear in
    the record keeps the entry (DLedger checks headers only: max offset 14851785), a tear in the header drops it
    (14851414); either way the queues are cut at the start of the last readable record's entry, so that record
    (LongTopic…/0 offset 332) loses its unit along with the torn one (raft_topic/1 offset 603)."""
    last, before = _last_two(view)
    entry = last["dledger"]["entryPos"]
    _zero(copy, entry + (HEADER + 100 if where == "record" else 20), entry + last["dledger"]["size"])
    (copy / "abort").write_bytes(b"")
    dropped = {(last["topic"], last["queueId"]): last["cqOffset"], (before["topic"], before["queueId"]):
               before["cqOffset"]}
    assert dropped == {("raft_topic", 1): 603, (before["topic"], 0): 332}
    expected = _without(view, dropped, max_phy)
    with RocketStore.open(copy) as s:
        assert s.recovery.mode == "abnormal" and s.max_phy_offset() == max_phy
        compare_offsets(s, expected)
        # lost: the units pointing past the log's data (a torn header drops its entry); the record before it
        # stays in the log, so its dropped unit is no loss (a raw scan reads it)
        lost = [(r.topic, r.queue_id, r.start, r.count) for r in s.lost_ranges()]
        assert lost == ([] if where == "record" else [("raft_topic", 1, 603, 1)])
        assert compare_queue_reads(s, expected, fail_on_data_loss=not lost) == 4466
        # the index is rebuilt, as the real store does: the dropped record is still found by its key
        compare_key_queries(s, view["manifest"], [q for q in view["queries"] if q["key"] == before["uniqKey"]])


def test_a_torn_record_after_a_clean_exit_keeps_its_unit_and_reading_it_is_an_error(copy, view):
    """Without ``abort`` the real store keeps every unit before the log's end and returns the torn record's
    bytes as they are; rocketstore refuses to decode them, naming the file and offset."""
    last, _ = _last_two(view)
    entry = last["dledger"]["entryPos"]
    _zero(copy, entry + HEADER + 100, entry + last["dledger"]["size"])
    with RocketStore.open(copy) as s:
        assert s.recovery.mode == "normal" and s.max_phy_offset() == 14851785
        compare_offsets(s, view)
        assert sum(b.num_rows for b in s.read_queue("raft_topic", 1, end=603, columns=["queueId"])) == 603
        with pytest.raises(CorruptRecordError) as err:
            list(s.read_queue("raft_topic", 1, start=603, columns=["queueId"]))
        assert err.value.path.endswith(f"{(entry // FILE_SIZE) * FILE_SIZE:020d}")
        assert err.value.offset == (entry + HEADER) % FILE_SIZE


@pytest.mark.parametrize("field,value,message", [(0, 7, "magic 7"), (4, 48, "entry size 48"),
                                                 (4, 1000, "entry size 1000 != 48 \\+ body length")])
def test_a_bad_entry_mid_file_is_a_clear_error(copy, view, field, value, message):
    """A bad magic or size in an early file (scans walk it) and in the last file (recovery walks it)."""
    for m in (view["manifest"][30], view["manifest"][-20]):
        path = copy / "dledger-n0" / "data" / f"{(m['dledger']['entryPos'] // FILE_SIZE) * FILE_SIZE:020d}"
        with open(path, "r+b") as fh:
            fh.seek(m["dledger"]["entryPos"] % FILE_SIZE + field)
            fh.write(value.to_bytes(4, "big"))
    first = view["manifest"][30]["dledger"]["entryPos"]
    with pytest.raises(CorruptRecordError, match=f"bad DLedger entry: {message}") as err:
        RocketStore.open(copy).max_phy_offset()
    assert err.value.offset == view["manifest"][-20]["dledger"]["entryPos"] % FILE_SIZE
    with RocketStore.open(copy, valid_end=14851785) as s:  # recovery skipped: the scan meets the early entry
        with pytest.raises(CorruptRecordError, match=f"bad DLedger entry: {message}") as err:
            list(s.scan_raw(columns=["commitLogOffset"]))
        assert err.value.offset == first % FILE_SIZE and err.value.path.endswith(f"{0:020d}")


@pytest.mark.parametrize("which", [30, -20])  # an early file, and the last file (the one recovery walked)
def test_a_body_failing_its_crc_stops_a_crc_checked_scan_with_an_error(copy, view, which):
    """verify_crc: a flipped body bit is reported at its record; the scan never just ends there (the fuzz campaign
    found a DLedger scan that stopped silently: its walk keeps the entries' end, past the bad record)."""
    m = view["manifest"][which]
    record = (m["dledger"]["entryPos"] + HEADER) % FILE_SIZE
    path = copy / "dledger-n0" / "data" / f"{(m['dledger']['entryPos'] // FILE_SIZE) * FILE_SIZE:020d}"
    data = bytearray(path.read_bytes())
    assert int.from_bytes(data[record + 84:record + 88], "big") > 0  # BODYLEN of a record with IPv4 hosts
    data[record + 88] ^= 0x40  # the body's first byte
    path.write_bytes(bytes(data))
    with RocketStore.open(copy) as s:
        assert sum(b.num_rows for b in s.scan_raw(columns=["commitLogOffset"])) == len(view["manifest"])
        with pytest.raises(CorruptRecordError, match="body CRC") as err:
            list(s.scan_raw(columns=["commitLogOffset"], verify_crc=True))
    assert err.value.path == str(path) and err.value.offset == record
