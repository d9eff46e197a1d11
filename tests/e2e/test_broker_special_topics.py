"""Special topics against a real Apache RocketMQ 5.3.3 broker: unresolved transactions and timer messages.

Transactions: the harness's transactional producer sends nine messages whose local transaction answers COMMIT,
ROLLBACK or UNKNOW in turn, and stays up answering the broker's checks the same way (checks every 2 s here,
``transactionCheckMax`` high enough that nothing is given up). Once the broker is stopped, the pending
transactions (store API, CLI, Spark) are exactly the UNKNOW ones, the ones the broker kept checking; the committed
ones are what a consumer of the real topic receives.

Timer messages: eight messages with a delivery time (``setDeliverTimeMs``), four 2 s ahead and four an hour ahead
(``timerRollWindowSlot=6``: the wheel rolls those every few seconds). A consumer of the real topic receives the
near ones; once the broker is stopped the timer table says those were delivered, the far ones pending after
their rolls, at the delivery time the client asked for.
"""

import json
import time

from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore

TX_TOPIC, TIMER_TOPIC = "tx-orders", "timed"
# checks every 2 s of halves older than 8 s (the op records of commits and rollbacks are batched every 3 s)
TX_BROKER = {"transactionCheckInterval": 2000, "transactionTimeOut": 8000, "transactionCheckMax": 1000}


def cli_json(*args):
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_pending_transactions_are_what_the_broker_keeps_checking(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, **TX_BROKER)
    lines = harness("transactions", TX_TOPIC, 9, 16000)
    received = harness("pull", "e2e-tx-reader", TX_TOPIC, 3)  # the committed ones, as the broker delivers them
    broker.stop()

    sent = {line["transactionId"]: line for line in lines if line["event"] == "sent"}
    checked = [line for line in lines if line["event"] == "checked"]
    unknown = {t for t, s in sent.items() if s["kind"] == "tx-unknown"}
    assert len(sent) == 9 and len(unknown) == 3
    # the broker asked about these again and again; a resolved one is asked about only when its op record came
    # late (the broker batches them), and the check's answer resolves it
    assert unknown <= {c["transactionId"] for c in checked}
    assert max(int(c["checkTimes"]) for c in checked if c["transactionId"] in unknown) >= 2
    assert {r["properties"]["index"] for r in received} <= \
           {s["properties"]["index"] for s in sent.values() if s["kind"] == "tx-commit"}

    with RocketStore.open(store_dir) as store:
        rows = store.pending_transactions()
    assert {r["transactionId"] for r in rows} == unknown
    for r in rows:
        s = sent[r["transactionId"]]
        assert (r["topic"], r["queueId"], r["producerGroup"]) == (TX_TOPIC, s["queueId"], "e2e-tx-pending")
        assert r["properties"]["index"] == s["properties"]["index"] and r["tags"] == s["tags"]
        asked = max(int(c["checkTimes"]) for c in checked if c["transactionId"] == r["transactionId"])
        assert r["checkTimes"] >= asked >= 1

    cli = cli_json("transactions", str(store_dir))
    assert [(c["transactionId"], c["checkTimes"], c["halfOffset"]) for c in cli] == \
           [(r["transactionId"], r["checkTimes"], r["halfOffset"]) for r in rows]
    table = spark.read.format("rocketstore").option("table", "pendingTransactions").load(str(store_dir)).collect()
    assert {(t.transactionId, t.topic, t.queueId, t.checkTimes) for t in table} == \
           {(r["transactionId"], r["topic"], r["queueId"], r["checkTimes"]) for r in rows}
    assert all(t.bornTimestamp is not None and bytes(t.body) for t in table)


def _on_wheel(requested_ms: int, precision_ms: int = 1000) -> int:
    """The time the broker puts a timer message on its wheel (TIMER_OUT_MS): the requested time rounded down to the
    wheel's precision, one tick earlier when it falls exactly on a tick (the broker's putMessage hook)."""
    if requested_ms % precision_ms == 0:
        return requested_ms - precision_ms
    return requested_ms // precision_ms * precision_ms


