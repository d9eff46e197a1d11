"""Consumer groups' committed offsets (``config/consumerOffset.json``), parsed and measured against the queues.

``data/consumerOffset-broker-5.3.3.json`` is the file a real Apache RocketMQ 5.3.3 broker wrote (the end-to-end
harness: 50 messages to topic ``orders``, group ``g-pull`` pulled 10 of them and committed, group ``g-push``
consumed everything; the broker's own transactional check groups are there too). ``...admin.jsonl`` is what
the broker's admin API (``examineConsumeStats``) answered for the two groups just before it was stopped.
"""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from rocketstore_spark.errors import InvalidArgumentError, StoreFormatError
from rocketstore_spark.store import RocketStore, load_consumer_offsets, load_topic_table
from rocketstore_spark.store.files.consumer_offsets import parse_offset_table
from tests.store.write.test_writer import SMALL

DATA = Path(__file__).parent / "data"
BROKER_FILE = DATA / "consumerOffset-broker-5.3.3.json"
ADMIN = [json.loads(line) for line in (DATA / "consumerOffset-broker-5.3.3.admin.jsonl").read_text().splitlines()]


def config_store(tmp_path, text=None, name="consumerOffset.json"):
    """A store whose queues of ``orders`` end where the broker's did (the admin's brokerOffset per queue), with
    the broker's consumer offsets (or ``text``) in its config/."""
    root = tmp_path / "store"
    ends = {o["queueId"]: o["brokerOffset"] for o in ADMIN}
    qids = [q for q, n in sorted(ends.items()) for _ in range(n)]
    table = pa.table({"topic": ["orders"] * len(qids), "queueId": qids,
                      "body": [f"m{i}".encode() for i in range(len(qids))]})
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(table)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / name).write_text(BROKER_FILE.read_text() if text is None else text)
    return root


def test_the_broker_file_parses_to_what_its_admin_api_answered():
    committed = {(c.group, c.topic, c.queue_id): c.offset for c in parse_offset_table(BROKER_FILE.read_text(),
                                                                                        BROKER_FILE)}
    for o in ADMIN:
        assert committed[(o["group"], o["topic"], o["queueId"])] == o["consumerOffset"]
    assert {g for g, _, _ in committed} == {"g-pull", "g-push", "CID_RMQ_SYS_TRANS"}


def test_store_api_lag_equals_the_broker_diff(tmp_path):
    root = config_store(tmp_path)
    with RocketStore.open(root) as store:
        assert store.consumer_groups() == ["CID_RMQ_SYS_TRANS", "g-pull", "g-push"]
        rows = {(r["group"], r["queueId"]): r for r in store.consumer_offsets(topic="orders")}
        for o in ADMIN:
            row = rows[(o["group"], o["queueId"])]
            assert (row["committedOffset"], row["maxOffset"]) == (o["consumerOffset"], o["brokerOffset"])
            assert row["lag"] == o["brokerOffset"] - o["consumerOffset"]
            # the next message's store time: that of the message at the committed offset, none when caught up
            if row["lag"]:
                first = next(store.read_queue("orders", o["queueId"], row["committedOffset"],
                                              row["committedOffset"] + 1, columns=["storeTimestamp"]))
                expected = int(first.column("storeTimestamp")[0].as_py().timestamp() * 1000)
                assert row["nextMessageStoreTime"] == expected
            else:
                assert row["nextMessageStoreTime"] is None
        # a topic without queues in the store (the broker's transaction topics here): max offset 0, no lag
        sys_rows = store.consumer_offsets("CID_RMQ_SYS_TRANS")
        assert sys_rows and all(r["maxOffset"] == 0 and r["lag"] == 0 for r in sys_rows)
        assert store.group_starting_offsets("g-pull") == {"orders": {"0": 0, "1": 10, "2": 0, "3": 0}}
        with pytest.raises(InvalidArgumentError, match="'g-nope'.*g-pull"):
            store.group_starting_offsets("g-nope")


