"""Production-shaped stores: many topics with skewed popularity, a ``%RETRY%`` queue per consumer group, a few
DLQs, and message sizes drawn from a distribution, for ``rocketstore generate --topics N ...`` and
``bench/production_shape.py``.

Real brokers hold hundreds of topics × 8-16 queues plus a retry queue per consumer group (1,000 to 20,000
consume queues, most of them young: a few units in a 6 MB preallocated file), with message sizes from 100 bytes
to megabytes. Topic popularity follows a Zipf-like law: the k-th topic gets a share proportional to 1/k^s.
Everything is vectorised, so generating millions of messages costs what writing them costs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np
import pyarrow as pa

from ..errors import InvalidArgumentError
from ..store import RocketStore

MIN_BODY, MAX_BODY = 16, 4 * 1024 * 1024
RETRY_SHARE = 0.02  # of all messages, spread over the retry topics (redelivered messages are few)
DLQ_SHARE = 0.001  # of all messages, into one DLQ per tenth consumer group
RARE_FRACTION = 0.01  # messages tagged "rare": the 1%-selective tag read


@dataclass(frozen=True)
class SizeSpec:
    """Body sizes: ``fixed:N`` bytes or ``lognormal:MEAN,SIGMA`` (MEAN the mean body size in bytes, SIGMA the
    standard deviation of the size's logarithm), clipped to [16 B, 4 MiB]."""

    kind: str
    mean: float
    sigma: float = 0.0

    @staticmethod
    def parse(text: str) -> "SizeSpec":
        kind, _, args = str(text).partition(":")
        try:
            values = [float(v) for v in args.split(",")] if args else []
        except ValueError:
            values = None
        if kind == "fixed" and values and len(values) == 1 and values[0] >= 0:
            return SizeSpec("fixed", values[0])
        if kind == "lognormal" and values and len(values) == 2 and values[0] > 0 and values[1] >= 0:
            return SizeSpec("lognormal", values[0], values[1])
        raise InvalidArgumentError(f"bad sizes {text!r}: expected 'fixed:BYTES' or 'lognormal:MEAN,SIGMA' "
                                   "(e.g. lognormal:600,0.8 for a mean of 600 bytes)")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.mean), dtype=np.int64)
        mu = math.log(self.mean) - self.sigma ** 2 / 2  # so that the sizes' mean is ``mean``
        return np.clip(rng.lognormal(mu, self.sigma, n), MIN_BODY, MAX_BODY).astype(np.int64)


@dataclass(frozen=True)
class ProductionSpec:
    messages: int = 100_000
    topics: int = 125
    queues_per_topic: int = 8
    retry_groups: int = 0
    sizes: SizeSpec = SizeSpec("lognormal", 600, 0.8)
    zipf: float = 1.1  # topic k gets a share proportional to 1 / k**zipf
    seed: int = 42
    days: float = 1.0
    end_ms: Optional[int] = None
    chunk: int = 200_000
    keys: bool = True  # one key per message (the broker indexes it)


def queue_layout(spec: ProductionSpec) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(topic names, queues per topic, message share per topic): the business topics with Zipf shares, then
    ``%RETRY%<group>`` (one queue each) and a ``%DLQ%<group>`` for every tenth group."""
    names = [f"topic-{k:05d}" for k in range(spec.topics)]
    queues = [spec.queues_per_topic] * spec.topics
    weights = 1.0 / np.arange(1, spec.topics + 1, dtype=float) ** spec.zipf
    shares = list(weights / weights.sum() * (1 - (RETRY_SHARE + DLQ_SHARE if spec.retry_groups else 0)))
    if spec.retry_groups:
        groups = [f"group-{g:05d}" for g in range(spec.retry_groups)]
        dlq = groups[::10]
        names += [f"%RETRY%{g}" for g in groups] + [f"%DLQ%{g}" for g in dlq]
        queues += [1] * (len(groups) + len(dlq))
        shares += [RETRY_SHARE / len(groups)] * len(groups) + [DLQ_SHARE / len(dlq)] * len(dlq)
    return names, np.array(queues, dtype=np.int64), np.array(shares) / sum(shares)


def production_tables(spec: ProductionSpec) -> Iterator[pa.Table]:
    """Arrow tables of the spec's messages in store-time order, ``spec.chunk`` rows each (the columns the sink
    takes: topic, queueId, tags, keys, body, storeTimestamp)."""
    rng = np.random.default_rng(spec.seed)
    names, queues, shares = queue_layout(spec)
    topic_dict = pa.array(names, pa.string())
    end_ms = spec.end_ms or int(time.time() * 1000)
    start_ms = end_ms - int(spec.days * 86_400_000)
    pool = rng.integers(0, 256, size=(1 << 20) + 7, dtype=np.uint8)  # bodies are consecutive slices of it, tiled
    for done in range(0, spec.messages, spec.chunk):
        n = min(spec.chunk, spec.messages - done)
        seq = np.arange(done, done + n, dtype=np.int64)
        topic = rng.choice(len(names), size=n, p=shares)
        queue_id = (rng.random(n) * queues[topic]).astype(np.int32)
        sizes = spec.sizes.draw(rng, n)
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        if offsets[-1] >= 1 << 31:
            raise InvalidArgumentError(f"{n:,} messages of these sizes exceed 2 GiB in one table: lower the chunk")
        body = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                      pa.py_buffer(np.resize(pool, int(offsets[-1])))])
        rare = rng.random(n) < RARE_FRACTION
        columns = {
            "topic": pa.DictionaryArray.from_arrays(pa.array(topic.astype(np.int32)), topic_dict).cast(pa.string()),
            "queueId": pa.array(queue_id),
            "tags": pa.array(np.where(rare, "rare", "common").astype(object), pa.string()),
            "body": body,
            "storeTimestamp": pa.array(start_ms + seq * (end_ms - start_ms) // max(spec.messages - 1, 1),
                                       pa.int64()),
        }
        if spec.keys:
            columns["keys"] = pa.array([[f"key-{i}"] for i in seq], pa.list_(pa.string()))
        yield pa.table(columns)


def generate_production_store(path, spec: ProductionSpec,
                              progress: Optional[Callable[[int], None]] = None,
                              sink: Optional[Callable[[pa.Table], None]] = None, **sizes) -> dict:
    """Write a production-shaped store at ``path`` (appending if it exists); ``sink`` also receives every table
    (the benchmark writes the same rows to Parquet). Returns the counts written."""
    total = 0
    with RocketStore.open_writer(path, **sizes) as writer:
        for table in production_tables(spec):
            writer.append(table)
            if sink is not None:
                sink(table)
            total += table.num_rows
            if progress:
                progress(table.num_rows)
        end = writer.next_phy
    names, queues, _ = queue_layout(spec)
    return {"messages": total, "end_phy_offset": end, "topics": len(names), "queues": int(queues.sum())}


__all__ = ["SizeSpec", "ProductionSpec", "queue_layout", "production_tables", "generate_production_store"]
