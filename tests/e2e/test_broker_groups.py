"""Consumer groups: two real consumer groups of Apache RocketMQ 5.3.3's Java client consume part of a topic and
commit their offsets; more messages arrive; the broker's admin API (``examineConsumeStats``, what ``mqadmin
consumerProgress`` shows) says where each group stands. Once the broker is stopped, rocketstore's consumer-offset
table (store API, CLI, Spark), its lag and a read starting where a group stands (batch and streaming) agree with
the broker and with what the groups did not consume. Both config stores: the JSON files, and RocksDB
(``storeType=defaultRocksDB``: ``config/consumerOffsets/`` and ``config/topics/`` are RocksDB databases)."""

import json

import pytest
from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore, load_topic_table
from tests.e2e.common import by_index

TOPIC = "orders"
FIRST, MORE = 60, 20
GROUPS = {"e2e-pull-part": ("pull", 12), "e2e-push-part": ("push", 30)}


def broker_progress(harness, group):
    """(topic, queueId) → (consumerOffset, brokerOffset) as the broker's admin API reports them."""
    return {(o["topic"], o["queueId"]): (o["consumerOffset"], o["brokerOffset"]) for o in harness("offsets", group)}


@pytest.mark.parametrize("config_store", ["json", "rocksdb"])
def test_consumer_offsets_match_the_broker(broker_factory, harness, spark, tmp_path, config_store):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, **({"storeType": "defaultRocksDB"} if config_store == "rocksdb" else {}))
    sent = harness("trickle", TOPIC, 0, FIRST, 0)
    received = {}
    for group, (kind, count) in GROUPS.items():
        received[group] = by_index(harness(kind, group, TOPIC, count))
        assert count <= len(received[group]) <= FIRST
    sent += harness("trickle", TOPIC, FIRST, MORE, 0)  # arrives after the groups stopped: lag for both
    progress = {group: broker_progress(harness, group) for group in GROUPS}
    broker.stop()  # persists config/consumerOffset.json
    sent = by_index(sent)
    assert len(sent) == FIRST + MORE

    config = store_dir / "config"
    if config_store == "rocksdb":  # no JSON tables: the broker keeps them in RocksDB
        assert (config / "consumerOffsets" / "CURRENT").is_file() and (config / "topics" / "CURRENT").is_file()
        assert not (config / "consumerOffset.json").exists() and not (config / "topics.json").exists()
    with RocketStore.open(store_dir) as store:
        assert set(GROUPS) <= set(store.consumer_groups())
        # (a queue a group committed nothing for before it stopped is listed from offset 0 with no source file,
        # as the broker's consumerProgress lists it)
        sources = {r["source"] for r in store.consumer_offsets() if r["source"] is not None}
        assert all(r["committedOffset"] == 0 for r in store.consumer_offsets() if r["source"] is None)
        assert sources == ({"consumerOffsets"} if config_store == "rocksdb" else {"consumerOffset.json"})
        topic_config = load_topic_table(store_dir)["topicConfigTable"][TOPIC]
        assert topic_config["readQueueNums"] == len(store.queue_ids(TOPIC))
        for group in GROUPS:
            rows = {(r["topic"], r["queueId"]): r for r in store.consumer_offsets(group)}
            assert {k for k in progress[group] if k[0] == TOPIC} <= set(rows)
            for key, (consumer_offset, broker_offset) in progress[group].items():
                row = rows.get(key)
                if row is None:  # a queue the group never committed: the broker reports 0
                    assert consumer_offset == 0, (group, key)
                    continue
                assert (row["committedOffset"], row["maxOffset"]) == (consumer_offset, broker_offset), (group, key)
                assert row["lag"] == max(broker_offset - consumer_offset, 0)
            lag = sum(r["lag"] for k, r in rows.items() if k[0] == TOPIC)
            assert lag == sum(b - c for (t, _), (c, b) in progress[group].items() if t == TOPIC)
            assert lag > 0
            # the next message of each queue is the one the producer's send put at the committed offset, and the
            # group received every message before it (delivery is at least once: a message at or past the committed
            # offset may have been received too, its offset not yet committed when the consumer stopped)
            for (topic, qid), row in rows.items():
                if topic == TOPIC and row["lag"]:
                    first = next(store.read_queue(TOPIC, qid, row["committedOffset"], row["committedOffset"] + 1,
                                                  columns=["storeTimestamp", "properties"])).to_pylist()[0]
                    assert int(first["storeTimestamp"].timestamp() * 1000) == row["nextMessageStoreTime"]
                    placed = sent[dict(first["properties"])["index"]]
                    assert (placed["queueId"], placed["queueOffset"]) == (qid, row["committedOffset"])
                    before = {i for i, s in sent.items()
                              if s["queueId"] == qid and s["queueOffset"] < placed["queueOffset"]}
                    assert before <= set(received[group]), (group, qid, sorted(before - set(received[group])))
            starting = store.group_starting_offsets(group)
            assert {int(q): o for q, o in starting[TOPIC].items()} == \
                   {k[1]: r["committedOffset"] for k, r in rows.items() if k[0] == TOPIC}

    group = "e2e-pull-part"
    committed = {k[1]: c for k, (c, _) in progress[group].items() if k[0] == TOPIC}
    unconsumed = {i for i, s in sent.items() if s["queueOffset"] >= committed.get(s["queueId"], 0)}
    assert not unconsumed & received[group].keys()

    # the CLI: `groups --json` and `lag --group`
    runner = CliRunner()
    out = runner.invoke(app, ["groups", str(store_dir), "--group", group, "--json"])
    assert out.exit_code == 0, out.output
    cli_rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {r["group"] for r in cli_rows} == {group} and any(r["topic"] == TOPIC for r in cli_rows)
    for r in cli_rows:
        if r["topic"] == TOPIC:
            assert (r["committedOffset"], r["maxOffset"]) == progress[group][(TOPIC, r["queueId"])]
    out = runner.invoke(app, ["lag", str(store_dir), "--group", group])
    assert out.exit_code == 0, out.output
    assert f"total lag: {sum(r['lag'] for r in cli_rows):,}" in out.stdout

    # Spark: the table, and a batch read starting where the group stands
    table = (spark.read.format("rocketstore").option("table", "consumerOffsets").load(str(store_dir))
             .where(f"`group` = '{group}'").collect())
    assert {(r.topic, r.queueId): (r.committedOffset, r.maxOffset, r.lag) for r in table} == \
           {(r["topic"], r["queueId"]): (r["committedOffset"], r["maxOffset"], r["lag"]) for r in cli_rows}
    df = (spark.read.format("rocketstore").option("topics", TOPIC).option("startingGroup", group)
          .load(str(store_dir)))
    assert {r.properties["index"] for r in df.select("properties").collect()} == unconsumed

    # a stream starting where the group stands
    out_dir = tmp_path / "stream-out"
    query = (spark.readStream.format("rocketstore").option("topics", TOPIC).option("startingGroup", group)
             .load(str(store_dir)).select("properties")
             .writeStream.format("json").option("path", str(out_dir))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    streamed = [json.loads(line)["properties"]["index"] for f in out_dir.glob("*.json")
                for line in f.read_text().splitlines()]
    assert sorted(streamed) == sorted(unconsumed)
