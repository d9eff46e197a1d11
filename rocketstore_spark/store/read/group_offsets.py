"""Consumer groups' committed offsets against the store's queues: how far behind each group is, per queue.

The numbers are those of the broker's ``ConsumeStats`` (``mqadmin consumerProgress``): ``brokerOffset`` is the
queue's max offset, ``consumerOffset`` the committed one, and the lag their difference. The store time of the
group's next message (the message at the committed offset, or the queue's first one when the committed offset
has expired) tells since when the group is behind.
"""

from __future__ import annotations

from typing import Optional

from ..files.consumer_offsets import CommittedOffset, load_consumer_offsets

#: the rows' fields, in order (the Spark table's columns besides brokerName)
GROUP_OFFSET_FIELDS = ("group", "topic", "queueId", "committedOffset", "minOffset", "maxOffset", "lag",
                       "nextMessageStoreTime", "source")


class GroupOffsets:
    """The committed offsets of a store's broker, measured against the store (a reader passed in)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root
        self._committed: Optional[list[CommittedOffset]] = None

    def committed(self) -> list[CommittedOffset]:
        if self._committed is None:
            self._committed = load_consumer_offsets(self.root)
        return self._committed

    def groups(self) -> list[str]:
        return sorted({c.group for c in self.committed()})

    def rows(self, group: Optional[str] = None, topic: Optional[str] = None) -> list[dict]:
        """One row per committed queue offset (of ``group`` / ``topic`` when given), fields
        :data:`GROUP_OFFSET_FIELDS`."""
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
        """``{topic: {"queueId": committed}}`` of ``group``, the shape of JSON ``startingOffsets``."""
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


__all__ = ["GROUP_OFFSET_FIELDS", "GroupOffsets"]
