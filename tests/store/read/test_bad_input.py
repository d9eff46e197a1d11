"""Broken stores and bad arguments give clear errors naming the file (and byte offset), never a hang."""

import struct

import pytest

from rocketstore_spark.errors import (
    CorruptRecordError,
    DataLossError,
    InvalidArgumentError,
    RocketStoreError,
    StoreConfigError,
    StoreFormatError,
    StoreNotFoundError,
)
from rocketstore_spark.store import RocketStore
from tests.store.reference import commitlog_file_of, record_layout

pytestmark = pytest.mark.timeout(60)
FILE_SIZE = 1048576
UNIT = 20


def assert_names(error, path, offset=None):
    """The message names the file (full path) and, when given, the byte offset inside it."""
    text = str(error.value if hasattr(error, "value") else error)
    assert str(path) in text, text
    if offset is not None:
        assert f"byte offset {offset}" in text, text


# --- paths ---------------------------------------------------------------------------------------------

def test_nonexistent_path(tmp_path):
    missing = tmp_path / "nope" / "store"
    with pytest.raises(StoreNotFoundError) as info:
        RocketStore.open(missing)
    assert_names(info, missing)
    assert "does not exist" in str(info.value)


def test_a_file_instead_of_a_directory(tmp_path):
    path = tmp_path / "store"
    path.write_text("not a store")
    with pytest.raises(StoreNotFoundError) as info:
        RocketStore.open(path)
    assert_names(info, path)
    assert "is a file" in str(info.value)


def test_a_directory_that_is_no_store(tmp_path):
    with pytest.raises(StoreNotFoundError) as info:
        RocketStore.open(tmp_path)
    assert_names(info, tmp_path)
    assert "commitlog" in str(info.value)


def test_errors_share_one_base_class():
    for cls in (StoreNotFoundError, StoreConfigError, StoreFormatError, CorruptRecordError, InvalidArgumentError):
        assert issubclass(cls, RocketStoreError)
    assert issubclass(CorruptRecordError, StoreFormatError)


# --- unexpected files (skipped with a warning: tests/store/read/test_stray_files.py) -----------------------

def test_gap_between_consume_queue_files(golden_copy):
    """A commit log may miss files in the middle (test_lost_ranges_middle.py); a consume queue may not."""
    queue = next(q for q in sorted(golden_copy.glob("consumequeue/*/*")) if len(list(q.iterdir())) > 2)
    files = sorted(queue.iterdir())
    files[1].unlink()
    with pytest.raises(StoreFormatError) as info:
        RocketStore.open(golden_copy)
    assert_names(info, files[2])


def test_short_checkpoint(golden_copy):
    path = golden_copy / "checkpoint"
    path.write_bytes(b"\0" * 10)
    with pytest.raises(StoreFormatError) as info:
        RocketStore.open(golden_copy).checkpoint()
    assert_names(info, path, 0)


# --- sizes -----------------------------------------------------------------------------------------------

def _truncated_store_names_the_file(store, victim, length):
    with open(victim, "r+b") as fh:
        fh.truncate(length)
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(store)
    assert_names(info, victim)


@pytest.mark.parametrize("which", [0, 3])
def test_commitlog_file_truncated_to_the_wrong_length(golden_copy, which):
    """A file that is not the last cannot be a cut copy's end: the store is inconsistent. (A cut last file is read
    as a cut copy, its lost messages reported: test_lost_ranges.py.)"""
    _truncated_store_names_the_file(golden_copy, sorted((golden_copy / "commitlog").iterdir())[which], 1000)


def test_consume_queue_file_truncated(golden_copy):
    victim = sorted((golden_copy / "consumequeue" / "TopicTest" / "4").iterdir())[0]
    _truncated_store_names_the_file(golden_copy, victim, 4000)


def test_explicit_commit_log_size_contradicting_the_files(golden_store_path):
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(golden_store_path, commit_log_file_size=2097152)
    text = str(info.value)
    assert "commit_log_file_size=2097152" in text and "1048576" in text
    assert str(golden_store_path / "commitlog") in text


def test_explicit_consume_queue_size_contradicting_the_files(golden_store_path):
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(golden_store_path, consume_queue_file_size=3000)
    assert "consume_queue_file_size=3000" in str(info.value)
    assert str(golden_store_path / "consumequeue") in str(info.value)


def test_explicit_index_sizes_contradicting_the_files(golden_store_path):
    with pytest.raises(StoreConfigError) as info:
        RocketStore.open(golden_store_path, index_hash_slots=4000, index_max_entries=20000)
    assert str(golden_store_path / "index") in str(info.value)


