"""A torn last record with an ``abort`` file: the valid end is where RocketMQ's own recovery puts it.

The last record (highest commit-log offset) is zeroed from byte ``p`` of the record to its end. Observed with the
real store (spec §8): the record survives iff every byte before its properties is unchanged (a tear at or before
the properties-length field breaks the length arithmetic or the body CRC); the torn properties then decode to
what Java's ``string2messageProperties`` makes of the zero-filled text.
"""

import hashlib
import shutil

import pyarrow as pa
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.store import RocketStore
from tests.store.reference import commitlog_file_of, java_properties, record_layout

FILE_SIZE = 1048576


class TornStore:
    """One private copy of the golden store with ``abort``; tears rewrite only the last commit-log file."""

    def __init__(self, root, manifest, golden_queue_max):
        self.root = root
        self.last = max(manifest, key=lambda m: m["commitLogOffset"])
        name, self.pos = commitlog_file_of(self.last["commitLogOffset"], FILE_SIZE)
        self.path = root / "commitlog" / name
        assert self.path == sorted((root / "commitlog").iterdir())[-1]
        self.original = self.path.read_bytes()
        self.record = self.original[self.pos:self.pos + self.last["storeSize"]]
        self.layout = record_layout(self.last)
        self.queue_max = golden_queue_max
        (root / "abort").write_text("12345")

    def tear(self, position: int) -> bytes:
        torn = self.record[:position] + bytes(len(self.record) - position)
        self.path.write_bytes(self.original[:self.pos] + torn + self.original[self.pos + len(torn):])
        return torn

    def restore(self) -> None:
        self.path.write_bytes(self.original)


@pytest.fixture(scope="module")
def golden_queue_max(golden_view):
    return {(q["topic"], q["queueId"]): q["maxOffset"] for q in golden_view["queues"]}


@pytest.fixture(scope="module")
def torn(golden_store_path, manifest, golden_queue_max, tmp_path_factory):
    root = tmp_path_factory.mktemp("torn") / "store"
    shutil.copytree(golden_store_path, root)
    store = TornStore(root, manifest, golden_queue_max)
    yield store
    store.restore()


def tear_and_check(t: TornStore, position: int, check_queues: bool = True) -> bool:
    """Tear at ``position``, open, check everything; returns whether the torn record stayed valid."""
    last, props_pos = t.last, t.layout["props_pos"]
    torn = t.tear(position)
    try:
        still_valid = torn[:props_pos] == t.record[:props_pos]
        with RocketStore.open(t.root) as s:
            assert s.recovery.mode == "abnormal"
            expected_end = last["commitLogOffset"] + (last["storeSize"] if still_valid else 0)
            assert s.max_phy_offset() == expected_end, position
            key = (last["topic"], last["queueId"])
            assert s.max_offset(*key) == last["cqOffset"] + (1 if still_valid else 0) == \
                t.queue_max[key] - (0 if still_valid else 1), position
            if check_queues:
                others = {k: s.max_offset(*k) for k in t.queue_max if k != key}
                assert others == {k: v for k, v in t.queue_max.items() if k != key}, position
            row = s.look_message_by_offset(last["commitLogOffset"], ["properties", "propertiesString", "body",
                                                                     "uniqKey", "topic"])
            if not still_valid:
                assert row is None, position
                assert s.query_by_key(last["topic"], last["uniqKey"]).num_rows == 0
                return False
            text = torn[props_pos:].decode("utf-8", "replace")  # Java's new String(bytes, UTF_8)
            expected = java_properties(text)
            assert row["propertiesString"] == text, position
            assert dict(row["properties"]) == expected, position
            assert row["topic"] == last["topic"] and len(row["body"]) == last["bodyLength"]
            # the index of the torn tail is rebuilt from the commit log: the UNIQ_KEY is found iff it survived
            found = s.query_by_key(last["topic"], last["uniqKey"], columns=["commitLogOffset"])
            survived = expected.get("UNIQ_KEY") == last["uniqKey"]
            assert found.column(0).to_pylist() == ([last["commitLogOffset"]] if survived else []), position
            return True
    finally:
        t.restore()


def interesting_positions(t: TornStore) -> dict:
    """Named tear positions (bytes from the record start) for the sample run."""
    size, lay = t.last["storeSize"], t.layout
    return {
        "total size": 0, "total size low byte": 3, "magic": 4, "body crc": 8, "queue id": 12,
        "queue offset": 20, "physical offset": 28, "sysflag": 36, "born timestamp": 40,
        "store timestamp": lay["store_ts_pos"], "body length": lay["body_len_pos"], "body start": lay["body_pos"],
        "mid body": lay["body_pos"] + t.last["bodyLength"] // 2, "topic length": lay["topic_len_pos"],
        "mid topic": lay["topic_pos"] + 5, "props length high byte": lay["props_len_pos"],
        "props length low byte": lay["props_len_pos"] + 1, "first props byte": lay["props_pos"],
        "props + 3": lay["props_pos"] + 3, "mid props": (lay["props_pos"] + size) // 2,
        "second-last byte": size - 2, "last byte": size - 1,
    }