def test_timer_messages_delivered_and_pending(broker_factory, harness, spark, tmp_path):
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, timerRollWindowSlot=6)
    lines = harness("timers", TIMER_TOPIC, 4, 2000, 3_600_000)
    received = harness("push", "e2e-timer-reader", TIMER_TOPIC, 4)  # the near ones, when the wheel delivers them
    time.sleep(10)  # the far ones roll at least once
    broker.stop()

    sent = {line["msgId"]: line for line in lines}
    near = {k for k, s in sent.items() if s["properties"]["delayMs"] == "2000"}
    assert len(sent) == 8 and len(near) == 4
    assert {r["properties"]["UNIQ_KEY"] for r in received} == near
    for r in received:  # delivered to the queue the producer chose, not before the time it asked for
        s = sent[r["properties"]["UNIQ_KEY"]]
        assert r["queueId"] == s["queueId"]
        assert int(r["properties"]["TIMER_DEQUEUE_MS"]) >= _on_wheel(int(s["properties"]["TIMER_DELIVER_MS"]))

    with RocketStore.open(store_dir) as store:
        rows = store.timer_messages()
    states: dict = {}
    for r in rows:
        states.setdefault(r["state"], set()).add(r["uniqKey"])
        s = sent[r["uniqKey"]]
        assert (r["topic"], r["queueId"]) == (TIMER_TOPIC, s["queueId"])
        assert r["requestedDeliverTime"] == int(s["properties"]["TIMER_DELIVER_MS"])
        assert r["deliverTime"] == _on_wheel(r["requestedDeliverTime"])
    assert states["delivered"] == near and states["pending"] == set(sent) - near
    assert states["rolled"] == set(sent) - near
    for r in rows:
        if r["state"] == "pending":
            assert r["rollTimes"] >= 1 and r["deliverTime"] > time.time() * 1000

    cli = cli_json("timers", str(store_dir), "--state", "pending")
    assert {(c["uniqKey"], c["rollTimes"]) for c in cli} == \
           {(r["uniqKey"], r["rollTimes"]) for r in rows if r["state"] == "pending"}
    table = (spark.read.format("rocketstore").option("table", "timerMessages").load(str(store_dir))
             .where("state = 'delivered'").collect())
    assert {t.uniqKey for t in table} == near
    assert all(t.topic == TIMER_TOPIC and t.deliverTime is not None for t in table)


def test_message_traces_are_what_the_traced_clients_did(broker_factory, harness, spark, tmp_path):
    """A producer and a push consumer with message trace on: the trace table holds one Pub record per message
    sent (as the producer's send result says) and a SubBefore and SubAfter per message consumed (as the consumer
    received it), read back after the broker stopped."""
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, traceTopicEnable="true")
    lines = harness("traced", "traced-orders", 6)
    broker.stop()
    sent = {line["msgId"]: line for line in lines if line["event"] == "sent"}
    received = {line["msgId"]: line for line in lines if line["event"] == "received"}
    assert len(sent) == 6 and set(received) == set(sent)

    with RocketStore.open(store_dir) as store:
        rows = store.message_traces()
    pubs = {r["msgId"]: r for r in rows if r["traceType"] == "Pub"}
    assert set(pubs) == set(sent)
    for key, r in pubs.items():
        assert (r["topic"], r["offsetMsgId"], r["tags"], r["success"]) == \
               ("traced-orders", sent[key]["offsetMsgId"], sent[key]["tags"], True)
    for kind in ("SubBefore", "SubAfter"):
        assert sorted(r["msgId"] for r in rows if r["traceType"] == kind) == sorted(received)

    one = next(iter(sent))
    cli = cli_json("traces", str(store_dir), "--msg-id", one)
    assert sorted(c["traceType"] for c in cli) == ["Pub", "SubAfter", "SubBefore"]
    table = (spark.read.format("rocketstore").option("table", "messageTraces").option("topics", "traced-orders")
             .load(str(store_dir)))
    assert table.count() == len(rows) == 18
    assert {r.msgId for r in table.where("traceType = 'SubAfter' and success").collect()} == set(received)


def test_compacted_values_are_what_a_consumer_ends_up_with(broker_factory, harness, spark, tmp_path):
    """A topic created with cleanup.policy=COMPACTION through the admin API, forty messages over five keys; a
    consumer reads it as the broker serves a compaction topic (from its compaction log, compacted every 2 s
    here). The compacted values are, per queue and key, the last message the consumer received."""
    store_dir = tmp_path / "store"
    broker = broker_factory(store_dir, compactionScheduleInternal=2000)
    lines = harness("compacted", "compacted-prices", 40, 5)
    broker.stop()
    latest = {}
    for line in sorted((x for x in lines if x["event"] == "received"), key=lambda x: x["queueOffset"]):
        latest[(line["queueId"], line["properties"]["KEYS"])] = line
    assert {k for _, k in latest} == {f"k{i}" for i in range(5)}
    assert (store_dir / "compaction" / "compactionLog" / "compacted-prices").is_dir()

    with RocketStore.open(store_dir) as store:
        assert store.compaction_topics() == ["compacted-prices"]
        rows = store.compacted_values()
    assert {(r["queueId"], r["key"]): (r["queueOffset"], r["uniqKey"]) for r in rows} == \
           {k: (v["queueOffset"], v["msgId"]) for k, v in latest.items()}
    cli = cli_json("compacted", str(store_dir), "--topic", "compacted-prices")
    assert [(c["queueId"], c["key"], c["queueOffset"]) for c in cli] == \
           [(r["queueId"], r["key"], r["queueOffset"]) for r in rows]
    table = spark.read.format("rocketstore").option("table", "compactedValues").load(str(store_dir)).collect()
    assert {(t.queueId, t.key): bytes(t.body) for t in table} == {(r["queueId"], r["key"]): r["body"] for r in rows}
