"""The special topics' views on stores a real Apache RocketMQ 5.3.3 broker wrote (``data/``, captured as the e2e
tests ``tests/e2e/test_broker_special_topics.py`` run it): the harness's JSON lines next to each store are what
the broker's Java client sent and what the broker asked it.

* ``special-topics-broker-5.3.3``: nine transactional messages answering COMMIT, ROLLBACK or UNKNOW in turn (the
  broker checked the UNKNOW ones 21 times, ``transactionCheckMax=1000``), and eight timer messages, four due
  after 2 s (delivered before the broker stopped) and four after an hour (``timerRollWindowSlot=6``: rolled
  every few seconds);
* ``transactions-discarded-broker-5.3.3``: a broker whose checks (``transactionCheckMax`` 15) ran out for every
  half it re-put: all were moved to ``TRANS_CHECK_MAX_TIME_TOPIC``, none is pending any more.
"""

import json
import tarfile
from pathlib import Path

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.store import COMPACTED_FIELDS, MESSAGE_TRACE_FIELDS, TIMER_MESSAGE_FIELDS, RocketStore
from tests.e2e.common import sha256

DATA = Path(__file__).parent / "data"


def unpack(tmp_path, name):
    with tarfile.open(DATA / f"{name}.tar.xz") as tar:
        tar.extractall(tmp_path / name, filter="data")
    lines = [json.loads(line) for line in (DATA / f"{name}.harness.jsonl").read_text().splitlines() if line]
    return tmp_path / name, lines


@pytest.fixture
def special(tmp_path):
    return unpack(tmp_path, "special-topics-broker-5.3.3")


def test_pending_transactions_are_the_unknown_ones(special):
    root, lines = special
    sent = {line["msgId"]: line for line in lines if line["event"] == "sent" and line["kind"].startswith("tx-")}
    checked = [line for line in lines if line["event"] == "checked"]
    unknown = {i for i, s in sent.items() if s["kind"] == "tx-unknown"}
    assert len(sent) == 9 and len(unknown) == 3
    # the broker checked exactly the transactions its op records leave unresolved
    assert {c["transactionId"] for c in checked} == unknown
    with RocketStore.open(root) as store:
        rows = store.pending_transactions()
        assert {r["transactionId"] for r in rows} == unknown
        for r in rows:
            s = sent[r["transactionId"]]
            assert (r["topic"], r["queueId"]) == (s["topic"], s["queueId"])
            assert r["producerGroup"] == "e2e-tx-pending" == s["properties"]["PGROUP"]
            assert r["uniqKey"] == r["transactionId"] and r["tags"] == s["tags"] and r["keys"] == s["keys"]
            assert r["properties"]["index"] == s["properties"]["index"]
            # checked at least as often as the client was asked (the broker may check once more before it stops)
            asked = max(int(c["checkTimes"]) for c in checked if c["transactionId"] == r["transactionId"])
            assert r["checkTimes"] >= asked >= 1
            assert r["bornTimestamp"] <= r["storeTimestamp"]
            assert r["halfOffset"] >= 9  # the first copies (offsets 0..8) were written anew at each check
            raw = next(store.read_queue("RMQ_SYS_TRANS_HALF_TOPIC", r["halfQueueId"], r["halfOffset"],
                                        r["halfOffset"] + 1, columns=["commitLogOffset", "body"])).to_pylist()[0]
            assert (raw["commitLogOffset"], raw["body"]) == (r["commitLogOffset"], r["body"])
        assert store.pending_transactions("tx-orders") == rows and store.pending_transactions("other") == []
        # the committed ones are in their topic, the others are not
        committed = {s["properties"]["index"] for s in sent.values() if s["kind"] == "tx-commit"}
        in_topic = {dict(row["properties"])["index"] for q in store.queue_ids("tx-orders")
                    for b in store.read_queue("tx-orders", q, columns=["properties"]) for row in b.to_pylist()}
        assert in_topic == committed


