"""The broker's topic table (``config/topics.json``): read for queue counts, extended by committed jobs."""

import json

import pyarrow as pa
import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.topic_config import existing_queue_counts, register_topics, topics_path
from rocketstore_spark.store.write.publish import new_job_id, publish_staged
from rocketstore_spark.store.write.staging import stage
from tests.store.write.test_publish import run_publish, stage_job
from tests.store.write.test_writer import SMALL, messages, tree_digest

BROKER_TABLE = {  # as a broker writes it (fastjson, pretty): a topic with 16 queues, 3 of them with messages
    "dataVersion": {"counter": 41, "stateVersion": 2, "timestamp": 1717200000000},
    "topicConfigTable": {
        "orders": {"topicName": "orders", "readQueueNums": 16, "writeQueueNums": 16, "perm": 6,
                   "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}},
        "SCHEDULE_TOPIC_XXXX": {"topicName": "SCHEDULE_TOPIC_XXXX", "readQueueNums": 18, "writeQueueNums": 18,
                                "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False},
    },
}


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(messages(30))  # orders, queues 0..2
    return root


def table(root):
    return json.loads(topics_path(root).read_text())


def test_the_store_writer_lists_the_topics_it_wrote(store):
    entry = table(store)["topicConfigTable"]["orders"]
    assert entry == {"topicName": "orders", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
                     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}}
    assert table(store)["dataVersion"]["counter"] == 1


def test_queue_counts_come_from_the_table_where_queues_have_no_directory_yet(store):
    topics_path(store).write_text(json.dumps(BROKER_TABLE, indent="\t"))
    assert existing_queue_counts(store)["orders"] == 16  # directories alone would say 3
    assert existing_queue_counts(store)["SCHEDULE_TOPIC_XXXX"] == 18


def test_a_committed_job_adds_its_new_topics_and_keeps_every_existing_entry(store):
    topics_path(store).write_text(json.dumps(BROKER_TABLE, indent="\t"))
    before = topics_path(store).read_text()
    job = new_job_id()
    stems = stage(store, job, "p", [messages(10, start=100), messages(5, topic="fresh", start=200),
                                    messages(3, topic="%RETRY%cg", start=300)], store_host="10.0.0.1:10911")
    result = publish_staged(store, job, stems, new_topic_queues={"fresh": 4, "%RETRY%cg": 1})
    assert result["topics_added"] == ["fresh"]  # retry, DLQ and system topics are the broker's to configure
    after = table(store)
    assert after["topicConfigTable"]["orders"] == BROKER_TABLE["topicConfigTable"]["orders"]
    assert after["topicConfigTable"]["fresh"]["readQueueNums"] == after["topicConfigTable"]["fresh"][
        "writeQueueNums"] == 4
    assert "%RETRY%cg" not in after["topicConfigTable"]
    assert after["dataVersion"]["counter"] == 42 and after["dataVersion"]["stateVersion"] == 2
    assert (store / "config" / "topics.json.bak").read_text() == before  # MixAll.string2File keeps the old one
    job = new_job_id()
    stems = stage(store, job, "p", [messages(5, topic="fresh", start=400)], store_host="10.0.0.1:10911")
    assert publish_staged(store, job, stems)["topics_added"] == []  # already listed: the file is not rewritten
    assert table(store)["dataVersion"]["counter"] == 42


def test_a_job_rolled_back_leaves_the_table_alone_and_one_killed_after_its_commit_point_gets_its_topics(store):
    before = tree_digest(store)
    job = new_job_id()
    assert run_publish(store, job, stage_job(store, job), "before-done").returncode == -9
    RocketStore.open_writer(store).close()
    assert tree_digest(store) == before and "fresh" not in table(store)["topicConfigTable"]
    job = new_job_id()
    assert run_publish(store, job, stage_job(store, job), "after-done").returncode == -9
    assert "fresh" not in table(store)["topicConfigTable"]  # killed between the commit point and the table
    with RocketStore.open_writer(store) as w:
        assert any("added topics fresh" in a for a in w.recovery_actions)
    assert table(store)["topicConfigTable"]["fresh"]["writeQueueNums"] == 4


def test_an_unreadable_table_stops_a_writer_before_it_writes(store):
    topics_path(store).write_text("{not json")
    with pytest.raises(StoreFormatError, match="topics.json"):
        existing_queue_counts(store)
    with pytest.raises(StoreFormatError, match="topics.json"):
        RocketStore.open_writer(store)
    topics_path(store).write_text(json.dumps({"topicConfigTable": {"orders": {"readQueueNums": "many"}}}))
    with pytest.raises(StoreFormatError, match="'orders': expected integer readQueueNums"):
        existing_queue_counts(store)


def test_an_empty_table_falls_back_to_the_backup_like_the_broker(store):
    topics_path(store).with_name("topics.json.bak").write_text(json.dumps(BROKER_TABLE))
    topics_path(store).write_text("")
    assert existing_queue_counts(store)["orders"] == 16
    assert register_topics(store, {"orders": 3, "other": 2}) == ["other"]
    assert set(table(store)["topicConfigTable"]) == {"orders", "SCHEDULE_TOPIC_XXXX", "other"}


def test_writing_only_existing_topics_of_a_store_without_a_table_creates_one(tmp_path):
    root = tmp_path / "store"
    with RocketStore.open_writer(root, **SMALL) as w:
        w.append(pa.table({"topic": ["a", "b"], "queueId": [0, 5], "body": [b"x", b"y"]}))
    assert {t: c["writeQueueNums"] for t, c in table(root)["topicConfigTable"].items()} == {"a": 1, "b": 6}
