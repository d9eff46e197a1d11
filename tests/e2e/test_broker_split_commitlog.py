"""A commit log split across disks: a real Apache RocketMQ 5.3.3 broker started with ``storePathCommitLog``
listing two directories (its ``MultiPathMappedFileQueue``) spreads the commit-log files over both, and its root
has no ``commitlog/``. Given the two paths, the store API, the CLI and Spark (batch and streaming) read exactly
what the client sent and what a real consumer received, and key lookups answer what the broker answers."""

import json

from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore
from tests.e2e.common import by_index, same_rows, sha256, spark_rows, store_rows

TOPIC = "spread"
MESSAGES = 600
FILE_SIZE = 32 * 1024  # small commit-log files: the messages fill several, spread over both paths


def test_split_commit_log_reads_as_sent(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    paths = [tmp_path / "disk-b" / "commitlog", tmp_path / "disk-a" / "commitlog"]
    for p in paths:
        p.mkdir(parents=True)
    joined = ",".join(str(p) for p in paths)
    broker = broker_factory(store_dir, storePathCommitLog=joined, mappedFileSizeCommitLog=FILE_SIZE)
    sent = by_index(harness("trickle", TOPIC, 0, MESSAGES, 0))
    received = by_index(harness("push", "e2e-split", TOPIC, MESSAGES))
    by_key = harness("by-key", TOPIC, "key-7")
    broker.stop()

    assert not (store_dir / "commitlog").exists()
    # the broker's placement: file i in the i-th (modulo) of the sorted paths
    files = {p: sorted(f.name for f in p.iterdir()) for p in paths}
    ordered = sorted(paths, key=str)
    assert all(files.values()) and sum(map(len, files.values())) >= 3
    for p, names in files.items():
        assert all(ordered[(int(n) // FILE_SIZE) % len(ordered)] == p for n in names), (p, names)

    with RocketStore.open(store_dir, commit_log_path=joined) as store:
        assert store.recovery.mode == "normal"
        rows = store_rows(store, TOPIC)
        assert rows.keys() == sent.keys() == received.keys()
        for index, row in rows.items():
            assert (row["queueId"], row["queueOffset"], row["msgId"]) == \
                (sent[index]["queueId"], sent[index]["queueOffset"], sent[index]["offsetMsgId"])
            assert sha256(row["body"]) == sent[index]["bodySha256"]
            assert row["commitLogOffset"] == received[index]["commitLogOffset"]
        keyed = store.query_by_key(TOPIC, "key-7").to_pylist()
        assert sorted(r["commitLogOffset"] for r in keyed) == sorted(m["commitLogOffset"] for m in by_key) != []
        looked = store.look_message_by_msg_id(sent["7"]["offsetMsgId"])
        assert looked["commitLogOffset"] == received["7"]["commitLogOffset"]

    # the CLI
    out = CliRunner().invoke(app, ["dump", str(store_dir), "--topic", TOPIC, "--format", "jsonl",
                                   "--commitlog-path", joined])
    assert out.exit_code == 0, out.output
    assert len([line for line in out.stdout.splitlines() if line.startswith("{")]) == MESSAGES
    out = CliRunner().invoke(app, ["verify", str(store_dir), "--commitlog-path", joined])
    assert out.exit_code == 0, out.output

    # Spark: batch (queue and commit-log plans) and a stream
    for mode in ("queue", "commitlog"):
        df = (spark.read.format("rocketstore").option("topics", TOPIC).option("commitLogPath", joined)
              .option("scanMode", mode).load(str(store_dir)))
        same_rows(spark_rows(df), rows)
    out_dir = tmp_path / "stream-out"
    query = (spark.readStream.format("rocketstore").option("topics", TOPIC).option("commitLogPath", joined)
             .option("startingOffsets", "earliest").load(str(store_dir)).select("properties")
             .writeStream.format("json").option("path", str(out_dir))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    streamed = [json.loads(line)["properties"]["index"] for f in out_dir.glob("*.json")
                for line in f.read_text().splitlines()]
    assert sorted(streamed) == sorted(sent)
