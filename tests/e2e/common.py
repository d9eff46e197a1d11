"""Comparisons shared by the end-to-end tests: harness JSON lines against rows the store API and Spark read."""

from __future__ import annotations

import hashlib

# set by the consuming client on every message it hands out, never stored
CLIENT_ONLY_PROPERTIES = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
# the client's own properties a broker may rewrite or drop (delay level, transaction markers)
BROKER_REWRITTEN = {"DELAY", "TRAN_MSG", "PGROUP", "REAL_TOPIC", "REAL_QID", "TRAN_PREPARED_QUEUE_OFFSET"}


def by_index(lines):
    """Harness lines keyed by the ``index`` user property the harness gives every message (UNIQ_KEY is not
    unique: a 5.3.3 broker appends the batch's own properties, UNIQ_KEY included, to every message of a batch)."""
    out = {}
    for line in lines:
        index = line["properties"]["index"]
        assert index not in out, f"message {index} seen twice: {out.get(index)} and {line}"
        out[index] = line
    return out


def store_rows(store, topic, columns=None):
    """Every message of ``topic`` through the store API (``read_queue`` of each queue), keyed by ``index``."""
    rows = {}
    for queue_id in store.queue_ids(topic):
        for batch in store.read_queue(topic, queue_id, columns=columns):
            for row in batch.to_pylist():
                row["properties"] = dict(row["properties"] or {})
                assert row["properties"]["index"] not in rows, f"message {row} read twice"
                rows[row["properties"]["index"]] = row
    return rows


def spark_rows(df):
    rows = {}
    for r in df.collect():
        row = r.asDict()
        row["properties"] = dict(row["properties"] or {})
        row["keys"] = list(row["keys"] or [])
        row["body"] = bytes(row["body"])
        assert row["properties"]["index"] not in rows
        rows[row["properties"]["index"]] = row
    return rows


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def assert_row_is_sent(row, sent):
    """What the client sent is what the store holds: topic, keys, tags, body, and every property the client set
    (user properties, KEYS, TAGS, UNIQ_KEY) except the ones the broker rewrites on purpose."""
    uniq = sent["properties"]["index"]
    assert row["topic"] == sent["topic"], uniq
    assert list(row["keys"] or []) == sent["keys"], uniq
    assert row["tags"] == sent["tags"], uniq
    assert sha256(row["body"]) == sent["bodySha256"] and len(row["body"]) == sent["bodyLength"], uniq
    rewritten = BROKER_REWRITTEN | ({"UNIQ_KEY"} if sent["kind"] == "batch" else set())
    wanted = {k: v for k, v in sent["properties"].items() if k not in rewritten}
    assert {k: row["properties"].get(k) for k in wanted} == wanted, uniq


def assert_row_is_received(row, got):
    """What a consumer received is what the store holds, property for property."""
    uniq = got["properties"]["index"]
    assert row["uniqKey"] == got["msgId"], uniq
    assert (row["topic"], row["queueId"], row["queueOffset"]) == (got["topic"], got["queueId"], got["queueOffset"])
    assert row["commitLogOffset"] == got["commitLogOffset"], uniq
    assert list(row["keys"] or []) == got["keys"] and row["tags"] == got["tags"], uniq
    assert sha256(row["body"]) == got["bodySha256"], uniq
    received = {k: v for k, v in got["properties"].items() if k not in CLIENT_ONLY_PROPERTIES}
    assert row["properties"] == received, uniq


def same_rows(a, b, fields=("topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "keys", "tags",
                             "properties", "body")):
    assert a.keys() == b.keys()
    for uniq in a:
        assert {f: a[uniq][f] for f in fields} == {f: b[uniq][f] for f in fields}, uniq
