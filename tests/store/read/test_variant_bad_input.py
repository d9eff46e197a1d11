"""Bad variant input beyond the per-variant golden tests' cases: each a clear error naming what was expected, what
was found, and the file and byte offset (or the database directory)."""

import struct

import numpy as np
import pytest

from rocketstore_spark.errors import CorruptRecordError, StoreFormatError
from rocketstore_spark.store import RocketStore
from tests.conftest import sizes_from_args
from tests.store.read.test_variant_batch_cq import last_unit
from tests.store.read.test_variant_batch_cq_recovery import cut_queues_at
from tests.store.read.variant_view import load_view
from tests.store.reference import commitlog_file_of, record_layout

FILE_SIZE = 1048576


@pytest.fixture
def variant_copy(variant_golden, tmp_path):
    def make(name):
        import shutil
        golden = variant_golden(name)
        shutil.copytree(golden / "store", tmp_path / name)
        return golden, load_view(golden), tmp_path / name
    return make


def _patch(path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def test_batch_units_with_a_gap_between_them(variant_copy):
    golden, _, store = variant_copy("batch-cq")
    path, i, units = last_unit(store, 1)
    units["base"][i] += 3  # the last unit no longer starts where the one before ends
    units.tofile(path)
    with RocketStore.open(store, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(CorruptRecordError, match="expected a unit covering queue offset .* without gaps") as err:
            list(s.read_queue("BatchTopic", 1))
        assert err.value.path == str(path)


def test_a_batch_unit_pointing_inside_a_record(variant_copy):
    golden, _, store = variant_copy("batch-cq")
    path, i, units = last_unit(store, 2)
    units["phy"][i] += 4
    units.tofile(path)
    with RocketStore.open(store, **sizes_from_args(golden / "sizes.args")) as s:
        base = int(units["base"][i])
        with pytest.raises(CorruptRecordError, match="bad commit-log record") as err:
            list(s.read_queue("BatchTopic", 2, base, base + 1))
        name, pos = commitlog_file_of(int(units["phy"][i]), FILE_SIZE)
        assert err.value.path.endswith(name) and err.value.offset == pos


def test_a_recovered_inner_batch_with_a_garbled_count(variant_copy):
    """Re-dispatch after a crash reads INNER_BASE / INNER_NUM: a count that is no number names the record."""
    golden, view, store = variant_copy("batch-cq")
    last_file = (view["manifest"][-1]["commitLogOffset"] // FILE_SIZE) * FILE_SIZE
    m = next(m for m in view["manifest"] if m.get("innerMessages") and m["commitLogOffset"] >= last_file)
    text = m["propertiesString"].encode()
    at = text.index(b"INNER_NUM\x01") + len(b"INNER_NUM\x01")
    name, pos = commitlog_file_of(m["commitLogOffset"] + record_layout(m)["props_pos"] + at, FILE_SIZE)
    _patch(store / "commitlog" / name, pos, b"x")
    cut_queues_at(store, last_file)
    with RocketStore.open(store, **sizes_from_args(golden / "sizes.args")) as s:
        with pytest.raises(CorruptRecordError, match=f"record at commit-log offset {m['commitLogOffset']} of batch "
                                                     "topic BatchTopic: expected integer INNER_BASE/INNER_NUM"):
            s.max_offset("BatchTopic", m["queueId"])


def test_a_dledger_entry_index_out_of_sequence(variant_copy):
    golden, view, store = variant_copy("dledger")
    m = view["manifest"][-20]
    entry = m["dledger"]["entryPos"]
    path = store / "dledger-n0" / "data" / f"{(entry // FILE_SIZE) * FILE_SIZE:020d}"
    _patch(path, entry % FILE_SIZE + 8, struct.pack(">q", m["dledger"]["index"] + 5))
    with pytest.raises(CorruptRecordError, match=r"bad DLedger entry: entry index \d+, expected \d+") as err:
        RocketStore.open(store).max_phy_offset()
    assert err.value.path == str(path) and err.value.offset == entry % FILE_SIZE


def test_an_lmq_record_naming_more_queues_than_offsets(variant_copy):
    """INNER_MULTI_DISPATCH names two LMQs, INNER_MULTI_QUEUE_OFFSET holds one offset (its ',' blanked): the LMQ
    read fails saying the property gives no offset for it."""
    golden, view, store = variant_copy("lmq")
    m = next(m for m in view["manifest"] if len(m.get("lmqDispatch") or []) == 2
             and m["commitLogOffset"] + m["storeSize"] < FILE_SIZE)
    d = m["lmqDispatch"][0]
    text = m["propertiesString"].encode()
    value = text.index(b"INNER_MULTI_QUEUE_OFFSET\x01")
    comma = text.index(b",", value)
    name, pos = commitlog_file_of(m["commitLogOffset"] + record_layout(m)["props_pos"] + comma, FILE_SIZE)
    _patch(store / "commitlog" / name, pos, b"0")
    with RocketStore.open(store) as s:
        with pytest.raises(CorruptRecordError, match="gives no offset for this LMQ") as err:
            list(s.read_queue(d["queue"], 0, d["cqOffset"], d["cqOffset"] + 1, columns=["queueOffset"]))
        assert f"{d['queue']}/0/" in err.value.path


def test_a_rocksdb_database_without_the_offset_column_family(variant_copy, tmp_path):
    from rocksdict import Options, Rdict

    golden, _, store = variant_copy("rocksdb-cq")
    db_dir = store / "consumequeue"
    for p in db_dir.iterdir():
        p.unlink()
    Rdict(str(db_dir), Options(raw_mode=True)).close()  # a RocksDB database with the default family only
    for extra in db_dir.glob("rocksdict-config.json"):
        extra.unlink()
    with pytest.raises(StoreFormatError, match="expected column families 'default' and 'offset'") as err:
        RocketStore.open(store)
    assert err.value.path == str(db_dir)
    assert np.all([p.name != "rocksdict-config.json" for p in db_dir.iterdir()])
