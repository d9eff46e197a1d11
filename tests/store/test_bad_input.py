"""Broken stores and bad arguments give clear errors naming the file (and offset), never a hang."""

import struct

import numpy as np
import pytest

from rocketstore_spark.errors import (CorruptRecordError, InvalidArgumentError, StoreConfigError,
                                      StoreFormatError, StoreNotFoundError)
from rocketstore_spark.store import RocketStore

pytestmark = pytest.mark.timeout(120)


def test_missing_and_non_store_paths(tmp_path):
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        RocketStore.open(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreNotFoundError, match="is a file"):
        RocketStore.open(tmp_path / "f")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFoundError, match="commitlog"):
        RocketStore.open(tmp_path / "empty")


def test_garbage_files_are_named(golden_copy):
    (golden_copy / "commitlog" / "garbage.bin").write_bytes(b"junk")
    with pytest.raises(StoreFormatError, match="garbage.bin"):
        RocketStore.open(golden_copy)
    (golden_copy / "commitlog" / "garbage.bin").unlink()
    (golden_copy / "consumequeue" / "TopicTest" / "0" / "notanumber").write_bytes(b"junk")
    with pytest.raises(StoreFormatError, match="notanumber"):
        RocketStore.open(golden_copy)


def test_wrong_commitlog_length_and_contradicting_option(golden_copy):
    with pytest.raises(StoreConfigError, match="commit_log_file_size=2097152"):
        RocketStore.open(golden_copy, commit_log_file_size=2097152)
    victim = sorted((golden_copy / "commitlog").iterdir())[3]
    with open(victim, "r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(StoreConfigError, match=victim.name):
        RocketStore.open(golden_copy)


def unit_path(store, topic, qid):
    return sorted((store / "consumequeue" / topic / str(qid)).iterdir())[0]


def test_unit_pointing_past_the_valid_end(golden_copy, golden_store):
    path = unit_path(golden_copy, "TopicTest", 2)
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, 5 * 20, golden_store.max_phy_offset() + 100)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue("TopicTest", 2))
        assert path.name in str(info.value) and "byte offset 100" in str(info.value)
        assert "past the commit log's valid end" in str(info.value)


def test_unit_whose_size_disagrees_with_the_record(golden_copy):
    path = unit_path(golden_copy, "TopicTest", 2)
    data = bytearray(path.read_bytes())
    size = struct.unpack_from(">i", data, 3 * 20 + 8)[0]
    struct.pack_into(">i", data, 3 * 20 + 8, size + 1)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        with pytest.raises(CorruptRecordError, match=f"expected a record of {size + 1} bytes"):
            list(s.read_queue("TopicTest", 2))


def test_negative_body_length_in_an_early_file(golden_copy, manifest):
    victim = next(m for m in manifest if m["commitLogOffset"] < 1048576 and m["inConsumeQueue"]
                  and m["topic"] == "TopicTest" and m["cqOffset"] > 3)
    path = golden_copy / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    at = victim["commitLogOffset"]
    sysflag = struct.unpack_from(">i", data, at + 36)[0]
    body_len_pos = at + 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
    struct.pack_into(">i", data, body_len_pos, -5)
    path.write_bytes(bytes(data))
    with RocketStore.open(golden_copy) as s:
        with pytest.raises(CorruptRecordError) as info:
            list(s.read_queue(victim["topic"], victim["queueId"]))
        assert path.name in str(info.value) and f"byte offset {at}" in str(info.value)
        with pytest.raises(CorruptRecordError, match=path.name):
            list(s.scan_commitlog())


@pytest.mark.parametrize("expr", ["TagA ||", "|TagA", "TagA | TagB", "* || TagA"])
def test_bad_tag_expressions(golden_store, expr):
    with pytest.raises(InvalidArgumentError, match="tag expression"):
        list(golden_store.read_queue("TopicTest", 0, tags=expr))


def test_bad_arguments(golden_store):
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        list(golden_store.read_queue("TopicTest", 0, columns=["nope"]))
    with pytest.raises(InvalidArgumentError, match="boundary"):
        golden_store.offset_by_time("TopicTest", 0, 0, "middle")
    with pytest.raises(InvalidArgumentError, match="no consume queue"):
        list(golden_store.read_queue("NoTopic", 0))
    with pytest.raises(InvalidArgumentError, match="msgId"):
        golden_store.look_message_by_msg_id("XYZ")
    assert np.int64(golden_store.max_phy_offset()) > 0
