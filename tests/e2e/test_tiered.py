"""A broker with the tiered-storage plugin (rocketmq-tieredstore, POSIX file backend) keeps tiered history next to
its local store: the history is produced here (its files appear under ``tieredStoreFilePath``) and the local
store the plugin wraps still reads exactly what the client sent. rocketstore does not read the tiered segments
themselves (yet); this test gives such reads a real broker's tiered output."""

import time

from rocketstore_spark.store import RocketStore
from tests.e2e.common import by_index, sha256, store_rows

TOPIC = "history"
MESSAGES = 60


def test_tiered_broker_produces_history(broker_factory, harness, tmp_path):
    store_dir, tiered = tmp_path / "store", tmp_path / "tiered"
    broker = broker_factory(store_dir, messageStorePlugIn="org.apache.rocketmq.tieredstore.TieredMessageStore",
                            tieredBackendServiceProvider="org.apache.rocketmq.tieredstore.provider.PosixFileSegment",
                            tieredStoreFilePath=tiered, tieredStoreGroupCommitCount=1,
                            tieredStoreGroupCommitTimeout=1000, commitLogRollingInterval=1)
    sent = by_index(harness("trickle", TOPIC, 0, MESSAGES, 0))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # the plugin uploads asynchronously
        files = [p for p in tiered.rglob("*") if p.is_file() and p.stat().st_size > 0] if tiered.exists() else []
        if sum(p.stat().st_size for p in files) >= sum(s["bodyLength"] for s in sent.values()):
            break
        time.sleep(2)
    broker.stop()
    assert files, f"no tiered files under {tiered}; broker log: {broker.log}"
    with RocketStore.open(store_dir) as store:
        rows = store_rows(store, TOPIC)
    assert rows.keys() == sent.keys()
    for index, row in rows.items():
        assert (row["queueId"], row["queueOffset"]) == (sent[index]["queueId"], sent[index]["queueOffset"])
        assert sha256(row["body"]) == sent[index]["bodySha256"]