def test_transactions_the_broker_gave_up_on_are_not_pending(tmp_path):
    root, lines = unpack(tmp_path, "transactions-discarded-broker-5.3.3")
    with RocketStore.open(root) as store:
        assert store.pending_transactions() == []
        discarded = {dict(row["properties"])["UNIQ_KEY"] for q in store.queue_ids("TRANS_CHECK_MAX_TIME_TOPIC")
                     for b in store.read_queue("TRANS_CHECK_MAX_TIME_TOPIC", q, columns=["properties"])
                     for row in b.to_pylist()}
    checked = {c["transactionId"] for c in lines if c["event"] == "checked"}
    assert discarded and discarded == checked


def test_timer_messages_delivered_rolled_pending(special):
    root, lines = special
    sent = {line["msgId"]: line for line in lines if line["event"] == "sent" and line["kind"] == "timer"}
    near = {i for i, s in sent.items() if s["properties"]["delayMs"] == "2000"}
    far = set(sent) - near
    assert len(near) == len(far) == 4
    with RocketStore.open(root) as store:
        rows = store.timer_messages()
        assert all(tuple(r) == TIMER_MESSAGE_FIELDS for r in rows)
        by_state = {}
        for r in rows:
            by_state.setdefault(r["state"], []).append(r)
            s = sent[r["uniqKey"]]
            assert (r["topic"], r["queueId"]) == ("timed", s["queueId"])
            requested = int(s["properties"]["TIMER_DELIVER_MS"])
            assert r["requestedDeliverTime"] == requested and r["deliverTime"] == requested // 1000 * 1000
            assert r["properties"]["index"] == s["properties"]["index"]
        assert {r["uniqKey"] for r in by_state["delivered"]} == near
        assert {r["uniqKey"] for r in by_state["pending"]} == far
        for r in by_state["pending"]:  # the latest entry of each far message; every earlier one was rolled
            rolled = sorted(x["rollTimes"] for x in by_state["rolled"] if x["uniqKey"] == r["uniqKey"])
            assert rolled == list(range(r["rollTimes"])) and r["rollTimes"] >= 1
        assert set(by_state) == {"delivered", "rolled", "pending"}
        # what was delivered is in the real topic, with the wheel's dequeue time
        delivered = {}
        for q in store.queue_ids("timed"):
            for b in store.read_queue("timed", q, columns=["uniqKey", "queueId", "properties"]):
                for row in b.to_pylist():
                    delivered[row["uniqKey"]] = (row["queueId"], dict(row["properties"]))
        assert set(delivered) == near
        for key, (qid, props) in delivered.items():
            assert qid == sent[key]["queueId"] and int(props["TIMER_DEQUEUE_MS"]) >= int(props["TIMER_OUT_MS"])
        assert store.timer_messages(state="pending") == by_state["pending"]
        assert store.timer_messages("nothing") == []


def test_message_traces_are_what_the_traced_clients_did(tmp_path):
    root, lines = unpack(tmp_path, "traces-broker-5.3.3")
    sent = {line["msgId"]: line for line in lines if line["event"] == "sent"}
    received = {line["msgId"]: line for line in lines if line["event"] == "received"}
    assert len(sent) == 6 and set(received) == set(sent)
    with RocketStore.open(root) as store:
        rows = store.message_traces()
        assert all(tuple(r) == MESSAGE_TRACE_FIELDS for r in rows)
        pubs = {r["msgId"]: r for r in rows if r["traceType"] == "Pub"}
        assert set(pubs) == set(sent)
        for key, r in pubs.items():
            s = sent[key]
            assert (r["topic"], r["groupName"], r["tags"], r["keys"].split(), r["offsetMsgId"], r["success"]) == \
                   ("traced-orders", "e2e-traced", s["tags"], s["keys"], s["offsetMsgId"], True)
            assert r["bodyLength"] == s["bodyLength"] and r["msgType"] == "Normal_Msg"
        for kind in ("SubBefore", "SubAfter"):
            subs = [r for r in rows if r["traceType"] == kind]
            assert {r["msgId"] for r in subs} == set(sent) and len(subs) == len(sent)
            assert {r["groupName"] for r in subs} == {"e2e-traced-consumer"}
        after = {r["requestId"] for r in rows if r["traceType"] == "SubAfter"}
        assert after == {r["requestId"] for r in rows if r["traceType"] == "SubBefore"}
        assert all(r["success"] and r["consumeResult"] == "SUCCESS" for r in rows if r["traceType"] == "SubAfter")
        one = next(iter(sent))
        assert {r["traceType"] for r in store.message_traces(msg_id=one)} == {"Pub", "SubBefore", "SubAfter"}
        assert store.message_traces(trace_type="Pub") == list(pubs.values())
        assert store.message_traces("no-such-topic") == []
        # the trace messages are indexed by the traced msgIds and keys: the records lie where the rows say
        for r in rows:
            raw = store.look_message_by_offset(r["traceCommitLogOffset"], columns=["topic", "queueOffset"])
            assert (raw["topic"], raw["queueOffset"]) == ("RMQ_SYS_TRACE_TOPIC", r["traceQueueOffset"])


