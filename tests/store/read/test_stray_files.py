"""Stray entries in a copied store (backups, ``.nfs…`` files, temporaries, names that are not offsets, zero-length
files) are skipped with a warning naming them and change no answer; files that would change the answer if
skipped (a wrong-size or empty file inside the offset sequence) stay errors naming the file. Index files that
hold no keys yet (zero-filled, or just rolled to) need no sizes."""

import struct
import warnings

import pytest

from rocketstore_spark.errors import IndexSizesAmbiguousError, StoreConfigError, StoreFormatError, StrayFileWarning
from rocketstore_spark.store import RocketStore

pytestmark = pytest.mark.timeout(120)
QUEUE = ("TopicTest", 0)


def answers(store) -> dict:
    """What a reader sees: valid end, queues and their ranges, one queue's offsets, a key lookup."""
    return {"end": store.max_phy_offset(), "min": store.min_phy_offset(),
            "queues": {(t, q): (store.min_offset(t, q), store.max_offset(t, q))
                       for t in store.topics() for q in store.queue_ids(t)},
            "offsets": [o for b in store.read_queue(*QUEUE, columns=["commitLogOffset"]) for o in b.column(0)
                        .to_pylist()],
            "key": store.query_by_key("TopicTest", "order-42", columns=["commitLogOffset"]).column(0).to_pylist()}


@pytest.fixture(scope="module")
def golden_answers(golden_store):
    return answers(golden_store)


