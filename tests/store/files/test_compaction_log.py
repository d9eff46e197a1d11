"""The broker's compaction log (``compaction/``), on files a real RocketMQ 5.3.3 broker wrote.

The store is the end state of ``tests/e2e/test_compaction_history.py``: topic ``compacted-history`` (2 queues),
keys ``old-*`` written first, then many versions of keys ``f*``, ``old-0`` and ``f0`` deleted; the broker compacted
its compaction log and expired the commit-log files holding the ``old-*`` keys. The harness lines are what a
consumer received when the restarted broker served the topic (from its compaction log), and the two deletes.
"""

import json
import shutil
import tarfile
from hashlib import sha256
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.errors import CorruptRecordError, StoreFormatError
from rocketstore_spark.store.files.compaction_log import (
    COMPACTION_CQ_DIR,
    COMPACTION_DIR,
    COMPACTION_LOG_DIR,
    CompactionLog,
    compaction_queue_ids,
)
from rocketstore_spark.store.files.compaction_position import CHECKPOINT_FILE, compaction_positions
from rocketstore_spark.store.format.inner_batch import BCQ_STORE_UNIT_SIZE

DATA = Path(__file__).parent / "data"
NAME = "compaction-history-broker-5.3.3"
TOPIC = "compacted-history"
COLUMNS = ["queueOffset", "commitLogOffset", "uniqKey", "properties", "body"]


@pytest.fixture
def history(tmp_path):
    with tarfile.open(DATA / f"{NAME}.tar.xz") as tar:
        tar.extractall(tmp_path / NAME, filter="data")
    lines = [json.loads(line) for line in (DATA / f"{NAME}.harness.jsonl").read_text().splitlines() if line]
    return tmp_path / NAME, lines


def rows_of(log: CompactionLog) -> list[dict]:
    return [r for batch in log.read(COLUMNS) for r in batch.to_pylist()]


def test_the_log_holds_what_the_broker_served(history):
    root, lines = history
    received = [line for line in lines if line["event"] == "received"]
    assert compaction_queue_ids(root, TOPIC) == [0, 1]
    for queue_id in (0, 1):
        served = sorted((x for x in received if x["queueId"] == queue_id), key=lambda x: x["queueOffset"])
        rows = rows_of(CompactionLog(root, TOPIC, queue_id))
        assert [(r["queueOffset"], r["uniqKey"], sha256(r["body"]).hexdigest()) for r in rows] == \
               [(x["queueOffset"], x["msgId"], x["bodySha256"]) for x in served]
        assert [dict(r["properties"])["KEYS"] for r in rows] == [x["properties"]["KEYS"] for x in served]


def test_units_point_at_their_records_in_files_named_by_log_offset(history):
    root, _ = history
    log = CompactionLog(root, TOPIC, 0)
    names = [f.from_offset for f in log.log_files]
    assert names == [f.from_offset for f in log.cq_files] and names[0] == 0
    assert names[1] > log.log_files[0].length  # compaction restarted the rewritten files at 0: a gap
    units = log.units()
    rows = rows_of(log)
    assert [r["commitLogOffset"] for r in rows] == units.units["phy_offset"].tolist()  # positions in this log
    assert log.next_offset(units) == int(units.units["base_offset"][-1]) + 1
    assert set(units.units["batch_size"].tolist()) == {1}


def test_compacted_files_keep_one_message_per_key_through_the_position(history):
    root, lines = history
    positions = compaction_positions(root)
    assert set(positions) == {(TOPIC, 0), (TOPIC, 1)}
    deleted = {(x["queueId"], x["properties"]["KEYS"]) for x in lines if x.get("kind") == "delete"}
    for queue_id in (0, 1):
        rows = rows_of(CompactionLog(root, TOPIC, queue_id))
        compacted = [dict(r["properties"])["KEYS"] for r in rows if r["queueOffset"] <= positions[(TOPIC, queue_id)]]
        assert compacted and len(compacted) == len(set(compacted))
        # a deleted key's older messages went, its delete too once compacted
        gone = {k for q, k in deleted if q == queue_id and k.startswith("old-")}
        assert not gone & set(compacted)


