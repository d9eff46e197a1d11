"""The rocksdb-cq golden store (``storeType=defaultRocksDB``): consume queues read from the RocksDB database
(opened read-only, never modified) equal to the real store's answers; a locked, newer or damaged database is a
clear error."""

import hashlib
import multiprocessing

import numpy as np
import pytest

from rocketstore_spark.errors import StoreFormatError, StoreLockedError
from rocketstore_spark.store import RocketStore
from tests.conftest import sizes_from_args
from tests.store.read.variant_view import (
    compare_key_queries,
    compare_offsets,
    compare_queue_reads,
    compare_scan_with_manifest,
    compare_time_queries,
    load_jsonl,
    sample_queries,
    variant_fixtures,
)

TOPICS = ["LongTopic_abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxy"
          "z0123456789v2-records", "TopicTest", "orders_v1-EU", "rocks_topic"]


golden, view, _, copy = variant_fixtures("rocksdb-cq", own_store=True)  # its store is below


def snapshot(directory) -> list:
    return sorted((p.name, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                  for p in directory.iterdir())


@pytest.fixture(scope="module")
def store(golden):
    before = snapshot(golden / "store" / "consumequeue")
    with RocketStore.open(golden / "store", **sizes_from_args(golden / "sizes.args")) as s:
        yield s
    assert snapshot(golden / "store" / "consumequeue") == before  # read-only: not a byte, not a file more


def test_detected_as_rocksdb_cq_and_its_queues_come_from_the_offset_table(store, view):
    assert store.variant.name == "rocksdb-cq"
    assert store.topics() == TOPICS
    compare_offsets(store, view)


def test_every_row_of_every_queue_equals_the_real_getmessage(store, view):
    assert compare_queue_reads(store, view) == len(view["messages"]) == 4493


def test_every_unit_equals_the_database_dump(store, golden):
    """Each ``default`` entry of ``rocksdb-cq.jsonl`` (the real store's database, decoded) is the unit read."""
    entries = [e for e in load_jsonl(golden / "rocketmq-view" / "rocksdb-cq.jsonl") if e["cf"] == "default"]
    assert len(entries) == 4493
    bad = []
    for e in entries:
        d = e["decoded"]
        unit = store.consume_queue(d["topic"], d["queueId"]).units(d["cqOffset"], d["cqOffset"] + 1)[0]
        if (int(unit["phy_offset"]), int(unit["size"]), int(unit["tags_code"])) != (d["phyOffset"], d["size"],
                                                                                   d["tagsCode"]):
            bad.append(d)
    assert not bad, bad[:3]


def test_scan_equals_the_manifest(store, view):
    compare_scan_with_manifest(store, view["manifest"], verify_crc=True)


def test_key_queries_sample(store, view):
    compare_key_queries(store, view["manifest"], sample_queries(view["queries"], 8))


@pytest.mark.slow
def test_key_queries_all(store, view):
    compare_key_queries(store, view["manifest"], view["queries"])


def test_time_queries_from_the_units_store_times(store, view):
    assert len(view["time_queries"]) == 455
    compare_time_queries(store, view["time_queries"])


def test_tag_filter_and_get_message(store, view):
    want = [line["cqOffset"] for line in view["messages"] if line["topic"] == "rocks_topic" and line["queueId"] == 1
            and line["tags"] == "TagA"]
    got = [r["queueOffset"] for b in store.read_queue("rocks_topic", 1, tags="TagA", columns=["queueOffset"])
           for r in b.to_pylist()]
    assert got == want and got
    res = store.get_message("rocks_topic", 1, 0, max_nums=8, columns=["queueOffset", "commitLogOffset"])
    assert res.status == "FOUND" and res.messages.column("queueOffset").to_pylist() == list(range(8))


# --- locked, newer, damaged -----------------------------------------------------------------------------------



def _hold_lock(path, ready, done):
    import fcntl

    with open(path, "r+b") as fh:
        fcntl.lockf(fh.fileno(), fcntl.LOCK_EX)  # what RocksDB's LockFile takes for a running broker
        ready.set()
        done.wait(60)


def test_a_locked_database_is_refused(copy, golden):
    ready, done = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold_lock, args=(copy / "consumequeue" / "LOCK", ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(StoreLockedError, match="consumequeue is locked .*running broker"):
            RocketStore.open(copy, **sizes_from_args(golden / "sizes.args"))
    finally:
        done.set()
        holder.join(30)
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:  # released: readable again
        assert s.max_offset("TopicTest", 0) > 0


def test_a_database_of_a_newer_rocksdb_is_a_clear_error(copy, golden):
    """Table files of a format version this RocksDB does not know, from a release newer than the binding's."""
    sst = max((copy / "consumequeue").glob("*.sst"), key=lambda p: p.stat().st_size)
    data = bytearray(sst.read_bytes())
    data[-12:-8] = (99).to_bytes(4, "little")  # the block-based table footer's format_version
    sst.write_bytes(bytes(data))
    options = next((copy / "consumequeue").glob("OPTIONS-*"))
    options.write_text(options.read_text().replace("rocksdb_version=9.8.4", "rocksdb_version=99.0.0"))
    with pytest.raises(StoreFormatError, match="written by a newer RocksDB .*found RocksDB 99.0.0") as err:
        RocketStore.open(copy, **sizes_from_args(golden / "sizes.args"))
    assert err.value.path == str(copy / "consumequeue") and "rocketstore-rocksdb-" not in str(err.value)


@pytest.mark.parametrize("damage", ["truncated table", "missing manifest"])
def test_a_damaged_database_is_a_clear_error(copy, golden, damage):
    cq = copy / "consumequeue"
    if damage == "truncated table":
        sst = max(cq.glob("*.sst"), key=lambda p: p.stat().st_size)
        sst.write_bytes(sst.read_bytes()[:sst.stat().st_size // 2])
    else:
        next(cq.glob("MANIFEST-*")).unlink()
    with pytest.raises(StoreFormatError, match="consumequeue is damaged") as err:
        RocketStore.open(copy, **sizes_from_args(golden / "sizes.args"))
    assert err.value.path == str(cq)


def test_a_missing_unit_is_an_error_naming_queue_and_offset(copy, golden):
    """The ``max`` key promises units the ``default`` family does not hold (a damaged or half-copied database)."""
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(str(copy / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)},
               access_type=AccessType.read_write())
    key = next(k for k in db.get_column_family("offset").keys()
               if b"TopicTest" in k and k.endswith(b"\x00\x00\x00\x00"))
    value = bytes(db.get_column_family("offset")[key])
    db.get_column_family("offset")[key] = value[:8] + (np.int64(10_000).byteswap().tobytes())
    db.close()
    (copy / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(StoreFormatError, match=r"TopicTest/0: expected a 28-byte unit for queue offset 10000 "
                                                   r"\(the queue spans 0\.\.10001\), found no entry") as err:
            list(s.read_queue("TopicTest", 0))
        assert err.value.path == str(copy / "consumequeue")


def test_a_table_block_failing_its_checksum_is_an_error_naming_the_file_and_offset(copy, golden):
    """Damage RocksDB finds only when a read reaches the block (the fuzz campaign found this): our error, naming the
    store's table file (not the private link directory) and the block's offset."""
    sst = max((copy / "consumequeue").glob("*.sst"), key=lambda p: p.stat().st_size)
    data = bytearray(sst.read_bytes())
    for at in range(len(data) // 3, len(data) // 3 + 64):  # inside a data block, far from the footer and index
        data[at] ^= 0xFF
    sst.write_bytes(bytes(data))
    with RocketStore.open(copy, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(StoreFormatError, match="consumequeue is damaged .*checksum mismatch") as err:
            for topic in s.topics():
                for qid in s.queue_ids(topic):
                    list(s.read_queue(topic, qid))
    assert err.value.path == str(sst) and 0 < err.value.offset < len(data)
    assert "rocketstore-rocksdb-" not in str(err.value)
