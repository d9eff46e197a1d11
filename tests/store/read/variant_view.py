"""Comparing a storage-variant store read by rocketstore with what the real store answered (``rocketmq-view/``)
and with ``manifest.jsonl``: shared by the per-variant golden tests."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from rocketstore_spark.store import COLUMNS, RAW_COLUMNS, RocketStore
from tests.conftest import sizes_from_args
from tests.store.read.test_golden_queries import real_matches
from tests.store.reference import keys_tokens, sha256

ALL = COLUMNS + RAW_COLUMNS


def load_jsonl(path: Path) -> list:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def load_view(variant_dir: Path) -> dict:
    view = variant_dir / "rocketmq-view"
    return {"messages": load_jsonl(view / "messages.jsonl"), "queues": load_jsonl(view / "queues.jsonl"),
            "queries": load_jsonl(view / "queries.jsonl"), "time_queries": load_jsonl(view / "time_queries.jsonl"),
            "summary": json.loads((view / "summary.json").read_text(encoding="utf-8")),
            "manifest": load_jsonl(variant_dir / "manifest.jsonl")}


def ms(ts) -> int:
    return round(ts.timestamp() * 1000)


def row_as_view(row: dict) -> dict:
    """A rocketstore row in the terms of a ``messages.jsonl`` line (the fields both have)."""
    return {"topic": row["topic"], "queueId": row["queueId"], "cqOffset": row["queueOffset"],
            "commitLogOffset": row["commitLogOffset"], "storeSize": row["storeSize"], "msgId": row["msgId"],
            "uniqKey": row["uniqKey"], "tags": row["tags"], "keys": row["keys"], "properties": dict(row["properties"]),
            "bodySha256": sha256(row["rawBody"]), "bodyLength": len(row["rawBody"]), "bodyCRC": row["bodyCRC"],
            "bornTimestamp": ms(row["bornTimestamp"]), "storeTimestamp": ms(row["storeTimestamp"]),
            "bornHost": row["bornHost"], "storeHost": row["storeHost"], "sysFlag": row["sysFlag"], "flag": row["flag"],
            "reconsumeTimes": row["reconsumeTimes"], "preparedTransactionOffset": row["preparedTransactionOffset"]}


def view_line_expected(line: dict) -> dict:
    """The fields of ``row_as_view`` from a view line (keys split as the column splits them)."""
    out = {k: line[k] for k in ("topic", "queueId", "cqOffset", "commitLogOffset", "storeSize", "msgId", "uniqKey",
                                "tags", "properties", "bodySha256", "bodyLength", "bodyCRC", "bornTimestamp",
                                "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag", "reconsumeTimes",
                                "preparedTransactionOffset")}
    out["keys"] = keys_tokens(line["keys"])
    return out


def view_by_queue(messages: list) -> dict:
    by_queue = defaultdict(list)
    for line in messages:
        by_queue[(line["topic"], line["queueId"])].append(line)
    for lines in by_queue.values():
        lines.sort(key=lambda line: line["cqOffset"])
    return dict(by_queue)


def compare_queue_reads(store, view: dict, fail_on_data_loss: bool = True) -> int:
    """Every queue of the view read with every column: field by field equal to the real store's getMessage
    lines. Returns the number of rows compared. ``fail_on_data_loss=False`` for a store that lost messages."""
    expected = view_by_queue(view["messages"])
    assert sorted(expected) == sorted((q["topic"], q["queueId"]) for q in view["queues"])
    total = 0
    for (topic, qid), lines in expected.items():
        rows = pa.Table.from_batches(list(store.read_queue(topic, qid, columns=ALL,
                                                          fail_on_data_loss=fail_on_data_loss))).to_pylist()
        got = [row_as_view(r) for r in rows]
        want = [view_line_expected(line) for line in lines]
        bad = [(w["cqOffset"], k, g.get(k), w[k]) for g, w in zip(got, want) for k in w if g.get(k) != w[k]]
        assert len(got) == len(want) and not bad, (topic, qid, len(got), len(want), bad[:5])
        total += len(got)
    return total


def compare_offsets(store, view: dict) -> None:
    bad = [(q["topic"], q["queueId"]) for q in view["queues"]
           if (store.min_offset(q["topic"], q["queueId"]), store.max_offset(q["topic"], q["queueId"]))
           != (q["minOffset"], q["maxOffset"])]
    assert not bad, bad[:5]
    assert store.max_phy_offset() == view["summary"]["maxPhyOffset"]
    assert store.min_phy_offset() == view["summary"]["minPhyOffset"]


def compare_scan_with_manifest(store, manifest: list, verify_crc: bool = True) -> None:
    """scanMode=commitlog: every record once, in order, each field equal to the manifest's."""
    rows = [r for b in store.scan_raw(columns=ALL, verify_crc=verify_crc) for r in b.to_pylist()]
    assert [r["commitLogOffset"] for r in rows] == [m["commitLogOffset"] for m in manifest]
    fields = ("topic", "queueId", "queueOffset", "storeSize", "msgId", "uniqKey", "bornHost", "storeHost", "sysFlag",
              "flag", "reconsumeTimes", "bodyCRC", "preparedTransactionOffset", "propertiesString")
    bad = [(m["commitLogOffset"], f) for r, m in zip(rows, manifest) for f in fields if r[f] != m[f]]
    bad += [(m["commitLogOffset"], "properties") for r, m in zip(rows, manifest)
            if dict(r["properties"]) != m["properties"]]
    bad += [(m["commitLogOffset"], "body") for r, m in zip(rows, manifest) if sha256(r["rawBody"]) != m["bodySha256"]]
    bad += [(m["commitLogOffset"], "time") for r, m in zip(rows, manifest)
            if (ms(r["storeTimestamp"]), ms(r["bornTimestamp"])) != (m["storeTimestamp"], m["bornTimestamp"])]
    assert not bad, bad[:5]