def test_a_store_without_compaction_has_no_compaction_log(tmp_path):
    assert compaction_queue_ids(tmp_path, TOPIC) == []
    assert compaction_positions(tmp_path) == {}
    assert CompactionLog(tmp_path, TOPIC, 0).next_offset() == 0


def test_a_damaged_record_names_the_log_file_and_offset(history):
    root, _ = history
    log = CompactionLog(root, TOPIC, 1)
    units = log.units()
    victim = units.units[2]
    path = Path(log.log_files[0].location)
    data = bytearray(path.read_bytes())
    at = int(victim["phy_offset"]) - log.log_files[0].from_offset
    data[at + 4:at + 8] = b"\x00\x00\x00\x00"  # MAGICCODE
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=f"queue offset {int(victim['base_offset'])}.*magic") as e:
        rows_of(log)
    assert e.value.path == str(path) and e.value.offset == at


def test_a_unit_disagreeing_with_its_record_names_the_log_file_and_offset(history):
    root, _ = history
    log = CompactionLog(root, TOPIC, 0)
    cq = Path(log.cq_files[0].location)
    units = np.frombuffer(cq.read_bytes(), dtype=">i8", count=1, offset=BCQ_STORE_UNIT_SIZE + 28)
    data = bytearray(cq.read_bytes())
    # the second unit's MSGBASEOFFSET moved up by one: still ascending, no longer its record's QUEUEOFFSET
    data[BCQ_STORE_UNIT_SIZE + 28:BCQ_STORE_UNIT_SIZE + 36] = int(units[0] + 1).to_bytes(8, "big")
    cq.write_bytes(bytes(data))
    second = int(CompactionLog(root, TOPIC, 0).units().units["phy_offset"][1])
    with pytest.raises(CorruptRecordError, match=f"QUEUEOFFSET to be {int(units[0]) + 1}.*found {int(units[0])}") as e:
        rows_of(CompactionLog(root, TOPIC, 0))
    assert e.value.path == log.log_files[0].location and e.value.offset == second


def test_a_unit_outside_its_log_file_names_the_consume_queue_file_and_offset(history):
    root, _ = history
    log = CompactionLog(root, TOPIC, 0)
    cq = Path(log.cq_files[0].location)
    data = bytearray(cq.read_bytes())
    data[0:8] = (10 ** 9).to_bytes(8, "big")  # the first unit's PHYOFFSET
    cq.write_bytes(bytes(data))
    with pytest.raises(StoreFormatError, match="outside") as e:
        rows_of(CompactionLog(root, TOPIC, 0))
    assert e.value.path == str(cq) and e.value.offset == 0


def test_offsets_going_back_name_the_consume_queue_file_and_offset(history):
    root, _ = history
    log = CompactionLog(root, TOPIC, 0)
    cq = Path(log.cq_files[1].location)
    data = bytearray(cq.read_bytes())
    data[28:36] = (0).to_bytes(8, "big")  # the last file's first MSGBASEOFFSET below the first file's
    cq.write_bytes(bytes(data))
    with pytest.raises(StoreFormatError, match="ascend, found 0 after") as e:
        CompactionLog(root, TOPIC, 0).units()
    assert e.value.path == str(cq) and e.value.offset == 0


def test_a_log_file_without_its_consume_queue_file_is_an_error(history):
    root, _ = history
    cq_dir = root / COMPACTION_DIR / COMPACTION_CQ_DIR / TOPIC / "1"
    last = max(cq_dir.iterdir())
    last.unlink()
    with pytest.raises(StoreFormatError, match=f"consume-queue file {last.name}.*found none") as e:
        CompactionLog(root, TOPIC, 1)
    assert e.value.path == str(root / COMPACTION_DIR / COMPACTION_LOG_DIR / TOPIC / "1" / last.name)


def test_damaged_positions_name_the_file_and_the_backup_is_read_when_the_file_is_gone(history):
    root, _ = history
    path = root / COMPACTION_DIR / CHECKPOINT_FILE
    expected = compaction_positions(root)
    shutil.move(path, path.with_name("moved"))
    assert compaction_positions(root) == expected  # from position-checkpoint.bak
    path.write_text("{not json")
    with pytest.raises(StoreFormatError, match="compaction positions as JSON") as e:
        compaction_positions(root)
    assert e.value.path == str(path)
