"""A compaction topic whose early keys the commit log no longer holds, against a real Apache RocketMQ 5.3.3
broker.

The broker compacts its compaction log every 2 s here (``compactionScheduleInternal``), in small files
(``compactionMappedFileSize``, ``compactionCqMappedFileSize``: a few messages a file, so it compacts all but the
last file each time), and expires its own commit-log files as soon as they are full (``fileReservedTime=0``,
``deleteWhen`` every hour, checked every second: ``CleanCommitLogService.deleteExpiredFiles`` deletes all but
the last file). The harness sends keys ``old-*`` twice and deletes ``old-0``, then enough rounds of keys ``f*`` to
fill several 128 KiB commit-log files, and deletes ``f0``. Once the broker has expired the files holding the
``old-*`` keys and compacted, a consumer reads the topic from its start as the broker serves it (from its
compaction log); the compacted values read from the stopped broker's files are, per queue and key, the last
message that consumer received, and the keys only the compaction log holds come from it.
"""

import json
import time
from hashlib import sha256

from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore

TOPIC = "compacted-history"
OLD, FILLERS, ROUNDS, BODY = 6, 8, 60, 1000
COMPACTION_BROKER = {
    "compactionScheduleInternal": 2000, "compactionMappedFileSize": 12000, "compactionCqMappedFileSize": 460,
    "mappedFileSizeCommitLog": 128 * 1024, "fileReservedTime": 0, "cleanResourceInterval": 1000,
    "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
}


def wait_for(check, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"the broker did not {what} within {timeout:.0f} s"
        time.sleep(1)


def wait_until_compaction_settles(store_dir, quiet: float = 6, timeout: float = 120):
    """Wait until no compaction file changes for ``quiet`` seconds (three compaction intervals). A 5.3.3 broker
    stopped while it rolls a compaction file keeps a log file without its consume-queue file, and its next start
    fails ``TopicPartitionLog.sanityCheck`` (the broker exits): stop it between compactions."""
    def state():
        return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns)
                      for p in (store_dir / "compaction").rglob("*") if p.is_file())
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while True:
        now = state()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        assert time.monotonic() < deadline, f"the broker's compaction files kept changing for {timeout:.0f} s"
        time.sleep(0.5)


def consumer_end_state(received) -> dict:
    """Per (queueId, key): the last message received, None when it has no body (the key is deleted)."""
    latest: dict = {}
    for line in sorted(received, key=lambda x: (x["queueId"], x["queueOffset"])):
        latest[(line["queueId"], line["properties"]["KEYS"])] = line if line["bodyLength"] else None
    return {k: v for k, v in latest.items() if v is not None}


def test_compacted_values_include_keys_only_the_compaction_log_holds(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, **COMPACTION_BROKER)
    sent = harness("compaction-history", TOPIC, OLD, FILLERS, ROUNDS, BODY)
    commitlog, position = store_dir / "commitlog", store_dir / "compaction" / "position-checkpoint"
    wait_for(lambda: not (commitlog / f"{0:020d}").exists(), "expire its first commit-log file")
    wait_for(lambda: position.exists() and TOPIC in position.read_text(), "compact the topic")
    received = harness("compaction-read", "e2e-compaction-reader", TOPIC)
    wait_until_compaction_settles(store_dir)
    broker.stop()
    # the same store served again by a restarted broker, to a new consumer group
    broker = broker_factory(store_dir, **COMPACTION_BROKER)
    received_again = harness("compaction-read", "e2e-compaction-reader-2", TOPIC)
    broker.stop()
    # kept for inspection (tests/store/files/data/compaction-history-broker-5.3.3 was captured from such a run)
    (tmp_path / "harness.jsonl").write_text("".join(json.dumps(x) + "\n" for x in sent + received_again))

    assert {s["kind"] for s in sent} == {"compacted", "delete"}
    expected = consumer_end_state(received)
    assert consumer_end_state(received_again) == expected
    assert {k for _, k in expected} == {f"old-{i}" for i in range(1, OLD)} | {f"f{i}" for i in range(1, FILLERS)}
    assert min(int(p.name) for p in commitlog.iterdir()) > 0

    with RocketStore.open(store_dir) as store:
        rows = store.compacted_values(TOPIC)
        # the commit log no longer holds the old keys: the broker expired the files they were written to
        in_commit_log = {dict(r["properties"])["KEYS"] for q in store.queue_ids(TOPIC)
                         for batch in store.read_queue(TOPIC, q, columns=["properties"]) for r in batch.to_pylist()}
    assert not {k for k in in_commit_log if k.startswith("old-")}
    got = {(r["queueId"], r["key"]): (r["queueOffset"], r["uniqKey"], sha256(r["body"]).hexdigest())
           for r in rows}
    assert got == {k: (v["queueOffset"], v["msgId"], v["bodySha256"]) for k, v in expected.items()}
    sources = {r["key"]: r["source"] for r in rows}
    assert {sources[f"old-{i}"] for i in range(1, OLD)} == {"compactionLog"}

    table = (spark.read.format("rocketstore").option("table", "compactedValues").option("topics", TOPIC)
             .load(str(store_dir)).collect())
    assert {(t.queueId, t.key): (t.queueOffset, t.source, bytes(t.body)) for t in table} == \
           {(r["queueId"], r["key"]): (r["queueOffset"], r["source"], r["body"]) for r in rows}
    cli = CliRunner().invoke(app, ["compacted", str(store_dir), "--topic", TOPIC, "--json"])
    assert cli.exit_code == 0, cli.output
    assert [(c["queueId"], c["key"], c["source"]) for c in map(json.loads, cli.stdout.splitlines())] == \
           [(r["queueId"], r["key"], r["source"]) for r in rows]
