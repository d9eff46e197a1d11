"""A streaming query tails the store of a running broker while a real producer sends: every message the client
sent arrives exactly once, with the queue, queue offset and body the broker gave it."""

import json
import subprocess
import time

import pyarrow.parquet as pq

from tests.e2e.common import by_index, sha256
from tests.e2e.services import jvm

TOPIC = "ticks"
MESSAGES = 120


def test_stream_tails_live_broker_store_exactly_once(namesrv, broker_factory, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker_factory(store_dir)
    sent_log = tmp_path / "trickle.jsonl"
    with open(sent_log, "w") as out, open(tmp_path / "trickle.err", "w") as err:
        producer = subprocess.Popen(jvm("org.rocketstore.e2e.Harness",
                                        ["trickle", namesrv.addr, TOPIC, MESSAGES, 200], tmp_path / "trickle",
                                        heap="-Xmx256m"), stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while "{" not in sent_log.read_text():  # the topic exists once the first message is stored
            assert producer.poll() is None and time.monotonic() < deadline, (tmp_path / "trickle.err").read_text()
            time.sleep(0.2)
        query = (spark.readStream.format("rocketstore").option("topics", TOPIC)
                 .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "40")
                 .load(str(store_dir)).select("topic", "queueId", "queueOffset", "commitLogOffset", "body",
                                              "properties")
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="1 second").start())
        try:
            assert producer.wait(300) == 0, (tmp_path / "trickle.err").read_text()
            sent = by_index(json.loads(line) for line in sent_log.read_text().splitlines() if line.startswith("{"))
            assert len(sent) == MESSAGES
            batches_while_sending = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
            deadline = time.monotonic() + 120
            while True:
                time.sleep(2)
                query.processAllAvailable()
                rows = pq.read_table(tmp_path / "out").to_pylist()
                if len(rows) >= MESSAGES or time.monotonic() > deadline:
                    break
        finally:
            query.stop()
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()

    got = {}
    for row in rows:
        props = dict(row["properties"])
        assert props["index"] not in got, f"message {props['index']} read twice"
        got[props["index"]] = row
    assert got.keys() == sent.keys()
    for index, row in got.items():
        assert (row["topic"], row["queueId"], row["queueOffset"]) == (TOPIC, sent[index]["queueId"],
                                                                      sent[index]["queueOffset"])
        assert sha256(row["body"]) == sent[index]["bodySha256"]
    assert batches_while_sending >= 2  # it tailed the store while the producer was still sending