@pytest.mark.parametrize("value", [0, -1, "abc", 1000.5])
def test_nonsense_size_options(golden_store_path, value):
    with pytest.raises(StoreConfigError):
        RocketStore.open(golden_store_path, commit_log_file_size=value)


# --- consume-queue units that lie --------------------------------------------------------------------------

def cq_file(store, topic, qid, index=0):
    return sorted((store / "consumequeue" / topic / str(qid)).iterdir())[index]


def test_unit_in_the_middle_pointing_past_the_valid_end(golden_copy, golden_store):
    """Unit 150 of TopicTest/2 (first of two consume-queue files, so recovery does not cut it off)."""
    path = cq_file(golden_copy, "TopicTest", 2)
    unit = 150
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, unit * UNIT, golden_store.max_phy_offset() + 100)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        assert s.max_offset("TopicTest", 2) == golden_store.max_offset("TopicTest", 2)
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue("TopicTest", 2, columns=["queueOffset"]))
        assert_names(info, path, unit * UNIT)
        assert info.value.path == str(path) and info.value.offset == unit * UNIT
        # the units before it are readable
        ok = [o for b in s.read_queue("TopicTest", 2, end=unit, columns=["queueOffset"])
              for o in b.column(0).to_pylist()]
        assert ok == list(range(unit))


def test_unit_in_the_last_file_pointing_past_the_end_truncates_the_queue(golden_copy, golden_store):
    """ConsumeQueue.truncateDirtyLogicFiles: in the newest file the first unit at/after the valid end ends the queue."""
    path = cq_file(golden_copy, "TopicTest", 2, -1)
    first = int(path.name) // UNIT
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, 40 * UNIT, golden_store.max_phy_offset() + 100)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        assert s.max_offset("TopicTest", 2) == first + 40
        # the units it drops are reported as lost, and a read that asks for them says so
        lost = s.lost_ranges()
        assert [(r.topic, r.queue_id, r.start, r.phy_offset) for r in lost] == \
            [("TopicTest", 2, first + 40, golden_store.max_phy_offset() + 100)]
        assert lost[0].end == golden_store.max_offset("TopicTest", 2)
        with pytest.raises(DataLossError, match=f"TopicTest/2 offsets {first + 40}.."):
            list(s.read_queue("TopicTest", 2, columns=["queueOffset"]))
        assert sum(b.num_rows for b in s.read_queue("TopicTest", 2, columns=["queueOffset"],
                                                    fail_on_data_loss=False)) == first + 40


def test_unit_whose_size_disagrees_with_the_record(golden_copy, dispatched):
    path = cq_file(golden_copy, "TopicTest", 2)
    unit = 3
    m = dispatched[("TopicTest", 2)][unit]
    data = bytearray(path.read_bytes())
    size = struct.unpack_from(">i", data, unit * UNIT + 8)[0]
    assert size == m["storeSize"]
    struct.pack_into(">i", data, unit * UNIT + 8, size + 1)
    path.write_bytes(bytes(data))
    name, pos = commitlog_file_of(m["commitLogOffset"], FILE_SIZE)
    with RocketStore.open(golden_copy) as s:
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue("TopicTest", 2))
        assert_names(info, golden_copy / "commitlog" / name, pos)
        assert f"expected a record of {size + 1} bytes" in str(info.value)


def test_unit_pointing_into_the_middle_of_a_record(golden_copy, dispatched):
    path = cq_file(golden_copy, "TopicTest", 2)
    m = dispatched[("TopicTest", 2)][7]
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, 7 * UNIT, m["commitLogOffset"] + 8)
    path.write_bytes(bytes(data))
    name, pos = commitlog_file_of(m["commitLogOffset"] + 8, FILE_SIZE)
    with RocketStore.open(golden_copy) as s:
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue("TopicTest", 2))
        assert_names(info, golden_copy / "commitlog" / name, pos)


# --- broken records in an early commit-log file ------------------------------------------------------------

def early_victim(manifest, dispatched):
    """A dispatched TopicTest record in the second commit-log file, not the first of its queue."""
    return next(m for m in manifest if FILE_SIZE < m["commitLogOffset"] < 2 * FILE_SIZE and m["inConsumeQueue"]
                and m["topic"] == "TopicTest" and m["cqOffset"] > 3 and m["sysFlag"] & 0x30 == 0)


@pytest.mark.parametrize("damage", ["body_len=-5", "total_size=0", "total_size=-1", "total_size=huge",
                                    "magic=0", "topic_len=-3"])
