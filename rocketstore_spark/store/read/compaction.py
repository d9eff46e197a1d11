"""Compaction topics: the latest value per key, as the broker's compaction keeps it.

A topic created with ``cleanup.policy=COMPACTION`` takes only messages with keys (the broker refuses others),
and the broker serves its queues from its compaction log (``compaction/compactionLog/<topic>/<queue>/``): a
copy of the queue that ``CompactionLog`` compacts down to the last message of each key (``shouldRetainMsg``:
the key is the message's whole ``KEYS`` text; a message without a body deletes its key). The latest values are
those a consumer ends up with after reading a queue from its start, whatever part the broker compacted already.

rocketstore computes them from the topic's consume queues (the commit log): per queue and key, the message with
the highest queue offset, none when its body is empty. A key whose messages the commit log no longer holds
(expired, kept only in the compaction log) is not seen.
"""

from __future__ import annotations

from typing import Optional

from ..files.topic_config import compaction_topics

#: the rows' fields, in order (the Spark table's columns besides brokerName)
COMPACTED_FIELDS = ("topic", "queueId", "key", "queueOffset", "commitLogOffset", "versions", "uniqKey", "tags",
                    "keys", "bornTimestamp", "storeTimestamp", "properties", "body")
_COLUMNS = ["queueOffset", "commitLogOffset", "uniqKey", "tags", "keys", "properties", "body", "bornTimestamp",
            "storeTimestamp"]
_KEYS = "KEYS"  # MessageConst.PROPERTY_KEYS: Message.getKeys, the compaction's key


def _epoch_ms(value) -> Optional[int]:
    return None if value is None else int(round(value.timestamp() * 1000))


class CompactedTopics:
    """The latest value per key of a store's compaction topics (a reader passed in, its root for the topic
    table)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root

    def topics(self) -> list[str]:
        """The compaction topics of the broker's topic table, sorted."""
        return sorted(compaction_topics(self.root))

    def rows(self, topic: Optional[str] = None) -> list[dict]:
        """One dict per queue and live key of the compaction topics (of ``topic`` when given, which must be one),
        fields :data:`COMPACTED_FIELDS`: the key, its latest message and how many messages of the key the queue
        holds (``versions``); sorted by topic, queue and queue offset."""
        topics = self.topics() if topic is None else [topic]
        out = []
        for name in topics:
            for queue_id in self.reader.queue_ids(name):
                latest: dict = {}
                versions: dict = {}
                for batch in self.reader.read_queue(name, queue_id, columns=_COLUMNS):
                    for r in batch.to_pylist():
                        r["properties"] = dict(r["properties"] or [])
                        key = r["properties"].get(_KEYS)
                        if not key or not key.strip():
                            continue  # not kept by the compaction (the broker refuses such messages)
                        latest[key] = r
                        versions[key] = versions.get(key, 0) + 1
                for key, r in latest.items():
                    if not r["body"]:
                        continue  # a message without a body deletes its key
                    out.append({"topic": name, "queueId": queue_id, "key": key, "queueOffset": r["queueOffset"],
                                "commitLogOffset": r["commitLogOffset"], "versions": versions[key],
                                "uniqKey": r["uniqKey"], "tags": r["tags"], "keys": r["keys"],
                                "bornTimestamp": _epoch_ms(r["bornTimestamp"]),
                                "storeTimestamp": _epoch_ms(r["storeTimestamp"]), "properties": r["properties"],
                                "body": r["body"]})
        return sorted(out, key=lambda r: (r["topic"], r["queueId"], r["queueOffset"]))


__all__ = ["COMPACTED_FIELDS", "CompactedTopics"]
