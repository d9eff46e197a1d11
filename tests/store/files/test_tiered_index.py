"""The tiered storage's key index (``rmq_sys_INDEX``) of a real 5.3.3 broker
(``tests/store/files/data/tiered-broker-5.3.3``): its compacted segments and the broker's queryMessage answers."""

import json
import shutil
import struct
from pathlib import Path

import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.tiered_index import (
    COMPACT_INDEX_ITEM_SIZE,
    END_MAGIC_CODE,
    INDEX_HEADER_SIZE,
    tiered_key_hash,
)
from rocketstore_spark.store.files.tiered_metadata import load_tiered_metadata

DATA = Path(__file__).parent / "data" / "tiered-broker-5.3.3"
INDEX_DIR = DATA / "segments" / "8e9e2247_e2e-cluster" / "broker-e2e" / "rmq_sys_INDEX" / "0" / "INDEX"
SLOTS, MAX_ITEMS = 64, 256  # the broker's tieredStoreIndexFileMaxHashSlotNum and tieredStoreIndexFileMaxIndexNum


def answers():
    """What the broker's queryMessage answered a client for each key, queue 0 only (the captured queue)."""
    out = {}
    for line in map(json.loads, (DATA / "by-key.jsonl").read_text().splitlines()):
        out.setdefault(line.pop("key"), []).append(line)
    return {key: [line for line in lines if line["queueId"] == 0] for key, lines in out.items()}


def test_segments_are_the_compacted_files():
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        segments = history.tiered.index.segments
    # every file the broker uploaded; an empty one (rolled, nothing written) holds no keys
    assert len(segments) == len([p for p in INDEX_DIR.iterdir() if p.stat().st_size]) > 1
    for seg in segments:
        magic, = struct.unpack_from(">i", seg.path.read_bytes(), 0)
        assert magic == END_MAGIC_CODE
        assert seg.hash_slots == SLOTS and 0 < seg.item_count < MAX_ITEMS
        assert seg.path.stat().st_size == INDEX_HEADER_SIZE + 8 * SLOTS + COMPACT_INDEX_ITEM_SIZE * seg.item_count
        assert seg.begin_timestamp > 0 and seg.end_timestamp > 0  # a file may index messages stored before it began
    # the files follow each other in time, as the broker created them
    begins = [s.begin_timestamp for s in segments]
    assert begins == sorted(begins)


def test_key_lookups_are_what_the_broker_answered():
    got = answers()
    assert set(got) == {"key-7", "key-250", "k3"}
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        for key, lines in got.items():
            rows = history.query_by_key("history", key).to_pylist()
            assert [(r["queueOffset"], r["commitLogOffset"], r["uniqKey"]) for r in rows] == \
                sorted((g["queueOffset"], g["commitLogOffset"], g["msgId"]) for g in lines)
            for row in rows:
                assert key in row["keys"] and row["topic"] == "history"
        # a UNIQ_KEY is indexed too
        first = got["k3"][0]
        (row,) = history.query_by_key("history", first["msgId"]).to_pylist()
        assert (row["queueOffset"], row["commitLogOffset"]) == (first["queueOffset"], first["commitLogOffset"])
        assert history.query_by_key("history", "no-such-key").num_rows == 0


def test_the_broker_rules_max_count_topic_and_time():
    got = answers()["k3"]
    metadata = load_tiered_metadata(DATA / "config" / "tieredStoreMetadata.json")
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        index = history.tiered.index
        # at most max_num items, newest files first, before their records are read (items of queues the capture
        # lacks are skipped)
        items = index.query("history", "k3", 5, 0, 1 << 62)
        assert len(items) == 5
        rows = history.query_by_key("history", "k3", max_num=5).to_pylist()
        assert sorted((r["queueId"], r["commitLogOffset"]) for r in rows) == \
            sorted((i.queue_id, i.offset) for i in items if i.queue_id == 0)
        # the same key in the other topic: other items (the hash covers "<topic>#<key>"), its topic id
        bulk = index.query("bulk", "key-7", 64, 0, 1 << 62)
        assert bulk and {i.topic_id for i in bulk} == {metadata.topics["bulk"]}
        assert {i.topic_id for i in index.query("history", "key-7", 64, 0, 1 << 62)} == {metadata.topics["history"]}
        # the bulk queues are not in the capture: their items are skipped
        assert history.query_by_key("bulk", "key-7").num_rows == 0
        # items keep store times to the second from their file's begin; files are chosen by when they began
        times = sorted(r["storeTimestamp"] for r in history.query_by_key("history", "k3").to_pylist())
        assert len(times) == len(got)
        begins = sorted(s.begin_timestamp for s in index.segments)
        late = history.query_by_key("history", "k3", begin=begins[-1] + 1).num_rows
        assert late == 0  # no file began after that, though messages were stored later
        first_file = history.query_by_key("history", "k3", begin=0, end=begins[1] - 1).to_pylist()
        assert 0 < len(first_file) < len(got)
    assert tiered_key_hash("history", "key-7") >= 0


def test_a_damaged_slot_names_segment_and_offset(tmp_path):
    copy = tmp_path / "segments"
    shutil.copytree(DATA / "segments", copy)
    index_dir = copy / INDEX_DIR.relative_to(DATA / "segments")
    with RocketStore.open_history(tiered_path=copy) as history:
        hits = {s.path.name for s in history.tiered.index.segments
                if s.query(tiered_key_hash("history", "key-7"), 64, 0, 1 << 62)}
    (name,) = hits
    path = index_dir / name
    data = bytearray(path.read_bytes())
    slot = INDEX_HEADER_SIZE + (tiered_key_hash("history", "key-7") % SLOTS) * 8
    data[slot + 4:slot + 8] = struct.pack(">i", 5)  # a length that is no whole number of items
    path.write_bytes(bytes(data))
    with RocketStore.open_history(tiered_path=copy) as history:
        with pytest.raises(StoreFormatError, match="whole 28-byte items") as e:
            history.query_by_key("history", "key-7")
    assert e.value.path == str(path) and e.value.offset == slot
    path.write_bytes(bytes(data[:-3]))  # truncated
    with RocketStore.open_history(tiered_path=copy) as history:
        with pytest.raises(StoreFormatError, match="truncated") as e:
            history.query_by_key("history", "key-7")
    assert e.value.path.startswith(str(index_dir))
