"""The per-record queue test of commit-log-ordered reads: whether a consume-queue read of the same request returns a
record, decided on its header (the rules are described in :mod:`..read.ordered_scan`; the test is the native
``QueueTest``, evaluated by :meth:`QueueTest.keeps` or inside the fused decode,
:func:`.columns.parse_and_decode_kept`)."""

from __future__ import annotations

import numpy as np

from ... import _native
from .codec import RecordBatchFields, native_bytes


class QueueTest:
    """The rules of one read: ``selected`` queues (topic → queue ids, a ``range`` or any iterable of ints) and
    ``limits``, ``(topic, queue id, lo, hi)`` queue-offset ranges of the selected queues whose records are not all
    kept (a queue listed twice keeps its lowest range)."""

    __slots__ = ("native",)

    def __init__(self, selected, limits=()):
        selected = dict(selected)
        names = sorted(set(selected) | {t for t, _, _, _ in limits})
        number = {name: k for k, name in enumerate(names)}
        # a topic at a time (a full scan of a store of 20,000 queues selects them all in every partition)
        queue_ids = [_queue_id_array(qids) for qids in selected.values()]
        topics = np.repeat(np.array([number[t] for t in selected], dtype=np.int64), [len(q) for q in queue_ids])
        queues = np.concatenate([np.zeros(0, dtype=np.int64)] + queue_ids)
        ranges = np.array(sorted((number[t], int(q), int(lo), int(hi)) for t, q, lo, hi in limits),
                          dtype=np.int64).reshape(-1)
        self.native = _native.QueueTest([n.encode("utf-8") for n in names], topics, queues, ranges)

    def keeps(self, buf, fields: RecordBatchFields) -> np.ndarray:
        """Per record of ``fields`` (parsed from ``buf``): whether the test keeps it."""
        arrays = [np.require(a, dtype=np.int64, requirements=["C", "A"]) for a in
                  (fields.topic_pos, fields.topic_len, fields.sysflag, fields.queue_id, fields.queue_offset)]
        kept = np.empty(len(arrays[0]), dtype=np.uint8)
        found = _native.test_records(native_bytes(buf), *arrays, self.native, kept)
        if found < 0:
            from ...errors import CorruptRecordError

            row = -found - 1
            raise CorruptRecordError(f"a topic of {int(fields.topic_len[row])} bytes runs outside the buffer", None,
                                     int(fields.topic_pos[row]))
        return kept.view(bool)


def _queue_id_array(qids) -> np.ndarray:
    """Queue ids (a ``range`` or any iterable of ints) as an int64 array."""
    if isinstance(qids, range):
        return np.arange(qids.start, qids.stop, qids.step, dtype=np.int64)
    return np.fromiter((int(q) for q in qids), dtype=np.int64)


__all__ = ["QueueTest"]