def test_corrupt_record_in_an_early_file(golden_copy, manifest, dispatched, damage):
    victim = early_victim(manifest, dispatched)
    name, pos = commitlog_file_of(victim["commitLogOffset"], FILE_SIZE)
    path = golden_copy / "commitlog" / name
    lay = record_layout(victim)
    data = bytearray(path.read_bytes())
    field, value = damage.split("=")
    if field == "body_len":
        struct.pack_into(">i", data, pos + lay["body_len_pos"], int(value))
    elif field == "total_size":
        struct.pack_into(">i", data, pos, 0x7FFFFFF0 if value == "huge" else int(value))
    elif field == "magic":
        struct.pack_into(">i", data, pos + 4, 0)
    else:
        struct.pack_into(">b", data, pos + lay["topic_len_pos"], int(value))
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "normal" and s.max_phy_offset() == 29133002  # recovery only scans the newest file
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue(victim["topic"], victim["queueId"], columns=["queueOffset", "body"]))
        assert_names(info, path, pos)
        assert (info.value.path, info.value.offset) == (str(path), pos)
        with pytest.raises(CorruptRecordError) as info:
            list(s.scan_raw(columns=["topic"]))
        assert_names(info, path, pos)
        with pytest.raises(CorruptRecordError):
            s.look_message_by_offset(victim["commitLogOffset"])
        # other queues and the records before it still read
        before = [o for b in s.read_queue(victim["topic"], victim["queueId"], end=victim["cqOffset"],
                                          columns=["queueOffset"]) for o in b.column(0).to_pylist()]
        assert before == list(range(victim["cqOffset"]))
        assert sum(b.num_rows for b in s.scan_raw(end=victim["commitLogOffset"], columns=["queueId"])) == \
            sum(1 for m in manifest if m["commitLogOffset"] < victim["commitLogOffset"])


def test_corrupt_compressed_body_names_the_record(golden_copy, manifest):
    victim = next(m for m in manifest if m.get("compressionType") == "ZLIB" and m["bodyLength"] > 20
                  and m["commitLogOffset"] < 20 * FILE_SIZE)
    name, pos = commitlog_file_of(victim["commitLogOffset"], FILE_SIZE)
    path = golden_copy / "commitlog" / name
    lay = record_layout(victim)
    data = bytearray(path.read_bytes())
    data[pos + lay["body_pos"]:pos + lay["body_pos"] + 8] = b"\xff" * 8  # not a zlib stream any more
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        assert s.look_message_by_offset(victim["commitLogOffset"], ["rawBody"])["rawBody"][:8] == b"\xff" * 8
        with pytest.raises(CorruptRecordError) as info:
            s.look_message_by_offset(victim["commitLogOffset"], ["body"])
        assert "decompress" in str(info.value)
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue(victim["topic"], victim["queueId"], columns=["body"]))
        assert_names(info, path, pos)


# --- bad arguments -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression", ["TagA ||", "|TagA", "TagA | TagB", "* || TagA", "TagA |||| TagB",
                                        ["TagA", ""]])
def test_bad_tag_expressions(golden_store, expression):
    with pytest.raises(InvalidArgumentError, match="tag expression"):
        list(golden_store.read_queue("TopicTest", 0, tags=expression))
    with pytest.raises(InvalidArgumentError, match="tag expression"):
        golden_store.get_message("TopicTest", 0, 0, tags=expression)


def test_bad_arguments(golden_store):
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        list(golden_store.read_queue("TopicTest", 0, columns=["nope"]))
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        list(golden_store.scan_raw(columns=["topic", "Topic"]))
    with pytest.raises(InvalidArgumentError, match="boundary"):
        golden_store.offset_by_time("TopicTest", 0, 0, "middle")
    with pytest.raises(InvalidArgumentError, match="no consume queue"):
        list(golden_store.read_queue("NoTopic", 0))
    with pytest.raises(InvalidArgumentError, match="msgId"):
        golden_store.look_message_by_msg_id("XYZ")
    with pytest.raises(InvalidArgumentError, match="mode"):
        RocketStore.open(golden_store.root, mode="w")
    with pytest.raises(InvalidArgumentError):
        RocketStore.open(golden_store.root, no_such_option=1)