def compare_key_queries(store, manifest: list, queries: list) -> None:
    by_offset = {m["commitLogOffset"]: m for m in manifest}
    bad = []
    for q in queries:
        got = store.query_by_key(q["topic"], q["key"], columns=["commitLogOffset"]).column(0).to_pylist()
        if got != real_matches(by_offset, q):
            bad.append((q["topic"], q["key"], got, q["commitLogOffsets"]))
    assert not bad, (len(bad), bad[:3])


def compare_time_queries(store, queries: list) -> None:
    bad = [(q["topic"], q["queueId"], q["timestamp"]) for q in queries
           if (store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "lower"),
               store.offset_by_time(q["topic"], q["queueId"], q["timestamp"], "upper")) != (q["lower"], q["upper"])]
    assert not bad, (len(bad), bad[:5])


def sample_queries(queries: list, every: int) -> list:
    """Every ``every``-th query plus every query of the hot key ``order-42`` (deterministic)."""
    return [q for i, q in enumerate(queries) if i % every == 0 or q["key"] == "order-42"]


def variant_fixtures(name: str, own_store: bool = False):
    """The module fixtures of one variant's golden tests: ``golden`` (the unpacked archive), ``view`` (what the
    real store answered), ``store`` (the golden store opened with its sizes) and ``copy`` (a private copy of the
    store for a test that damages it). Assign them to module names; ``own_store``: the module defines its own
    ``store`` (None is returned in its place)."""

    @pytest.fixture(scope="module")
    def golden(variant_golden):
        return variant_golden(name)

    @pytest.fixture(scope="module")
    def view(golden):
        return load_view(golden)

    def store(golden):
        with RocketStore.open(golden / "store", **sizes_from_args(golden / "sizes.args")) as s:
            yield s

    @pytest.fixture
    def copy(golden, tmp_path):
        target = tmp_path / "store"
        shutil.copytree(golden / "store", target)
        return target

    return golden, view, None if own_store else pytest.fixture(scope="module")(store), copy


REFEREE = Path(__file__).resolve().parents[3].parent / "shared" / "referee" / "run"


def run_vview(store: Path, out: Path, golden: Path, extra: list = ()) -> dict:
    """The real store's answers on ``store`` (a copy: the referee's VView opens it read-write, as a broker
    does) with the golden store's ``sizes.args`` and ``store.args`` (a free port for dledger's PORT) plus
    ``extra`` flags, loaded as :func:`load_view` loads a golden view (no manifest). Fails without the referee."""
    import os
    import socket
    import subprocess
    import sys

    if not REFEREE.is_file() or shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        # the referee is part of the workspace these slow tests run in: its absence is a failure, not a pass
        pytest.fail(f"these tests compare with the real store: expected the referee at {REFEREE} and java on PATH "
                    "(or JAVA_HOME); found none")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    args = (golden / "sizes.args").read_text().split() + \
        [w.replace("PORT", port) for w in (golden / "store.args").read_text().split()] + list(extra)
    env = dict(os.environ, REFEREE_PYTHON=sys.executable)
    r = subprocess.run([str(REFEREE), "VView", "--store", str(store), "--out", str(out)] + args, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return {"messages": load_jsonl(out / "messages.jsonl"), "queues": load_jsonl(out / "queues.jsonl"),
            "queries": load_jsonl(out / "queries.jsonl"), "time_queries": load_jsonl(out / "time_queries.jsonl"),
            "summary": json.loads((out / "summary.json").read_text(encoding="utf-8"))}
