"""``rocketstore transactions`` and ``rocketstore timers`` on a store a real RocketMQ 5.3.3 broker wrote (see
tests/store/read/test_special_topics.py)."""

import base64
import json

from rocketstore_spark.store import RocketStore
from tests.cli.test_cli import run_here as run
from tests.store.read.test_special_topics import unpack


def json_rows(*args):
    return [json.loads(line) for line in run(*args, "--json").stdout.splitlines()]


def test_transactions(tmp_path):
    root, lines = unpack(tmp_path, "special-topics-broker-5.3.3")
    with RocketStore.open(root) as store:
        api = store.pending_transactions()
    rows = json_rows("transactions", root)
    assert [r["transactionId"] for r in rows] == [a["transactionId"] for a in api]
    assert [base64.b64decode(r["body"]) for r in rows] == [a["body"] for a in api]
    assert json_rows("transactions", root, "--topic", "other") == []
    shown = run("transactions", root).stdout
    assert "3 unresolved transaction(s)" in shown and "e2e-tx-pending" in shown


def test_timers(tmp_path):
    root, _ = unpack(tmp_path, "special-topics-broker-5.3.3")
    pending = json_rows("timers", root, "--state", "pending")
    assert len(pending) == 4 and {r["state"] for r in pending} == {"pending"}
    assert all(r["rollTimes"] >= 1 and r["topic"] == "timed" for r in pending)
    assert "4 delivered, 12 rolled, 4 pending" in run("timers", root).stdout
    bad = run("timers", root, "--state", "late", check=False)
    assert bad.returncode == 2 and "--state must be one of pending, delivered, rolled, cancelled" in bad.stderr


def test_traces(tmp_path):
    root, lines = unpack(tmp_path, "traces-broker-5.3.3")
    rows = json_rows("traces", root)
    assert len(rows) == 18 and {r["traceType"] for r in rows} == {"Pub", "SubBefore", "SubAfter"}
    one = next(line["msgId"] for line in lines if line["event"] == "sent")
    assert sorted(r["traceType"] for r in json_rows("traces", root, "--msg-id", one)) == \
           ["Pub", "SubAfter", "SubBefore"]
    assert len(json_rows("traces", root, "--type", "Pub")) == 6
    assert json_rows("traces", root, "--trace-topic", "traced-orders") == []
    assert "18 trace record(s)" in run("traces", root).stdout
    bad = run("traces", root, "--type", "Publish", check=False)
    assert bad.returncode == 2 and "--type must be one of Pub, Recall" in bad.stderr


def test_compacted(tmp_path):
    root, _ = unpack(tmp_path, "compaction-broker-5.3.3")
    rows = json_rows("compacted", root)
    assert len(rows) == 10 and {r["key"] for r in rows} == {f"k{i}" for i in range(5)}
    assert all(base64.b64decode(r["body"]).startswith(b"value-") for r in rows)
    assert "10 key(s)" in run("compacted", root).stdout
    bad = run("compacted", root, "--topic", "orders", check=False)
    assert bad.returncode == 2 and "not a compaction topic" in bad.stderr