def test_queues_a_group_never_committed_count_from_zero_as_the_broker_reports(tmp_path):
    # g-part committed queue 1 only (its consumer stopped before pulling the others): the broker's ConsumeStats
    # lists every read queue of the topic, the others with consumerOffset 0 and all their messages as lag
    text = '{"offsetTable":{"orders@g-part":{1:4}}}'
    root = config_store(tmp_path, text)
    ends = {o["queueId"]: o["brokerOffset"] for o in ADMIN if o["group"] == "g-pull"}
    with RocketStore.open(root) as store:
        rows = {r["queueId"]: r for r in store.consumer_offsets("g-part")}
        assert sorted(rows) == sorted(ends) == [0, 1, 2, 3]
        for qid, row in rows.items():
            committed = 4 if qid == 1 else 0
            assert (row["committedOffset"], row["maxOffset"], row["lag"]) == (committed, ends[qid],
                                                                               ends[qid] - committed)
            assert row["source"] == ("consumerOffset.json" if qid == 1 else None)
        assert store.group_starting_offsets("g-part") == {"orders": {"0": 0, "1": 4, "2": 0, "3": 0}}
    # the topic table's readQueueNums decides which queues the broker lists (here 6: two without messages)
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"orders": {
        "topicName": "orders", "readQueueNums": 6, "writeQueueNums": 6}}}))
    with RocketStore.open(root) as store:
        rows = {r["queueId"]: r for r in store.consumer_offsets("g-part")}
        assert sorted(rows) == [0, 1, 2, 3, 4, 5]
        assert (rows[5]["committedOffset"], rows[5]["maxOffset"], rows[5]["lag"]) == (0, 0, 0)


def test_lmq_offsets_and_backup(tmp_path):
    root = config_store(tmp_path)
    (root / "config" / "lmqConsumerOffset.json").write_text(
        BROKER_FILE.read_text().replace("orders@", "%LMQ%orders-lmq@"))
    lmq = [c for c in load_consumer_offsets(root) if c.source == "lmqConsumerOffset.json"]
    assert {c.topic for c in lmq} >= {"%LMQ%orders-lmq"}
    # an empty file falls back to its .bak, as the broker's ConfigManager.load does
    (root / "config" / "consumerOffset.json.bak").write_text(BROKER_FILE.read_text())
    (root / "config" / "consumerOffset.json").write_text("")
    assert {c.group for c in load_consumer_offsets(root) if c.source == "consumerOffset.json.bak"} >= {"g-pull"}


@pytest.mark.parametrize("text, message", [
    ('{"offsetTable":{"orders@g":{0:1,', "unparsable"),
    ('{"offsetTable":[]}', "'offsetTable' object"),
    ('{"offsetTable":{"orders":{0:1}}}', "topic@group"),
    ('{"offsetTable":{"orders@g":{0:"x"}}}', "integer queue ids and offsets"),
])
def test_damaged_files_name_the_file(tmp_path, text, message):
    root = config_store(tmp_path, text)
    with pytest.raises(StoreFormatError, match=message) as e:
        load_consumer_offsets(root)
    assert "consumerOffset.json" in str(e.value)


def test_a_store_without_offsets_has_no_groups(tmp_path):
    root = config_store(tmp_path)
    (root / "config" / "consumerOffset.json").unlink()
    with RocketStore.open(root) as store:
        assert store.consumer_groups() == [] and store.consumer_offsets() == []


# ``data/rocksdb-config-broker-5.3.3/``: ``config/consumerOffsets`` and ``config/topics`` as a real 5.3.3 broker with
# ``storeType=defaultRocksDB`` wrote them (the end-to-end harness: 40 messages to ``orders``, ``g-pull`` pulled and
# committed 36, ``g-push`` consumed them all); ``admin.jsonl``: the broker's ``examineConsumeStats`` answers.
ROCKSDB_CONFIG = DATA / "rocksdb-config-broker-5.3.3"


def test_rocksdb_config_store_reads_what_the_broker_answered(tmp_path):
    root = tmp_path / "store"
    shutil.copytree(ROCKSDB_CONFIG, root / "config", ignore=shutil.ignore_patterns("admin.jsonl"))
    before = sorted((p.name, p.stat().st_size) for p in (root / "config").rglob("*"))
    admin = [json.loads(line) for line in (ROCKSDB_CONFIG / "admin.jsonl").read_text().splitlines()]
    committed = {(c.group, c.topic, c.queue_id): c for c in load_consumer_offsets(root)}
    for o in admin:
        c = committed[(o["group"], o["topic"], o["queueId"])]
        assert (c.offset, c.source) == (o["consumerOffset"], "consumerOffsets")
    table = load_topic_table(root)["topicConfigTable"]
    assert table["orders"]["readQueueNums"] == len({o["queueId"] for o in admin})
    assert sorted((p.name, p.stat().st_size) for p in (root / "config").rglob("*")) == before  # nothing written
