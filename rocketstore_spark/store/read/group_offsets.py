"""Consumer groups' committed offsets against the store's queues: how far behind each group is, per queue.

The numbers are those of the broker's ``ConsumeStats`` (``mqadmin consumerProgress``): ``brokerOffset`` is the
queue's max offset, ``consumerOffset`` the committed one, and the lag their difference. Like the broker, every
read queue of a topic the group has committed offsets for is listed: a queue the group has committed nothing for
(its consumer never pulled from it before stopping) counts from offset 0, with no source file. The store time of
the group's next message (the message at the committed offset, or the queue's first one when the committed
offset has expired) tells since when the group is behind.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from ..files.consumer_offsets import CommittedOffset, load_consumer_offsets
from ..files.topic_config import queue_dir_counts, read_queue_nums


def group_positions(root, queue_ids: Optional[Callable[[str], Iterable[int]]] = None) -> list[CommittedOffset]:
    """Every group's position in every queue of the topics it consumes: its committed offsets, and offset 0
    (``source`` None) for the topic's other read queues, as ``AdminBrokerProcessor.getConsumeStats`` reports
    them. The read queues are the topic table's ``readQueueNums``; a topic missing from the table takes
    ``queue_ids(topic)`` (default: its consume-queue directories). Sorted by group, topic and queue."""
    committed = load_consumer_offsets(root)
    if not committed:
        return committed
    configured = read_queue_nums(root)
    if queue_ids is None:
        on_disk = queue_dir_counts(root)

        def queue_ids(topic: str) -> Iterable[int]:
            return range(on_disk.get(topic, 0))

    held: dict[tuple[str, str], set[int]] = {}
    for c in committed:
        held.setdefault((c.group, c.topic), set()).add(c.queue_id)
    out = list(committed)
    for (group, topic), ids in held.items():
        queues = range(configured[topic]) if topic in configured else queue_ids(topic)
        out.extend(CommittedOffset(group, topic, qid, 0, None) for qid in queues if qid not in ids)
    return sorted(out, key=lambda c: (c.group, c.topic, c.queue_id))

#: the rows' fields, in order (the Spark table's columns besides brokerName)
GROUP_OFFSET_FIELDS = ("group", "topic", "queueId", "committedOffset", "minOffset", "maxOffset", "lag",
                       "nextMessageStoreTime", "source")


class GroupOffsets:
    """The committed offsets of a store's broker, measured against the store (a reader passed in)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root
        self._committed: Optional[list[CommittedOffset]] = None

    def committed(self) -> list[CommittedOffset]:
        """:func:`group_positions` of the store (topics missing from its topic table take its queues)."""
        if self._committed is None:
            self._committed = group_positions(self.root, self.reader.queue_ids)
        return self._committed

    def groups(self) -> list[str]:
        return sorted({c.group for c in self.committed()})

    def rows(self, group: Optional[str] = None, topic: Optional[str] = None) -> list[dict]:
        """One row per queue of a topic a group consumes (of ``group`` / ``topic`` when given), fields
        :data:`GROUP_OFFSET_FIELDS`; ``source`` is None for a queue the group has committed nothing for."""
        out = []
        for c in self.committed():
            if (group is not None and c.group != group) or (topic is not None and c.topic != topic):
                continue
            lo, hi = self._edges(c.topic, c.queue_id)
            nxt = max(c.offset, lo)
            out.append({"group": c.group, "topic": c.topic, "queueId": c.queue_id, "committedOffset": c.offset,
                        "minOffset": lo, "maxOffset": hi, "lag": max(hi - c.offset, 0),
                        "nextMessageStoreTime": self._store_time(c.topic, c.queue_id, nxt) if nxt < hi else None,
                        "source": c.source})
        return out

    def starting_offsets(self, group: str) -> dict:
        """``{topic: {"queueId": committed}}`` of ``group``, the shape of JSON ``startingOffsets`` (0 for the
        queues it has committed nothing for: read from their first message)."""
        out: dict = {}
        for c in self.committed():
            if c.group == group:
                out.setdefault(c.topic, {})[str(c.queue_id)] = c.offset
        return out

    def _edges(self, topic: str, queue_id: int) -> tuple[int, int]:
        if not self.reader.has_queue(topic, queue_id):
            return 0, 0  # no message yet: the broker answers max offset 0 as well
        return self.reader.min_offset(topic, queue_id), self.reader.max_offset(topic, queue_id)

    def _store_time(self, topic: str, queue_id: int, offset: int) -> Optional[int]:
        units = self.reader.consume_queue(topic, queue_id).units(offset, offset + 1)
        if not len(units):
            return None
        return self.reader.store_time_at(int(units[0]["phy_offset"]), int(units[0]["size"]))


__all__ = ["GROUP_OFFSET_FIELDS", "GroupOffsets", "group_positions"]