def test_messages_that_are_not_trace_records_give_no_rows(special):
    root, _ = special
    with RocketStore.open(root) as store:  # the client's decoder skips what has no trace type first
        assert store.message_traces("tx-orders") == []


def test_a_damaged_trace_record_is_an_error_naming_its_file_and_offset(tmp_path):
    import pyarrow as pa

    from rocketstore_spark.errors import StoreFormatError

    good = "Recall\u00011000\u0001r\u0001g\u0001t\u0001id\u0001true\u0002"
    bad = "SubBefore\u0001soon\u0001r\u0001g\u0001req\u0001id\u00010\u0001k\u0002"
    root = tmp_path / "store"
    with RocketStore.open_writer(root, commit_log_file_size=1 << 20, consume_queue_file_size=6000) as w:
        w.append(pa.table({"topic": ["RMQ_SYS_TRACE_TOPIC"] * 2, "queueId": [0, 0],
                           "body": [good.encode(), bad.encode()]}))
    with RocketStore.open(root) as store:
        second = next(store.read_queue("RMQ_SYS_TRACE_TOPIC", 0, 1, 2, columns=["commitLogOffset"])).to_pylist()
        with pytest.raises(StoreFormatError, match="queue offset 1 of RMQ_SYS_TRACE_TOPIC/0.*timeStamp is not a "
                                                   "number: 'soon'.*customizedTraceTopic") as e:
            store.message_traces()
    assert e.value.path.endswith("00000000000000000000") and e.value.offset == second[0]["commitLogOffset"]


def latest_received(lines) -> dict:
    """(queueId, KEYS) → the last message of the key a consumer of the compaction topic received, as the broker
    served the topic (from its compaction log)."""
    latest = {}
    for line in sorted((x for x in lines if x["event"] == "received"), key=lambda x: x["queueOffset"]):
        latest[(line["queueId"], line["properties"]["KEYS"])] = line
    return latest


def test_compacted_values_are_the_latest_a_consumer_received(tmp_path):
    root, lines = unpack(tmp_path, "compaction-broker-5.3.3")
    sent = [line for line in lines if line["event"] == "sent"]
    latest = latest_received(lines)
    assert len(sent) == 40 and len(latest) == 10  # five keys in each of two queues
    with RocketStore.open(root) as store:
        assert store.compaction_topics() == ["compacted-prices"]
        rows = store.compacted_values()
        assert store.compacted_values("compacted-prices") == rows
        with pytest.raises(InvalidArgumentError, match="'orders' is not a compaction topic.*compacted-prices"):
            store.compacted_values("orders")
    assert all(tuple(r) == COMPACTED_FIELDS for r in rows)
    assert {(r["queueId"], r["key"]): (r["queueOffset"], r["uniqKey"]) for r in rows} == \
           {k: (v["queueOffset"], v["msgId"]) for k, v in latest.items()}
    for r in rows:
        got = latest[(r["queueId"], r["key"])]
        assert r["body"] == b"value-" + got["properties"]["index"].encode() and r["versions"] == 4
        assert sha256(r["body"]) == got["bodySha256"]