def make_file(path, data=b"junk"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_dir(path):
    path.mkdir(parents=True)
    (path / "inside").write_bytes(b"x")
    return path


def next_file(directory, size):
    """The name the next file of a MappedFileQueue directory would get (a broker's just-created file)."""
    last = max(int(p.name) for p in directory.iterdir())
    return directory / f"{last + size:020d}"


STRAYS = {
    "commitlog garbage name": lambda s: make_file(s / "commitlog" / "garbage.bin"),
    "commitlog editor backup": lambda s: make_file(s / "commitlog" / "00000000000000000000~"),
    "commitlog copy of a file": lambda s: make_file(s / "commitlog" / "00000000000000000000.bak",
                                                    (s / "commitlog" / "00000000000000000000").read_bytes()),
    "commitlog nfs file": lambda s: make_file(s / "commitlog" / ".nfs000000000001a2b300000001"),
    "commitlog hidden temporary": lambda s: make_file(s / "commitlog" / ".00000000000031457280.tmp", b""),
    "commitlog sub-directory": lambda s: make_dir(s / "commitlog" / "old"),
    "commitlog zero-length next file": lambda s: make_file(next_file(s / "commitlog", 1048576), b""),
    "consume queue garbage": lambda s: make_file(s / "consumequeue" / "TopicTest" / "0" / "notanumber"),
    "consume queue zero-length next file": lambda s: make_file(
        next_file(s / "consumequeue" / "TopicTest" / "0", 6000), b""),
    "consume queue hidden": lambda s: make_file(s / "consumequeue" / "TopicTest" / "0" / ".DS_Store"),
    "queue dir not a number": lambda s: make_dir(s / "consumequeue" / "TopicTest" / "queue-x"),
    "file among queue dirs": lambda s: make_file(s / "consumequeue" / "TopicTest" / "README"),
    "file among topic dirs": lambda s: make_file(s / "consumequeue" / "notes.txt"),
    "hidden topic dir": lambda s: make_dir(s / "consumequeue" / ".Trash-1000"),
    "index backup": lambda s: make_file(s / "index" / "20261122085608571.bak", b"\0" * 420040),
    "index nfs file": lambda s: make_file(s / "index" / ".nfs0000000000aa"),
    "index zero-length": lambda s: make_file(s / "index" / "20261122085699999", b""),
    "index sub-directory": lambda s: make_dir(s / "index" / "backup"),
}


@pytest.mark.parametrize("case", sorted(STRAYS))
def test_stray_entries_are_skipped_with_a_warning_and_change_no_answer(golden_copy, golden_answers, case):
    stray = STRAYS[case](golden_copy)
    with pytest.warns(StrayFileWarning, match=stray.name.replace(".", r"\.")):
        store = RocketStore.open(golden_copy)
    with store:
        assert [s.path for s in store.stray_files] == [stray]
        assert answers(store) == golden_answers


def test_several_strays_are_each_named(golden_copy):
    made = [STRAYS[c](golden_copy) for c in ("commitlog nfs file", "consume queue garbage", "index backup")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with RocketStore.open(golden_copy) as store:
            assert sorted(s.path for s in store.stray_files) == sorted(made)
    texts = [str(w.message) for w in caught if issubclass(w.category, StrayFileWarning)]
    assert len(texts) == 3 and all(any(str(p) in t for t in texts) for p in made)


def test_an_empty_file_inside_the_offset_sequence_is_an_error_naming_it(golden_copy):
    victim = sorted((golden_copy / "commitlog").iterdir())[5]
    victim.write_bytes(b"")
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(golden_copy)
    assert str(victim) in str(info.value) and "found 0 bytes" in str(info.value)


def test_a_short_file_at_the_end_is_read_as_a_cut_copy_naming_it(golden_copy, golden_store, caplog):
    """A half-synced last file is not skipped: it is read as a cut copy (a warning names it), and nothing points
    into it here, so nothing is lost."""
    victim = make_file(next_file(golden_copy / "commitlog", 1048576), b"\0" * 4096)
    caplog.set_level("WARNING", logger="rocketstore_spark")
    with RocketStore.open(golden_copy) as s:
        assert s.max_phy_offset() == golden_store.max_phy_offset()
        assert s.lost_ranges() == []
    assert any(str(victim) in r.getMessage() and "is cut" in r.getMessage() for r in caplog.records)


# --- index files that hold no keys ------------------------------------------------------------------------

def _only_index_file(store, data: bytes):
    for f in (store / "index").iterdir():
        f.unlink()
    return make_file(store / "index" / "20261122085608571", data)


def test_a_store_whose_only_index_file_is_zero_filled_opens_without_index_sizes(golden_copy):
    """Was a raw BufferError from the size detection; the file holds nothing, as RocketMQ sees it."""
    _only_index_file(golden_copy, bytes(420040))
    with RocketStore.open(golden_copy) as store:
        # 420040 bytes fit several slot counts and no file tells them apart: only writers need them
        assert "index_hash_slots" in store.sizes.index_sizes_problem
        assert [f.header.index_count for f in store.index_files()] == [0]
        assert store.query_by_key("TopicTest", "order-42").num_rows == 0
        assert store.max_offset(*QUEUE) > 0
    with pytest.raises(IndexSizesAmbiguousError):
        RocketStore.open_writer(golden_copy)


def test_a_store_whose_only_index_file_was_just_rolled_to_opens(golden_copy, golden_store):
    """A new file a broker rolled to: header begin values are the previous file's end, indexCount 1."""
    last = golden_store.index_files()[-1].header
    head = struct.pack(">qqqqii", last.end_timestamp, last.end_timestamp, last.end_phy_offset,
                       last.end_phy_offset, 0, 1)
    _only_index_file(golden_copy, head + bytes(420040 - len(head)))
    with RocketStore.open(golden_copy) as store:
        assert [f.header.index_count for f in store.index_files()] == [1]
        assert store.query_by_key("TopicTest", "order-42").num_rows == 0


def test_a_just_rolled_index_file_after_full_ones_keeps_the_sizes_and_lookups(golden_copy, golden_answers):
    last = sorted((golden_copy / "index").iterdir())[-1]
    head = last.read_bytes()[8:16] * 2 + last.read_bytes()[24:32] * 2 + struct.pack(">ii", 0, 1)
    make_file(golden_copy / "index" / "20261122085699999", head + bytes(420040 - len(head)))
    with RocketStore.open(golden_copy) as store:
        assert (store.sizes.index_hash_slots, store.sizes.index_max_entries) == (5000, 20000)
        assert store.sizes.index_sizes_problem == ""
        assert len(store.index_files()) == 4
        assert answers(store) == golden_answers


def test_an_empty_index_file_of_another_length_does_not_disturb_the_sizes(golden_copy, golden_answers):
    make_file(golden_copy / "index" / "20261122085699999", bytes(4096))
    with RocketStore.open(golden_copy) as store:
        assert (store.sizes.index_hash_slots, store.sizes.index_max_entries) == (5000, 20000)
        assert answers(store) == golden_answers


def test_a_truncated_index_file_stops_only_key_lookups_and_names_the_file(golden_copy, golden_store):
    victim = sorted((golden_copy / "index").iterdir())[0]
    with open(victim, "r+b") as fh:
        fh.truncate(400000)
    with RocketStore.open(golden_copy) as store:
        assert store.max_offset(*QUEUE) == golden_store.max_offset(*QUEUE)
        assert sum(b.num_rows for b in store.read_queue(*QUEUE)) == golden_store.max_offset(*QUEUE)
        with pytest.raises(IndexSizesAmbiguousError) as info:
            store.query_by_key("TopicTest", "order-42")
    assert str(victim) in str(info.value) and "420040" in str(info.value)
    with RocketStore.open(golden_copy, index_hash_slots=5000, index_max_entries=20000) as store:
        with pytest.raises(StoreConfigError) as info:  # the sizes given: the lookup names the short file
            store.query_by_key("TopicTest", "order-42")
    assert str(victim) in str(info.value) and "400000 bytes" in str(info.value)


def test_a_damaged_index_header_stops_only_key_lookups(golden_copy, golden_store):
    """A flipped indexCount in the newest file: the sizes come from the older files, reads work, and a key
    lookup names the damaged header."""
    victim = sorted((golden_copy / "index").iterdir())[-1]
    data = bytearray(victim.read_bytes())
    data[37] ^= 0x40
    victim.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as store:
        assert store.max_phy_offset() == golden_store.max_phy_offset()
        assert sum(b.num_rows for b in store.read_queue(*QUEUE)) == golden_store.max_offset(*QUEUE)
        with pytest.raises(StoreFormatError) as info:
            store.query_by_key("TopicTest", "order-42")
    assert info.value.path == str(victim) and info.value.offset == 36


def test_index_files_that_fit_no_slot_count_stop_only_key_lookups(golden_copy, golden_store):
    """Every file's newest entry moved to another bucket: no slot count is consistent, the store still opens."""
    for victim in sorted((golden_copy / "index").iterdir()):
        data = bytearray(victim.read_bytes())
        count = int.from_bytes(data[36:40], "big")
        at = 40 + 5000 * 4 + (count - 1) * 20
        data[at:at + 4] = (int.from_bytes(data[at:at + 4], "big") ^ 0x1).to_bytes(4, "big")
        victim.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as store:
        assert store.max_phy_offset() == golden_store.max_phy_offset()
        with pytest.raises(IndexSizesAmbiguousError, match="do not match any hash-slot count") as info:
            store.query_by_key("TopicTest", "order-42")
    assert str(golden_copy / "index") in str(info.value)


def test_golden_store_has_no_strays(golden_store):
    assert golden_store.stray_files == []


# --- a DLedger log (dledger-<id>/data/) ---------------------------------------------------------------------

def _dledger_answers(store) -> dict:
    return {"end": store.max_phy_offset(), "rows": sum(b.num_rows for b in store.scan_raw(columns=["msgId"])),
            "queues": {(t, q): (store.min_offset(t, q), store.max_offset(t, q))
                       for t in store.topics() for q in store.queue_ids(t)}}


@pytest.mark.parametrize("name", [".nfs000000000001a2b3", "00000000000000000000.bak", "notes.txt", ".{last}.tmp"])
def test_stray_entries_in_a_dledger_log_are_skipped_with_a_warning(variant_golden, tmp_path, name):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(variant_golden("dledger") / "store", store)
    with RocketStore.open(store) as pristine:
        expected = _dledger_answers(pristine)
    data = next(store.glob("dledger-*/data"))
    stray = make_file(data / name.format(last=sorted(p.name for p in data.iterdir())[-1]), b"junk" * 100)
    with pytest.warns(StrayFileWarning, match=stray.name.replace(".", r"\.")):
        damaged = RocketStore.open(store)
    with damaged:
        assert [s.path for s in damaged.stray_files] == [stray]
        assert _dledger_answers(damaged) == expected


def test_a_short_file_inside_a_dledger_log_is_an_error_naming_it(variant_golden, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(variant_golden("dledger") / "store", store)
    victim = sorted(next(store.glob("dledger-*/data")).iterdir())[1]
    victim.write_bytes(victim.read_bytes()[:4096])
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(store)
    assert str(victim) in str(info.value)
