"""DLedger's own checkpoint (``dledger-<selfId>/checkpoint``: committedIndex, endIndex) applied as the 5.3.3
store applies it: committedPos (the committed entry's pos + size) is the broker's max offset after ``load()`` and
where its reput service starts re-dispatching; a one-node group commits every entry once it leads (every record
served), a group of several peers serves records before committedPos only (``dledger_peers``). After an abnormal
exit ``dledgerRecoverAbnormally`` cuts the queues at its ``processOffset`` (the last file's start plus its
records' sizes, the 48-byte entry headers not counted) and re-dispatch from committedPos restores what lies past it.

Observed with the referee (VView) on the same copies: golden + ``abort``: 4466 messages (units of the last two
records cut at processOffset 14849913); committedIndex edited to 4400 (+ ``abort`` or not): max offset 14590664
after load, 4468 messages once the node leads."""

import re
import shutil

import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store import RocketStore
from tests.store.read.test_variant_dledger import _without
from tests.store.read.variant_view import compare_offsets, compare_queue_reads, run_vview, variant_fixtures

golden, view, _store, copy = variant_fixtures("dledger", own_store=True)

END, PROCESS_OFFSET = 14851785, 14849913  # the log's end; processOffset of an abnormal recovery of the golden log
COMMITTED_4400 = 14590664  # entry 4400's pos + size
SEVERAL = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


def set_committed(store_dir, index) -> None:
    for name in ("checkpoint", "checkpoint.bak"):
        path = store_dir / "dledger-n0" / name
        path.write_text(re.sub(r"committedIndex=\d+", f"committedIndex={index}", path.read_text()))


def cut_at(view, phy: int) -> dict:
    """The golden view without the records at or past ``phy`` (their units cut); max offset unchanged."""
    dropped = {}
    for m in view["messages"]:
        if m["commitLogOffset"] >= phy:
            key = (m["topic"], m["queueId"])
            dropped[key] = min(dropped.get(key, m["cqOffset"]), m["cqOffset"])
    return _without(view, dropped, END)


def test_the_checkpoint_gives_committed_index_and_position(copy):
    with RocketStore.open(copy) as s:
        assert s.dledger_committed() == (4467, END)
    set_committed(copy, 4400)
    with RocketStore.open(copy) as s:
        assert s.dledger_committed() == (4400, COMMITTED_4400) and s.max_phy_offset() == END
    set_committed(copy, 99999)  # past the last entry: clamped to it (updateCommittedIndex)
    with RocketStore.open(copy) as s:
        assert s.dledger_committed() == (4467, END)


def test_a_committed_entry_before_the_walked_files_is_found_through_dledgers_index(copy, view):
    set_committed(copy, 10)  # in the first data file, which recovery does not walk: DLedger's index unit says
    entry = view["manifest"][10]["dledger"]
    with RocketStore.open(copy) as s:
        assert s.dledger_committed() == (10, entry["entryPos"] + entry["size"])
    with RocketStore.open(copy, dledger_peers=SEVERAL) as s:
        assert s.max_phy_offset() == entry["entryPos"] + entry["size"]
        assert sum(b.num_rows for b in s.scan_raw(columns=["commitLogOffset"])) == 11


def test_after_a_crash_the_queues_are_cut_at_process_offset(copy, view):
    (copy / "abort").write_bytes(b"")
    expected = cut_at(view, PROCESS_OFFSET)
    with RocketStore.open(copy) as s:
        assert s.recovery.mode == "abnormal" and s.max_phy_offset() == END
        compare_offsets(s, expected)
        assert compare_queue_reads(s, expected) == 4466


@pytest.mark.parametrize("abort", [False, True])
def test_a_one_node_group_serves_entries_past_the_committed_index(copy, view, abort):
    set_committed(copy, 4400)
    if abort:
        (copy / "abort").write_bytes(b"")
    with RocketStore.open(copy) as s:  # re-dispatch from committedPos restores what processOffset cut
        compare_offsets(s, view)
        assert compare_queue_reads(s, view) == 4468