@pytest.mark.parametrize("abort", [False, True])
@pytest.mark.parametrize("damage", ["total_size=0", "total_size=-1", "magic=0", "body_len=-5", "crc"])
def test_corrupt_record_in_the_newest_file_ends_the_log_there(golden_copy, manifest, dispatched, abort, damage):
    """Recovery scans the newest file: the first invalid record becomes the valid end; consume-queue units at or
    past it are dropped (every queue), nothing hangs."""
    in_last = [m for m in manifest if m["commitLogOffset"] >= 27 * FILE_SIZE]
    victim = in_last[len(in_last) // 2]
    name, pos = commitlog_file_of(victim["commitLogOffset"], FILE_SIZE)
    path = golden_copy / "commitlog" / name
    lay = record_layout(victim)
    data = bytearray(path.read_bytes())
    field, _, value = damage.partition("=")
    if field == "total_size":
        struct.pack_into(">i", data, pos, int(value))
    elif field == "magic":
        struct.pack_into(">i", data, pos + 4, 0)
    elif field == "body_len":
        struct.pack_into(">i", data, pos + lay["body_len_pos"], int(value))
    else:
        assert victim["bodyLength"] > 0
        data[pos + lay["body_pos"]] ^= 0xFF  # body no longer matches BODYCRC
    path.write_bytes(bytes(data))
    if abort:
        (golden_copy / "abort").write_text("12345")
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == ("abnormal" if abort else "normal")
        assert s.max_phy_offset() == victim["commitLogOffset"]
        for (topic, qid), rows in dispatched.items():
            expected = sum(1 for m in rows if m["commitLogOffset"] < victim["commitLogOffset"])
            assert s.max_offset(topic, qid) == expected, (topic, qid)
        count = sum(b.num_rows for b in s.scan_raw(columns=["queueId"]))
        assert count == sum(1 for m in manifest if m["commitLogOffset"] < victim["commitLogOffset"])


# --- values read from a file that must not size an allocation or name a path ----------------------------------

def test_negative_unit_size_in_a_tag_read_names_the_record(golden_copy, dispatched):
    """A unit of an early consume-queue file (recovery checks only a queue's last files) whose size field became
    negative: a read of a few scattered records with a tag filter raises the same CorruptRecordError as a read
    without one, naming the commit-log file and the record's offset."""
    queue = ("orders_v1-EU", 0)
    unit = 3
    m = dispatched[queue][unit]
    path = cq_file(golden_copy, *queue)
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, unit * UNIT + 8, -594_780_351)
    path.write_bytes(bytes(data))
    name, pos = commitlog_file_of(m["commitLogOffset"], FILE_SIZE)
    with RocketStore.open(golden_copy) as s:
        for tags in (None, "TagA || TagB"):
            with pytest.raises(CorruptRecordError) as info:
                list(s.read_queue(*queue, unit, unit + 1, tags=tags))
            assert_names(info, golden_copy / "commitlog" / name, pos)
            assert "expected a record of -594780351 bytes" in str(info.value)


def test_copied_ranges_refuse_negative_lengths(tmp_path):
    from rocketstore_spark.store.files.file_reads import read_ranges

    path = tmp_path / "f"
    path.write_bytes(bytes(100))
    assert len(read_ranges(path, [0, 50], [10, 20])) == 30
    with pytest.raises(CorruptRecordError) as info:
        read_ranges(path, [0, 50], [10, -7])
    assert_names(info, path, 50)
    assert "found -7 bytes at byte 50" in str(info.value)


@pytest.mark.parametrize("abort", [True, False])
def test_record_whose_topic_names_no_directory(golden_copy, manifest, abort, caplog):
    """A dispatched record whose topic bytes were zeroed. After a crash (``abort``) the broker re-dispatches it:
    its queue's directory cannot be created (a NUL byte names no path), the broker marks its logic queues failed
    and writes no unit for it or any later record, and the store still loads with every unit already on disk.
    Opening reads the same: no foreign exception, a warning naming the record, every dispatched message of the
    manifest readable. Without ``abort`` nothing is re-dispatched and the same store opens and reads."""
    victim = [m for m in manifest if m["topic"] == "TopicTest" and m["inConsumeQueue"]][-1]
    name, pos = commitlog_file_of(victim["commitLogOffset"], FILE_SIZE)
    layout = record_layout(victim)
    with open(golden_copy / "commitlog" / name, "r+b") as fh:
        fh.seek(pos + layout["topic_pos"])
        fh.write(b"\0" * len("TopicTest"))
    if abort:
        (golden_copy / "abort").write_bytes(b"")
    caplog.set_level("WARNING", logger="rocketstore_spark")
    with RocketStore.open(golden_copy) as s:
        assert s.max_phy_offset() == max(m["commitLogOffset"] + m["storeSize"] for m in manifest)
        assert "TopicTest" in s.topics()
        assert not any("\0" in t for t in s.topics())
        total = sum(b.num_rows for t in s.topics() for q in s.queue_ids(t)
                    for b in s.read_queue(t, q, columns=["queueOffset"]))
    assert total == sum(1 for m in manifest if m["inConsumeQueue"])
    warned = [r.getMessage() for r in caplog.records if "names no consume-queue directory" in r.getMessage()]
    if abort:
        assert len(warned) == 1 and f"byte {pos} of {golden_copy / 'commitlog' / name}" in warned[0]
    else:
        assert not warned
