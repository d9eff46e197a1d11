"""Compaction topics: the latest value per key, as a consumer of the topic ends up with it.

A topic created with ``cleanup.policy=COMPACTION`` takes only messages with keys (the broker refuses others).
The broker copies each of its messages into the queue's compaction log and serves the topic from that log alone
(:mod:`..files.compaction_log`), which it compacts down to the last message of each key (``shouldRetainMsg``:
the key is the message's whole ``KEYS`` text; a message without a body deletes its key). The commit log may no
longer hold a key's messages (its files expire as usual); the compaction log keeps them.

Per queue, rocketstore reads the compaction log's messages, then the commit log's from the queue offset after
the compaction log's last message (messages the compaction log never received: a store written by rocketstore,
or a broker with compaction disabled); ``source`` says which one a row came from. The latest value of a key is
its message with the highest queue offset, none when that message has no body.
"""

from __future__ import annotations

from typing import Iterator, Optional

from ..files.compaction_log import CompactionLog, compaction_queue_ids
from ..files.compaction_position import compaction_positions
from ..files.topic_config import compaction_topics

#: the rows' fields, in order (the Spark table's columns besides brokerName)
COMPACTED_FIELDS = ("topic", "queueId", "key", "queueOffset", "commitLogOffset", "source", "versions", "uniqKey",
                    "tags", "keys", "bornTimestamp", "storeTimestamp", "properties", "body")
SOURCE_COMPACTION_LOG = "compactionLog"  # the row's message was read from the broker's compaction log
SOURCE_COMMIT_LOG = "commitLog"  # ... from the commit log (above what the compaction log holds)
_COLUMNS = ["queueOffset", "commitLogOffset", "uniqKey", "tags", "keys", "properties", "body", "bornTimestamp",
            "storeTimestamp"]
_KEYS = "KEYS"  # MessageConst.PROPERTY_KEYS: Message.getKeys, the compaction's key


def _epoch_ms(value) -> Optional[int]:
    return None if value is None else int(round(value.timestamp() * 1000))


class CompactedTopics:
    """The latest value per key of a store's compaction topics (a reader passed in, its root for the topic
    table and the compaction logs)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root

    def topics(self) -> list[str]:
        """The compaction topics of the broker's topic table, sorted."""
        return sorted(compaction_topics(self.root))

    def positions(self) -> dict[tuple[str, int], int]:
        """(topic, queueId) → the queue offset the broker's last compaction of the queue went through."""
        return compaction_positions(self.root)

    def _messages(self, topic: str, queue_id: int) -> Iterator[tuple[str, dict]]:
        """(source, row) of the queue's messages in queue order: the compaction log's, then the commit log's
        above them."""
        start = None
        if queue_id in compaction_queue_ids(self.root, topic):
            log = CompactionLog(self.root, topic, queue_id)
            units = log.units()
            for batch in log.read(_COLUMNS, units):
                for r in batch.to_pylist():
                    yield SOURCE_COMPACTION_LOG, r
            start = log.next_offset(units) or None
        if not self.reader.has_queue(topic, queue_id):
            return
        if start is not None:
            if start >= self.reader.max_offset(topic, queue_id):
                return
            start = max(start, self.reader.min_offset(topic, queue_id))
        for batch in self.reader.read_queue(topic, queue_id, start=start, columns=_COLUMNS):
            for r in batch.to_pylist():
                yield SOURCE_COMMIT_LOG, r

    def rows(self, topic: Optional[str] = None) -> list[dict]:
        """One dict per queue and live key of the compaction topics (of ``topic`` when given, which must be one),
        fields :data:`COMPACTED_FIELDS`: the key, its latest message, where it was read (``source``) and how
        many messages of the key were read (``versions``: the compaction log keeps one per key below its
        position); sorted by topic, queue and queue offset."""
        topics = self.topics() if topic is None else [topic]
        out = []
        for name in topics:
            queue_ids = sorted(set(self.reader.queue_ids(name)) | set(compaction_queue_ids(self.root, name)))
            for queue_id in queue_ids:
                latest: dict = {}
                versions: dict = {}
                for source, r in self._messages(name, queue_id):
                    r["properties"] = dict(r["properties"] or [])
                    key = r["properties"].get(_KEYS)
                    if not key or not key.strip():
                        continue  # not kept by the compaction (the broker refuses such messages)
                    latest[key] = (source, r)
                    versions[key] = versions.get(key, 0) + 1
                for key, (source, r) in latest.items():
                    if not r["body"]:
                        continue  # a message without a body deletes its key
                    out.append({"topic": name, "queueId": queue_id, "key": key, "queueOffset": r["queueOffset"],
                                "commitLogOffset": r["commitLogOffset"], "source": source,
                                "versions": versions[key], "uniqKey": r["uniqKey"], "tags": r["tags"],
                                "keys": r["keys"], "bornTimestamp": _epoch_ms(r["bornTimestamp"]),
                                "storeTimestamp": _epoch_ms(r["storeTimestamp"]), "properties": r["properties"],
                                "body": r["body"]})
        return sorted(out, key=lambda r: (r["topic"], r["queueId"], r["queueOffset"]))


__all__ = ["COMPACTED_FIELDS", "CompactedTopics", "SOURCE_COMMIT_LOG", "SOURCE_COMPACTION_LOG"]
