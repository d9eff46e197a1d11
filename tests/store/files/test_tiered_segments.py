"""The tiered storage's files as a real 5.3.3 broker wrote them (``data/tiered-broker-5.3.3``): segment names,
listing, the metadata file, the queue's offsets and units."""

import shutil
from pathlib import Path

import pytest

from rocketstore_spark.errors import InvalidArgumentError, StoreFormatError
from rocketstore_spark.store.files.tiered_metadata import load_tiered_metadata, parse_fastjson
from rocketstore_spark.store.files.tiered_queue import TieredQueue
from rocketstore_spark.store.files.tiered_segments import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    cluster_dir_name,
    file_name_to_offset,
    offset_to_file_name,
    queue_dirs,
)

DATA = Path(__file__).parent / "data" / "tiered-broker-5.3.3"
SEGMENTS = DATA / "segments"


def test_segment_names_are_the_brokers():
    names = sorted(p.name for p in SEGMENTS.rglob("*") if p.is_file())
    assert names and all(offset_to_file_name(file_name_to_offset(n)) == n for n in names)
    assert offset_to_file_name(16264) == "8fa7b2a900000000000000016264"
    assert cluster_dir_name("e2e-cluster") in {p.name for p in SEGMENTS.iterdir()}


def test_a_name_that_is_not_a_segment_is_refused():
    with pytest.raises(StoreFormatError, match="offset2FileName"):
        file_name_to_offset("00000000000000000000")
    with pytest.raises(StoreFormatError, match="offset2FileName"):
        file_name_to_offset("ffffffff00000000000000000000")  # the hash does not match the offset


def test_queue_dirs_and_segments():
    (queue,) = queue_dirs(SEGMENTS)
    assert (queue.cluster, queue.broker, queue.topic, queue.queue_id) == ("e2e-cluster", "broker-e2e", "history", 0)
    logs, units = queue.segments(COMMIT_LOG), queue.segments(CONSUME_QUEUE)
    assert [s.base_offset for s in logs] == [0, 16358] and logs[-1].end == 16358 + 6168
    assert [s.base_offset for s in units] == [0, 400, 800, 1200] and units[-1].end == 65 * 20


def test_metadata_as_the_broker_wrote_it_matches_the_files():
    meta = load_tiered_metadata(DATA / "config" / "tieredStoreMetadata.json")
    assert meta.topics == {"history": 0, "bulk": 1}
    assert sorted(q for t, q in meta.queues if t == "history") == [0, 1, 2, 3]
    (queue,) = queue_dirs(SEGMENTS)
    for kind in (COMMIT_LOG, CONSUME_QUEUE):
        recorded = [(s.base_offset, s.size) for s in meta.segments_of("broker-e2e/history/0", kind)]
        assert recorded == [(s.base_offset, s.size) for s in queue.segments(kind)]
    logs = meta.segments_of("broker-e2e/history/0", COMMIT_LOG)
    assert logs[0].begin_timestamp <= logs[0].end_timestamp <= logs[1].begin_timestamp <= logs[1].end_timestamp


def test_fastjson_numeric_keys_outside_strings_only():
    assert parse_fastjson('{"a":{0:{"p":"x,1:y"}},"b":{12:[1,2]}}') == {"a": {"0": {"p": "x,1:y"}}, "b": {"12": [1, 2]}}
    with pytest.raises(StoreFormatError, match="syntax error"):
        parse_fastjson('{"a":', "meta.json")


def test_queue_offsets_and_units():
    queue = TieredQueue(queue_dirs(SEGMENTS)[0])
    assert (queue.first_offset, queue.max_offset) == (0, 65)
    units = queue.units(0, 65)
    assert units["phy_offset"][0] == 0
    # one queue's records back to back: each unit starts where the one before ends
    assert (units["phy_offset"][1:] == units["phy_offset"][:-1] + units["size"][:-1]).all()
    assert units["phy_offset"][-1] + units["size"][-1] == queue.log_end


def test_a_commit_log_segment_missing_is_an_error(tmp_path):
    copy = tmp_path / "segments"
    shutil.copytree(SEGMENTS, copy)
    (queue,) = queue_dirs(copy)
    (queue.path / COMMIT_LOG / offset_to_file_name(0)).unlink()
    shrunk = TieredQueue(queue_dirs(copy)[0])
    # the broker serves from the first record left: its QUEUEOFFSET
    assert shrunk.first_offset > 0
    with pytest.raises(StoreFormatError, match="expected bytes"):
        shrunk.records(shrunk.units(0, 1))


def test_not_a_tiered_directory(tmp_path):
    with pytest.raises(StoreFormatError, match="one cluster directory"):
        queue_dirs(tmp_path)
    with pytest.raises(StoreFormatError, match="expected a directory"):
        queue_dirs(tmp_path / "absent")


def test_a_remote_directory_is_refused():
    with pytest.raises(InvalidArgumentError, match="expected a local directory.*copy or mount"):
        queue_dirs("s3://bucket/tiered")