@pytest.mark.parametrize("abort", [False, True])
def test_a_group_of_several_peers_serves_the_committed_entries_only(copy, view, abort):
    set_committed(copy, 4400)
    if abort:
        (copy / "abort").write_bytes(b"")
    expected = cut_at(view, COMMITTED_4400)
    expected["summary"]["maxPhyOffset"] = COMMITTED_4400
    for q in expected["queues"]:  # the broker's queues end at the last unit before committedPos here
        q["maxOffset"] = max([m["cqOffset"] + 1 for m in expected["messages"]
                              if (m["topic"], m["queueId"]) == (q["topic"], q["queueId"])], default=q["minOffset"])
    with RocketStore.open(copy, dledger_peers=SEVERAL) as s:
        assert s.max_phy_offset() == COMMITTED_4400
        compare_offsets(s, expected)
        assert compare_queue_reads(s, expected) == 4401
        assert [r["commitLogOffset"] for b in s.scan_raw(columns=["commitLogOffset"]) for r in b.to_pylist()] \
            == [m["commitLogOffset"] for m in view["manifest"][:4401]]


def test_without_a_checkpoint_nothing_is_committed(copy, view):
    (copy / "dledger-n0" / "checkpoint").unlink()
    (copy / "dledger-n0" / "checkpoint.bak").unlink()
    with RocketStore.open(copy) as s:
        assert s.dledger_committed() is None and s.max_phy_offset() == END
        assert compare_queue_reads(s, view) == 4468
    with RocketStore.open(copy, dledger_peers=SEVERAL) as s:  # getMaxOffset: the log's start
        assert s.max_phy_offset() == 0 and not list(s.scan_raw(columns=["commitLogOffset"]))


def test_a_malformed_committed_index_is_a_clear_error(copy):
    path = copy / "dledger-n0" / "checkpoint"
    path.write_text("committedIndex=44x7\nendIndex=4467\n")
    with pytest.raises(StoreFormatError, match="expected committedIndex=<entry index> as a number") as err:
        RocketStore.open(copy).max_phy_offset()
    assert err.value.path == str(path) and err.value.offset == 0


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["abort", "committed-4400", "committed-4400-abort"])
def test_checkpoint_reads_equal_the_referees_answers(copy, golden, tmp_path, scenario):
    if scenario != "abort":
        set_committed(copy, 4400)
    if scenario.endswith("abort"):
        (copy / "abort").write_bytes(b"")
    ours = tmp_path / "ours"
    shutil.copytree(copy, ours)
    theirs = tmp_path / "theirs"
    shutil.copytree(ours, theirs)
    # The node loads the scenario's files (its max offset after load is committedPos), then leads and commits the
    # entries past the committed index asynchronously, re-dispatching them while the referee reads: a first run
    # may read a queue or key before its entries are dispatched (even without a problem: a queue read whole before
    # more of it was). The same copy opened again serves what the node committed and dispatched once it led: it
    # is read again until two runs in a row agree on every queue and report no problem. (With every entry
    # committed there is nothing to race, and a second open would recover normally what the first found cut by
    # the crash: the first run's answers are the crash's.)
    first = run_vview(theirs, tmp_path / "view-0", golden)
    real, previous = first, None
    for attempt in range(1, 5 if scenario != "abort" else 1):
        if previous is not None and real["summary"]["problemCount"] == 0 and real["queues"] == previous["queues"]:
            break
        previous, real = real, run_vview(theirs, tmp_path / f"view-{attempt}", golden)
    assert real["summary"]["problemCount"] == 0, real["summary"]["problems"][:5]
    assert previous is None or real["queues"] == previous["queues"], "the referee's runs did not settle"
    with RocketStore.open(ours) as s:
        # every queue's offsets and every message as the leader served them; the summary's maxPhyOffset is taken
        # before the node leads (committedPos after a normal exit), so the served end is the log's
        compare_offsets(s, dict(real, summary=dict(real["summary"], maxPhyOffset=END)))
        assert compare_queue_reads(s, real) == real["summary"]["messageCount"]
    with RocketStore.open(ours, dledger_peers=SEVERAL) as s:  # what the broker served before it led
        assert s.max_phy_offset() == first["summary"]["afterLoadMaxPhyOffset"]
