"""A torn last record with an ``abort`` file: the valid end is where RocketMQ's own recovery puts it."""

import hashlib

import shutil

import pytest

from rocketstore_spark.store import RocketStore


def java_properties(text: str) -> dict:
    """Reference: ``MessageDecoder.string2messageProperties``, character by character."""
    out, index = {}, 0
    while index < len(text):
        end = text.find("\u0002", index)
        end = len(text) if end < 0 else end
        if end - index >= 3:
            sep = text.find("\u0001", index)
            if index < sep < end - 1:
                out[text[index:sep]] = text[sep + 1:end]
        index = end + 1
    return out


@pytest.fixture(scope="module")
def torn_setup(golden_store_path, manifest, tmp_path_factory):
    last = max(manifest, key=lambda m: m["commitLogOffset"])
    store = tmp_path_factory.mktemp("torn") / "store"
    shutil.copytree(golden_store_path, store)
    (store / "abort").write_text("12345")
    size = 1048576
    path = store / "commitlog" / f"{last['commitLogOffset'] - last['commitLogOffset'] % size:020d}"
    original = path.read_bytes()
    return store, path, original, last


def tear_and_check(torn_setup, manifest, position):
    store, path, original, last = torn_setup
    pos_in_file = last["commitLogOffset"] % 1048576
    record = original[pos_in_file:pos_in_file + last["storeSize"]]
    torn = record[:position] + bytes(len(record) - position)
    props_len = len(last["propertiesString"].encode("utf-8"))
    props_start = last["storeSize"] - props_len
    path.write_bytes(original[:pos_in_file] + torn + original[pos_in_file + len(record):])
    try:
        with RocketStore.open(store) as s:
            assert s.recovery.mode == "abnormal"
            still_valid = torn[:props_start] == record[:props_start]
            expected_end = last["commitLogOffset"] + (last["storeSize"] if still_valid else 0)
            assert s.max_phy_offset() == expected_end, position
            queue_max = s.max_offset(last["topic"], last["queueId"])
            assert queue_max == last["cqOffset"] + (1 if still_valid else 0)
            if still_valid:
                row = s.look_message_by_offset(last["commitLogOffset"], ["properties", "propertiesString"])
                text = torn[props_start:].decode("utf-8", "replace")
                assert dict(row["properties"]) == java_properties(text)
            return still_valid
    finally:
        path.write_bytes(original)


def interesting_positions(last):
    size = last["storeSize"]
    props_start = size - len(last["propertiesString"].encode("utf-8"))
    body_start = size - len(last["propertiesString"].encode()) - 2 - len(last["topic"].encode()) - 1 - \
        last["bodyLength"]
    return sorted({0, 3, 4, 8, 20, 36, 60, body_start, body_start + last["bodyLength"] // 2,
                   props_start - 2, props_start - 1, props_start, props_start + 3, (props_start + size) // 2,
                   size - 1})


def test_tear_positions_sample(torn_setup, manifest):
    outcomes = {p: tear_and_check(torn_setup, manifest, p) for p in interesting_positions(torn_setup[3])}
    assert not outcomes[0] and outcomes[torn_setup[3]["storeSize"] - 1]
    earlier = [m for m in manifest if m["commitLogOffset"] < torn_setup[3]["commitLogOffset"]][-200:]
    with RocketStore.open(torn_setup[0]) as s:
        rows = s.read_records_at([m["commitLogOffset"] for m in earlier], ["uniqKey"]).column(0).to_pylist()
        assert rows == [m["uniqKey"] for m in earlier]


@pytest.mark.slow
def test_tear_every_byte_position(torn_setup, manifest):
    for position in range(torn_setup[3]["storeSize"]):
        tear_and_check(torn_setup, manifest, position)


def test_abort_without_tear_and_opening_never_modifies(golden_copy, golden_store):
    (golden_copy / "abort").write_text("1")
    digest = lambda: hashlib.sha256(b"".join(p.read_bytes() for p in sorted(golden_copy.rglob("*"))  # noqa
                                                if p.is_file())).hexdigest()
    before = digest()
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "abnormal"
        assert s.max_phy_offset() == golden_store.max_phy_offset()
        list(s.scan_commitlog(columns=["topic"]))
        s.query_by_key("TopicTest", "order-42")
    assert digest() == before


def test_torn_store_repairs_on_append(golden_copy, manifest):
    last = max(manifest, key=lambda m: m["commitLogOffset"])
    (golden_copy / "abort").write_text("1")
    path = golden_copy / "commitlog" / f"{last['commitLogOffset'] - last['commitLogOffset'] % 1048576:020d}"
    data = bytearray(path.read_bytes())
    start = last["commitLogOffset"] % 1048576 + 10
    data[start:start + last["storeSize"] - 10] = bytes(last["storeSize"] - 10)
    path.write_bytes(bytes(data))
    import pyarrow as pa

    with RocketStore.open(golden_copy, mode="a") as w:
        assert any("repaired" in a for a in w.recovery_actions)
        w.append(pa.table({"topic": [last["topic"]], "queueId": [last["queueId"]], "body": [b"after crash"]}))
    with RocketStore.open(golden_copy) as s:
        assert s.recovery.mode == "normal"
        assert s.max_offset(last["topic"], last["queueId"]) == last["cqOffset"] + 1
        row = s.look_message_by_offset(last["commitLogOffset"])
        assert row["body"] == b"after crash"

