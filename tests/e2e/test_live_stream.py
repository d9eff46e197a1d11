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
SEEDS = 5


def output_rows(out):
    """Rows of the finished part files (Spark writes a batch's files in place: one being written is skipped)."""
    rows = []
    for path in sorted(out.glob("*.parquet")):
        try:
            rows += pq.read_table(path).to_pylist()
        except (OSError, ValueError):  # pyarrow's ArrowInvalid: a file still being written
            pass
    return rows


def test_stream_tails_live_broker_store_exactly_once(namesrv, broker_factory, harness, spark, tmp_path):
    store_dir, out, sent_log = tmp_path / "store", tmp_path / "out", tmp_path / "trickle.jsonl"
    broker_factory(store_dir)
    seeds = harness("trickle", TOPIC, 0, SEEDS, 0)  # the topic exists before the query starts
    producer = None
    try:
        query = (spark.readStream.format("rocketstore").option("topics", TOPIC)
                 .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "40")
                 .load(str(store_dir)).select("topic", "queueId", "queueOffset", "commitLogOffset", "body",
                                              "properties")
                 .writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="1 second").start())
        try:
            deadline = time.monotonic() + 180
            while len(output_rows(out)) < SEEDS:  # the query runs: now the producer starts sending
                assert query.isActive and time.monotonic() < deadline, query.exception()
                time.sleep(0.5)
            with open(sent_log, "w") as log, open(tmp_path / "trickle.err", "w") as err:
                producer = subprocess.Popen(jvm("org.rocketstore.e2e.Harness",
                                                ["trickle", namesrv.addr, TOPIC, SEEDS, MESSAGES - SEEDS, 150],
                                                tmp_path / "trickle", heap="-Xmx256m"), stdout=log, stderr=err)
            # the most the query had written while the producer was still sending: it tails as messages arrive
            # (a fast query may have caught up with every message by the time the producer exits)
            rows_while_sending, deadline = 0, time.monotonic() + 300
            while producer.poll() is None:
                assert time.monotonic() < deadline, "the producer did not finish in 300 s"
                rows_while_sending = max(rows_while_sending, len(output_rows(out)))
                time.sleep(0.5)
            assert producer.returncode == 0, (tmp_path / "trickle.err").read_text()
            sent = by_index(seeds + [json.loads(line) for line in sent_log.read_text().splitlines()
                                     if line.startswith("{")])
            assert len(sent) == MESSAGES
            deadline = time.monotonic() + 120
            while True:
                time.sleep(2)
                query.processAllAvailable()
                rows = output_rows(out)
                if len(rows) >= MESSAGES or time.monotonic() > deadline:
                    break
        finally:
            query.stop()
    finally:
        if producer is not None and producer.poll() is None:
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
    assert rows_while_sending > SEEDS, f"the query wrote nothing new while the producer sent ({rows_while_sending})"