POSITION_NAMES = ["total size", "total size low byte", "magic", "body crc", "queue id", "queue offset",
                  "physical offset", "sysflag", "born timestamp", "store timestamp", "body length", "body start",
                  "mid body", "topic length", "mid topic", "props length high byte", "props length low byte",
                  "first props byte", "props + 3", "mid props", "second-last byte", "last byte"]


def test_the_torn_record_is_the_last_one(torn, golden_store):
    assert torn.last["commitLogOffset"] + torn.last["storeSize"] == golden_store.max_phy_offset()
    assert torn.record[:4] == torn.last["storeSize"].to_bytes(4, "big")
    assert torn.layout["props_pos"] == torn.last["storeSize"] - len(torn.last["propertiesString"].encode())
    assert sorted(interesting_positions(torn)) == sorted(POSITION_NAMES)


@pytest.mark.parametrize("name", POSITION_NAMES)
def test_tear_at_interesting_positions(torn, name):
    position = interesting_positions(torn)[name]
    valid = tear_and_check(torn, position)
    assert valid == (position >= torn.layout["props_pos"]), position


def test_unicode_properties_torn_mid_character(torn):
    """A tear inside a multi-byte UTF-8 character leaves a malformed sequence: decoded as U+FFFD like Java."""
    props = torn.last["propertiesString"].encode("utf-8")
    multi = [i for i, b in enumerate(props) if b >= 0xC0]
    assert multi, "the last record has non-ASCII properties"
    for start in multi[:3]:
        assert tear_and_check(torn, torn.layout["props_pos"] + start + 1, check_queues=False)


def test_earlier_records_read_identically_after_a_tear(torn, manifest):
    earlier = [m for m in manifest if m["commitLogOffset"] < torn.last["commitLogOffset"]]
    sample = sorted(earlier[::50] + earlier[-300:], key=lambda m: m["commitLogOffset"])
    torn.tear(torn.layout["body_pos"] + 3)
    try:
        with RocketStore.open(torn.root) as s:
            got = s.read_records_at([m["commitLogOffset"] for m in sample], ["uniqKey", "msgId", "storeSize"])
            assert got.to_pylist() == [{"uniqKey": m["uniqKey"], "msgId": m["msgId"], "storeSize": m["storeSize"]}
                                       for m in sample]
            key = (torn.last["topic"], torn.last["queueId"])
            # the torn record's unit is the one message recovery drops: reported, and a read asking for it says so
            assert [(r.topic, r.queue_id, r.start, r.count, r.phy_offset) for r in s.lost_ranges()] == \
                [(*key, torn.last["cqOffset"], 1, torn.last["commitLogOffset"])]
            with pytest.raises(DataLossError, match=f"offsets {torn.last['cqOffset']}..{torn.last['cqOffset'] + 1}"):
                list(s.read_queue(*key, columns=["queueOffset"]))
            offsets = [o for b in s.read_queue(*key, columns=["queueOffset"], fail_on_data_loss=False)
                       for o in b.column(0).to_pylist()]
            assert offsets == list(range(torn.last["cqOffset"]))
            count = sum(b.num_rows for b in s.scan_raw(columns=["queueId"]))
            assert count == len(manifest) - 1
    finally:
        torn.restore()


@pytest.mark.slow
def test_tear_every_byte_position(torn):
    outcomes = []
    for position in range(torn.last["storeSize"]):
        outcomes.append(tear_and_check(torn, position, check_queues=position % 37 == 0))
    props_pos = torn.layout["props_pos"]
    assert all(outcomes[props_pos:]) and not any(
        outcomes[p] for p in range(props_pos) if torn.record[p:props_pos] != bytes(props_pos - p))


def tree_digest(root) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_abort_without_tear_recovers_to_the_clean_end(golden_copy, golden_store, golden_queue_max):
    (golden_copy / "abort").write_text("12345")
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "abnormal"
        assert s.max_phy_offset() == golden_store.max_phy_offset()
        assert {k: s.max_offset(*k) for k in golden_queue_max} == golden_queue_max
        assert s.query_by_key("TopicTest", "order-42").num_rows == 64