def test_a_message_without_a_body_deletes_its_key(tmp_path):
    import pyarrow as pa

    from rocketstore_spark.store import register_topics

    root = tmp_path / "store"
    with RocketStore.open_writer(root, commit_log_file_size=1 << 20, consume_queue_file_size=6000) as w:
        w.append(pa.table({"topic": ["prices"] * 4, "queueId": [0] * 4, "keys": [["a"], ["b"], ["a"], []],
                           "body": [b"1", b"2", b"", b"no key"]}))
    register_topics(root, {"prices": 1})
    topics = root / "config" / "topics.json"
    table = json.loads(topics.read_text())
    table["topicConfigTable"]["prices"]["attributes"] = {"+cleanup.policy": "COMPACTION"}
    topics.write_text(json.dumps(table))
    with RocketStore.open(root) as store:
        rows = store.compacted_values()
    assert [(r["key"], r["body"], r["versions"]) for r in rows] == [("b", b"2", 1)]


def unpack_history(tmp_path):
    """The compaction-history store (see ``tests/store/files/test_compaction_log.py``) and its harness lines."""
    name = "compaction-history-broker-5.3.3"
    data = Path(__file__).parents[1] / "files" / "data"
    with tarfile.open(data / f"{name}.tar.xz") as tar:
        tar.extractall(tmp_path / name, filter="data")
    return tmp_path / name, [json.loads(line) for line in (data / f"{name}.harness.jsonl").read_text().splitlines()]


def consumer_end_state(lines) -> dict:
    """(queueId, KEYS) → the last message a consumer received of the key, for the keys not deleted."""
    latest = latest_received(lines)
    return {k: v for k, v in latest.items() if v["bodyLength"]}


def keys_in_commit_log(store, topic) -> set:
    return {dict(r["properties"])["KEYS"] for q in store.queue_ids(topic)
            for batch in store.read_queue(topic, q, columns=["properties"]) for r in batch.to_pylist()}


def test_compacted_values_include_keys_only_the_compaction_log_holds(tmp_path):
    root, lines = unpack_history(tmp_path)
    expected = consumer_end_state(lines)
    with RocketStore.open(root) as store:
        rows = store.compacted_values("compacted-history")
        positions = store.compaction_positions()
        in_commit_log = keys_in_commit_log(store, "compacted-history")
    old = {k for _, k in expected if k.startswith("old-")}
    assert old == {"old-1", "old-2", "old-3", "old-4", "old-5"} and not old & in_commit_log
    assert {(r["queueId"], r["key"]): (r["queueOffset"], r["uniqKey"], sha256(r["body"])) for r in rows} == \
           {k: (v["queueOffset"], v["msgId"], v["bodySha256"]) for k, v in expected.items()}
    assert {r["source"] for r in rows} == {"compactionLog"}
    assert set(positions) == {("compacted-history", 0), ("compacted-history", 1)}
    by_key = {r["key"]: r for r in rows}
    assert all(by_key[k]["versions"] == 1 for k in old)  # compacted: one message per key left


def test_messages_the_compaction_log_never_received_come_from_the_commit_log(tmp_path):
    import pyarrow as pa

    root, lines = unpack_history(tmp_path)
    expected = consumer_end_state(lines)
    with RocketStore.open(root) as store:
        end = store.max_offset("compacted-history", 0)
    with RocketStore.open_writer(root) as w:  # rocketstore appends to the commit log only
        w.append(pa.table({"topic": ["compacted-history"] * 3, "queueId": [0] * 3,
                           "keys": [["f2"], ["new"], ["old-2"]], "body": [b"f2 again", b"fresh", b""]}))
    with RocketStore.open(root) as store:
        rows = {r["key"]: r for r in store.compacted_values("compacted-history") if r["queueId"] == 0}
    assert (rows["f2"]["source"], rows["f2"]["queueOffset"], rows["f2"]["body"]) == ("commitLog", end, b"f2 again")
    assert (rows["new"]["source"], rows["new"]["queueOffset"], rows["new"]["versions"]) == ("commitLog", end + 1, 1)
    assert "old-2" not in rows  # deleted by the bodyless message
    served = [x for x in lines if x["event"] == "received" and (x["queueId"], x["properties"]["KEYS"]) == (0, "f2")]
    assert rows["f2"]["versions"] == len(served) + 1 and (0, "f2") in expected
    assert rows["old-4"]["source"] == "compactionLog"
