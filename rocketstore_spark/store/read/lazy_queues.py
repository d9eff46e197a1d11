"""Queues loaded when first named, for readers of a few queues of thousands (``StoreReader.open(...,
lazy_queues=True)``), and the planned ends an executor trusts instead of searching each queue's end again."""

from __future__ import annotations

from typing import Optional

from ..files.consume_queue import ConsumeQueue
from ..format import layout as L


class LazyQueues:
    """``_queue`` and ``expect_queue_ends`` for the store reader (its ``_queues``, ``_lazy_queues``,
    ``_planned_ends``, ``_given_valid_end`` and ``_queue_index``)."""

    def _queue(self, topic: str, queue_id: int) -> Optional[ConsumeQueue]:
        """The loaded queue, or with lazy queues the queue loaded now from its directory (None when absent)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None and self._lazy_queues:
            directory = self.root / L.CONSUMEQUEUE_DIR / topic / str(queue_id)
            if directory.is_dir():
                planned = self._planned_ends.get((topic, queue_id))
                cq = ConsumeQueue(topic, queue_id, directory, self.sizes.consume_queue_file_size,
                                  planned_end=planned)
                if planned is None:
                    cq.truncate_at_phy(self._given_valid_end)
                self._queues[(topic, queue_id)] = cq
        return cq

    def expect_queue_ends(self, ranges) -> None:
        """For a reader of planned ``(topic, queue id, start, end)`` ranges on a store opened with lazy queues:
        each queue is loaded trusting its planned end (no end search, no truncation scan: the planner did both),
        and every unit read is checked instead. A queue loaded earlier with a smaller end is loaded again."""
        if not self._lazy_queues:
            return
        for topic, qid, _, end in ranges:
            key = (topic, int(qid))
            if end is None:
                continue
            loaded = self._queues.get(key)
            if loaded is not None and getattr(loaded, "planned_end", None) is None:
                continue  # loaded as a whole store loads it (a variant's queues, recovery's): its end is searched
            if self._planned_ends.get(key, -1) < end:
                self._planned_ends[key] = int(end)
                if loaded is not None:
                    self._queues.pop(key).files.close()
                    self._queue_index = None

