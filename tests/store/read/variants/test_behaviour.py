"""The read behaviour a store's variant composes from its parts: each feature's part answers what it changes,
features combine by the behaviour's fixed rules (no store files needed beyond a root path)."""

from pathlib import Path

import pytest

from rocketstore_spark.store.files.dledger_log import DLedgerLog
from rocketstore_spark.store.files.variant import FEATURES, StoreVariant
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.read.variants.batch_cq import BatchQueues
from rocketstore_spark.store.read.variants.behaviour import choose_behaviour
from rocketstore_spark.store.read.variants.dledger import DLedgerEntries, open_dledger_log
from rocketstore_spark.store.read.variants.lmq import LightMessageQueues
from rocketstore_spark.store.read.variants.plain import PlainStore, open_commit_log
from rocketstore_spark.store.read.variants.prop_crc import PropCrcRecords
from rocketstore_spark.store.read.variants.rocksdb_cq import RocksDBQueues

ROOT = Path("/stores/broker-a")
DATA = ROOT / "dledger-n0" / "data"


def behaviour_of(*features):
    return choose_behaviour(ROOT, StoreVariant(frozenset(features), DATA if "dledger" in features else None))


def test_the_default_store_is_the_plain_part_alone():
    b = behaviour_of()
    assert [type(p) for p in b.parts] == [PlainStore]
    assert b.consume_queue_files and b.planned_runs and not b.is_lmq("%LMQ%room")
    assert b.log_spec.directory == ROOT / L.COMMITLOG_DIR and b.log_spec.cut_last
    assert not b.log_spec.prop_crc_required and b.log_spec.open is open_commit_log
    assert b.dispatched(queues=None) is None
    assert b.redispatch_from(123, abnormal=False, dispatched=None) == 123


def test_every_feature_adds_its_part_after_the_plain_store_in_feature_order():
    b = behaviour_of(*FEATURES)
    assert [type(p) for p in b.parts] == [PlainStore, DLedgerEntries, RocksDBQueues, BatchQueues,
                                          LightMessageQueues, PropCrcRecords]


@pytest.mark.parametrize("features", [("dledger", "prop-crc"), ("prop-crc", "dledger")])
def test_the_commit_log_spec_passes_through_every_part(features):
    spec = behaviour_of(*features).log_spec
    assert (spec.directory, spec.cut_last, spec.prop_crc_required) == (DATA, False, True)
    assert spec.open is open_dledger_log
    assert behaviour_of("prop-crc").log_spec.directory == ROOT / L.COMMITLOG_DIR


def test_a_dledger_log_is_built_by_the_dledger_part(tmp_path):
    data = tmp_path / "dledger-n0" / "data"
    data.mkdir(parents=True)
    b = choose_behaviour(tmp_path, StoreVariant(frozenset({"dledger"}), data))
    from rocketstore_spark.store.files.sizes import StoreSizes
    from rocketstore_spark.store.files.variant import BrokerSettings

    log = b.open_commit_log(StoreSizes(1 << 20, 6000, 5000, 20000), BrokerSettings(), [])
    assert isinstance(log, DLedgerLog) and log.queue.files == []


@pytest.mark.parametrize("features, files, runs", [
    (("lmq",), True, False), (("batch-cq",), True, False), (("rocksdb-cq",), False, False),
    (("batch-cq", "lmq"), True, False), (("prop-crc",), True, True), (("dledger",), True, True),
])
def test_yes_no_answers_hold_only_when_every_part_agrees(features, files, runs):
    b = behaviour_of(*features)
    assert (b.consume_queue_files, b.planned_runs) == (files, runs)


def test_lmq_topics_are_told_apart_only_with_the_lmq_part():
    assert behaviour_of("lmq", "batch-cq").is_lmq("%LMQ%room-1")
    assert not behaviour_of("lmq").is_lmq("TopicTest")
    assert not behaviour_of("batch-cq").is_lmq("%LMQ%room-1")


class Database:
    dispatched = 4096


class Queues:
    rocksdb = Database()


def test_a_rocksdb_store_redispatches_past_its_checkpoint_after_a_normal_exit():
    b = behaviour_of("rocksdb-cq")
    assert b.dispatched(Queues()) == 4096
    assert b.redispatch_from(None, abnormal=False, dispatched=4096) == 4097
    assert b.redispatch_from(100, abnormal=True, dispatched=4096) == 100


def test_a_dledger_log_decides_where_redispatch_starts_also_with_rocksdb_queues():
    b = behaviour_of("dledger", "rocksdb-cq")
    assert b.dispatched(Queues()) == 4096
    assert b.redispatch_from(777, abnormal=False, dispatched=4096) == 777
    assert b.redispatch_from(None, abnormal=False, dispatched=4096) is None


def test_new_queues_come_from_the_last_part_that_makes_one(tmp_path):
    from rocketstore_spark.store.files.batch_consume_queue import BatchConsumeQueue
    from rocketstore_spark.store.files.consume_queue import ConsumeQueue
    from rocketstore_spark.store.files.sizes import StoreSizes
    from rocketstore_spark.store.files.variant import BrokerSettings

    class Store:
        root = tmp_path
        sizes = StoreSizes(1 << 20, 6000, 5000, 20000)
        settings = BrokerSettings.of(batch_consume_queue_file_size=46 * 100)

    plain = choose_behaviour(tmp_path, StoreVariant(frozenset({"lmq"})))
    cq = plain.new_queue(Store(), None, "%LMQ%room", 0, batch=False)
    assert isinstance(cq, ConsumeQueue) and (cq.topic, cq.queue_id) == ("%LMQ%room", 0)
    assert isinstance(plain.new_queue(Store(), None, "Batched", 1, batch=True), BatchConsumeQueue)