@pytest.mark.parametrize("abort", [False, True])
def test_opening_and_reading_never_modify_the_store(golden_copy, manifest, abort):
    last = max(manifest, key=lambda m: m["commitLogOffset"])
    if abort:
        (golden_copy / "abort").write_text("12345")
        name, pos = commitlog_file_of(last["commitLogOffset"], FILE_SIZE)
        path = golden_copy / "commitlog" / name
        data = bytearray(path.read_bytes())
        data[pos + 40:pos + last["storeSize"]] = bytes(last["storeSize"] - 40)  # torn: cut off in memory only
        path.write_bytes(bytes(data))
    before = tree_digest(golden_copy)
    names = sorted(str(p.relative_to(golden_copy)) for p in golden_copy.rglob("*"))
    with RocketStore.open(golden_copy) as s:
        assert s.max_phy_offset() == last["commitLogOffset"] + (0 if abort else last["storeSize"])
        assert sum(b.num_rows for b in s.scan_raw(columns=["topic", "body"])) == len(manifest) - abort
        assert sum(r.count for r in s.lost_ranges()) == abort  # the torn record's unit
        for topic in s.topics():
            for qid in s.queue_ids(topic):
                list(s.read_queue(topic, qid, columns=["queueOffset"], fail_on_data_loss=False))
        assert s.query_by_key("TopicTest", "order-42").num_rows == 64
        assert s.get_message("TopicTest", 0, 0).status == "FOUND"
        s.offset_by_time("TopicTest", 0, 1795337770000)
        s.look_message_by_msg_id(manifest[10]["msgId"])
    assert tree_digest(golden_copy) == before
    assert sorted(str(p.relative_to(golden_copy)) for p in golden_copy.rglob("*")) == names


def test_torn_store_repairs_on_append(golden_copy, manifest):
    """The writer (not the reader) cuts the torn tail off before appending; the result opens cleanly."""
    last = max(manifest, key=lambda m: m["commitLogOffset"])
    (golden_copy / "abort").write_text("1")
    name, pos = commitlog_file_of(last["commitLogOffset"], FILE_SIZE)
    path = golden_copy / "commitlog" / name
    data = bytearray(path.read_bytes())
    data[pos + 10:pos + last["storeSize"]] = bytes(last["storeSize"] - 10)
    path.write_bytes(bytes(data))
    with RocketStore.open_writer(golden_copy) as w:
        assert any("repaired" in a for a in w.recovery_actions)
        w.append(pa.table({"topic": [last["topic"]], "queueId": [last["queueId"]], "body": [b"after crash"]}))
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "normal"
        assert s.max_offset(last["topic"], last["queueId"]) == last["cqOffset"] + 1
        row = s.look_message_by_offset(last["commitLogOffset"])
        assert row["body"] == b"after crash"


def test_a_crash_before_the_consume_queues_were_flushed_reads_every_message(golden_copy, manifest, dispatched):
    """The broker crashed (``abort``) after writing the commit log but before flushing the last quarter of the
    consume-queue units. Opening re-dispatches those records the way the real store's recovery would, so every
    queue, tag-filtered or not, still returns all of its messages, and nothing is written to disk."""
    import numpy as np

    from rocketstore_spark.store.format import layout as L

    queued = sorted(m["commitLogOffset"] for m in manifest if m["inConsumeQueue"])
    cut = queued[len(queued) * 3 // 4]
    lost = 0
    for cq_file in (golden_copy / "consumequeue").rglob("*"):
        if not cq_file.is_file():
            continue
        units = np.frombuffer(cq_file.read_bytes(), dtype=L.CQ_UNIT_DTYPE).copy()
        unflushed = (units["phy_offset"] >= cut) & (units["size"] > 0)
        if unflushed.any():
            lost += int(unflushed.sum())
            units[unflushed] = np.zeros(1, dtype=L.CQ_UNIT_DTYPE)
            cq_file.write_bytes(units.tobytes())
    assert lost > 100
    (golden_copy / "abort").write_text("12345")
    before = tree_digest(golden_copy)
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "abnormal"
        for (topic, qid), rows in dispatched.items():
            assert s.max_offset(topic, qid) == len(rows) + rows[0]["cqOffset"], (topic, qid)
            got = [o for b in s.read_queue(topic, qid, columns=["queueOffset"]) for o in b.column(0).to_pylist()]
            assert got == [m["cqOffset"] for m in rows], (topic, qid)
            tagged = [o for b in s.read_queue(topic, qid, tags="TagA || TagB", columns=["queueOffset"])
                      for o in b.column(0).to_pylist()]
            assert tagged == [m["cqOffset"] for m in rows if m["tags"] in ("TagA", "TagB")], (topic, qid)
    assert tree_digest(golden_copy) == before
