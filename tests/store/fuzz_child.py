"""The child side of a fuzz case (see :mod:`fuzz_cases`): every read operation on one damaged store.

Each operation either succeeds or raises a ``RocketStoreError`` naming a file (a path inside the store) or an
offset; anything else (a foreign exception, a ``MemoryError`` under the address-space cap) is a failure. The
answer is one JSON line: the outcome of every operation and whether the CRC check caught a flipped body bit.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pyarrow as pa

from rocketstore_spark.errors import CorruptRecordError, RocketStoreError
from rocketstore_spark.store import COLUMNS, RAW_COLUMNS, RocketStore, verify_store

ALL_COLUMNS = tuple(COLUMNS) + tuple(RAW_COLUMNS)
NAMES_A_PLACE = re.compile(r"offset")


class Outcomes:
    def __init__(self, root: Path):
        self.root = str(root)
        self.items: list = []

    def attempt(self, name: str, fn):
        """Run ``fn``; record ok / a proper error / a failure. Returns fn's value (None when it raised)."""
        try:
            value = fn()
        except RocketStoreError as e:
            text = f"{type(e).__name__}: {e}"
            named = self.root in text or NAMES_A_PLACE.search(text) is not None
            self.items.append((name, "error" if named else "unnamed-error", text[:800]))
            return None
        except Exception:  # noqa: BLE001 - a foreign exception is exactly what the campaign looks for
            self.items.append((name, "foreign", traceback.format_exc()[-1500:]))
            return None
        self.items.append((name, "ok", ""))
        return value


def _drain(batches) -> list:
    return [b for b in batches]


def run_operations(root: Path, expect: dict) -> dict:
    out = Outcomes(root)
    crc = expect.get("crc")
    detected = {"crc": False}
    store = out.attempt("open", lambda: RocketStore.open(root))
    if store is None:
        return {"outcomes": out.items, "crc_detected": False}
    with store:
        out.attempt("recovery", lambda: (store.max_phy_offset(), store.min_phy_offset(), store.checkpoint()))
        queues = out.attempt("topics", lambda: [(t, q) for t in store.topics() for q in store.queue_ids(t)]) or []
        samples = {"offsets": [], "keys": ["order-42"], "times": [0, 1 << 62]}
        for topic, qid in queues:
            def read(topic=topic, qid=qid):
                store.min_offset(topic, qid), store.max_offset(topic, qid)
                batches = _drain(store.read_queue(topic, qid, columns=ALL_COLUMNS))
                for b in batches[:1]:  # a few real values for the lookups below (times as raw milliseconds)
                    rows = b.select(["commitLogOffset", "uniqKey", "keys"]).slice(0, 2).to_pylist()
                    samples["offsets"] += [r["commitLogOffset"] for r in rows]
                    samples["keys"] += [k for r in rows for k in ([r["uniqKey"]] if r["uniqKey"] else []) + r["keys"]]
                    samples["times"] += b.column("storeTimestamp").cast(pa.int64()).slice(0, 2).to_pylist()
            out.attempt(f"queue {topic}/{qid}", read)
        out.attempt("scan", lambda: _drain(store.scan_raw(columns=ALL_COLUMNS)))

        def scan_crc():
            try:
                _drain(store.scan_raw(columns=("commitLogOffset",), verify_crc=True))
            except CorruptRecordError as e:
                if crc and e.path == crc["file"] and e.offset == crc["record"]:
                    detected["crc"] = True
                raise
        out.attempt("scan verifyCrc", scan_crc)
        for topic, qid in queues[:4]:
            out.attempt(f"get_message {topic}/{qid}", lambda t=topic, q=qid: store.get_message(t, q, 0))
            for ts in samples["times"][:4]:
                for boundary in ("lower", "upper"):
                    out.attempt(f"offset_by_time {topic}/{qid}",
                                lambda t=topic, q=qid, ts=ts, b=boundary: store.offset_by_time(t, q, int(ts), b))
        topics = sorted({t for t, _q in queues})[:3]
        for key in list(dict.fromkeys(samples["keys"]))[:4]:
            for topic in topics:
                out.attempt("query_by_key", lambda t=topic, k=key: store.query_by_key(t, k))
        for phy in samples["offsets"][:6] + [0, store.min_phy_offset() if store else 0]:
            out.attempt("look_message_by_offset", lambda p=phy: store.look_message_by_offset(p))
        out.attempt("index_files", store.index_files)
        problems = out.attempt("verify", lambda: verify_store(store)) or []
        if crc and any(p.where == f"{crc['file']}@{crc['record']}" for p in problems):
            detected["crc"] = True

        def inspect():
            from rocketstore_spark.cli.report import describe_store
            return describe_store(store)
        out.attempt("inspect", inspect)
    return {"outcomes": out.items, "crc_detected": detected["crc"]}
