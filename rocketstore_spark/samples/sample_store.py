"""A realistic sample store, for the demo, the examples, the tests and the benchmarks.

Several topics and queues, tags, keys, mixed body sizes (JSON events, a few large payloads), store times spread
over a few days, some compressed bodies, some IPv6 producers — written with the store layer's writer, so
the result is a store a real broker can serve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pyarrow as pa

from ..store import RocketStore
from ..store.format import layout as L

DEFAULT_TOPICS = {  # topic → (queues, tags)
    "orders": (8, ("created", "paid", "shipped", "cancelled")),
    "payments": (4, ("authorized", "captured", "refunded")),
    "clickstream": (8, ("view", "click", "search", "cart")),
    "audit-log": (2, ("login", "logout", "admin")),
}


@dataclass(frozen=True)
class SampleSpec:
    messages: int = 100_000
    days: float = 3.0
    end_ms: Optional[int] = None  # store time of the last message; now when None
    seed: int = 42
    body_bytes: Optional[int] = None  # fixed body size (benchmarks); mixed sizes when None
    compressed_fraction: float = 0.05
    topics: Optional[dict] = None
    chunk: int = 50_000


def sample_tables(spec: SampleSpec):
    """Arrow tables of sample messages, in store-time order, ``spec.chunk`` rows each."""
    import time

    rng = np.random.default_rng(spec.seed)
    topics = spec.topics or DEFAULT_TOPICS
    names = list(topics)
    end_ms = spec.end_ms or int(time.time() * 1000)
    start_ms = end_ms - int(spec.days * 86_400_000)
    weights = np.array([0.35, 0.15, 0.4, 0.1][:len(names)] or [1.0], dtype=float)
    weights = weights / weights.sum() if len(weights) == len(names) else np.full(len(names), 1 / len(names))
    done = 0
    while done < spec.messages:
        n = min(spec.chunk, spec.messages - done)
        seq = np.arange(done, done + n)
        store_ts = start_ms + (seq * (end_ms - start_ms) // max(spec.messages - 1, 1))
        topic_idx = rng.choice(len(names), size=n, p=weights)
        rows = {"topic": [], "queueId": [], "tags": [], "keys": [], "body": [], "bornTimestamp": [],
                "storeTimestamp": store_ts, "bornHost": [], "sysFlag": []}
        for i in range(n):
            name = names[topic_idx[i]]
            queues, tags = topics[name]
            s = int(seq[i])
            rows["topic"].append(name)
            rows["queueId"].append(int(rng.integers(queues)))
            rows["tags"].append(tags[int(rng.integers(len(tags)))] if rng.random() > 0.05 else None)
            entity = f"{name[:3]}-{int(rng.integers(1_000_000)):06d}"
            rows["keys"].append([entity] if rng.random() > 0.1 else [entity, f"user-{int(rng.integers(50_000))}"])
            rows["body"].append(_body(rng, name, s, entity, spec.body_bytes))
            rows["bornTimestamp"].append(int(store_ts[i]) - int(rng.integers(1, 50)))
            rows["bornHost"].append(f"10.{s % 7}.{(s // 7) % 250}.{s % 250 + 1}:{40000 + s % 20000}"
                                    if rng.random() > 0.03 else f"[2001:db8::{s % 65535:x}]:{40000 + s % 20000}")
            big = len(rows["body"][-1]) > 4096 and rng.random() < spec.compressed_fraction * 10
            codec = (L.COMPRESSION_ZLIB, L.COMPRESSION_LZ4, L.COMPRESSION_ZSTD)[s % 3]
            rows["sysFlag"].append(L.COMPRESSED_FLAG | (codec << L.COMPRESSION_TYPE_SHIFT) if big else 0)
        table = pa.table({
            "topic": pa.array(rows["topic"], pa.string()),
            "queueId": pa.array(rows["queueId"], pa.int32()),
            "tags": pa.array(rows["tags"], pa.string()),
            "keys": pa.array(rows["keys"], pa.list_(pa.string())),
            "body": pa.array(rows["body"], pa.binary()),
            "bornTimestamp": pa.array(rows["bornTimestamp"], pa.int64()),
            "storeTimestamp": pa.array(np.asarray(store_ts, dtype=np.int64)),
            "bornHost": pa.array(rows["bornHost"], pa.string()),
            "sysFlag": pa.array(rows["sysFlag"], pa.int32()),
        })
        done += n
        yield table


def _body(rng, topic: str, seq: int, entity: str, fixed: Optional[int]) -> bytes:
    if fixed is not None:
        head = f'{{"seq":{seq},"topic":"{topic}","id":"{entity}","pad":"'.encode()
        return (head + b"x" * max(fixed - len(head) - 2, 0) + b'"}')[:max(fixed, 0)]
    roll = rng.random()
    size = 40 if roll < 0.3 else 300 if roll < 0.8 else 2000 if roll < 0.97 else 20000
    event = {"seq": seq, "topic": topic, "id": entity, "amount": round(float(rng.random() * 500), 2),
             "note": "x" * int(rng.integers(0, size))}
    return json.dumps(event).encode()


def generate_store(path, spec: SampleSpec = SampleSpec(), progress: Optional[Callable[[int], None]] = None,
                   **sizes) -> dict:
    """Write a sample store at ``path`` (appending if it exists); returns the writer's summary."""
    total = 0
    with RocketStore.open_writer(path, **sizes) as writer:
        for table in sample_tables(spec):
            writer.append(table)
            total += table.num_rows
            if progress:
                progress(table.num_rows)
        end = writer.next_phy
    return {"messages": total, "end_phy_offset": end}
