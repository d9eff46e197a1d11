"""Unresolved transactions: the half messages the broker still waits on a commit or rollback for.

The broker's own rule (``TransactionalMessageServiceImpl.check``, see :mod:`..format.transaction`), applied to
the store as it lies: for each queue of ``RMQ_SYS_TRANS_HALF_TOPIC``, the halves from the committed offset of the
group ``CID_RMQ_SYS_TRANS`` (the queue's min offset when it committed none) whose offset no op record of the op
queue with the same id names (``fillOpRemoveMap`` takes the op offsets at or past that committed offset), nor,
for a copy written back during its check-immunity time, the offset of its first copy. Halves before the committed
offset were resolved, dropped after too many checks, or written anew at the end of the queue (the copy the rule
then sees). These are exactly the halves a restarted broker would go on checking with their producers.
"""

from __future__ import annotations

from typing import Optional

from ..files.consumer_offsets import load_consumer_offsets
from ..format.transaction import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    check_times,
    java_long,
    op_offsets,
)

#: the rows' fields, in order (the Spark table's columns besides brokerName)
PENDING_TRANSACTION_FIELDS = ("topic", "queueId", "transactionId", "producerGroup", "checkTimes", "bornTimestamp",
                              "storeTimestamp", "halfQueueId", "halfOffset", "commitLogOffset", "uniqKey", "tags",
                              "keys", "bornHost", "properties", "body")
_COLUMNS = ["queueId", "queueOffset", "commitLogOffset", "uniqKey", "tags", "keys", "bornHost", "properties",
            "body", "bornTimestamp", "storeTimestamp"]


def _epoch_ms(value) -> Optional[int]:
    return None if value is None else int(round(value.timestamp() * 1000))


class PendingTransactions:
    """The unresolved halves of a store (a reader passed in, its root for the broker's committed offsets)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root

    def check_offsets(self) -> dict[int, int]:
        """Half queue id → where the broker's check starts (``CID_RMQ_SYS_TRANS``'s committed offset, else the
        queue's min offset, as ``TransactionalMessageBridge.fetchConsumeOffset``)."""
        committed = {c.queue_id: c.offset for c in load_consumer_offsets(self.root)
                     if c.group == CID_SYS_RMQ_TRANS and c.topic == RMQ_SYS_TRANS_HALF_TOPIC}
        return {qid: committed.get(qid, self.reader.min_offset(RMQ_SYS_TRANS_HALF_TOPIC, qid))
                for qid in self.reader.queue_ids(RMQ_SYS_TRANS_HALF_TOPIC)}

    def resolved_offsets(self, queue_id: int, from_offset: int) -> set[int]:
        """The half offsets at or past ``from_offset`` the op records of op queue ``queue_id`` resolve."""
        if not self.reader.has_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id):
            return set()
        done: set[int] = set()
        for batch in self.reader.read_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, columns=["tags", "body"]):
            for tags, body in zip(batch.column("tags").to_pylist(), batch.column("body").to_pylist()):
                done.update(o for o in op_offsets(tags, body) if o >= from_offset)
        return done

    def rows(self, topic: Optional[str] = None) -> list[dict]:
        """One dict per unresolved half (of real topic ``topic`` when given), fields
        :data:`PENDING_TRANSACTION_FIELDS`: the real topic and queue, the transaction id, the producer group, how
        often the broker checked it, born and store time (epoch ms; the store time is the latest copy's), where the
        half lies (half queue, offset, commit-log offset), and the message (tags, keys, properties, body)."""
        out = []
        for queue_id, start in sorted(self.check_offsets().items()):
            done = self.resolved_offsets(queue_id, start)
            for batch in self.reader.read_queue(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, start, columns=_COLUMNS):
                for r in batch.to_pylist():
                    props = dict(r["properties"] or [])
                    if r["queueOffset"] in done or self._first_copy_resolved(props, done):
                        continue
                    if topic is not None and props.get(PROPERTY_REAL_TOPIC) != topic:
                        continue
                    real_qid = props.get(PROPERTY_REAL_QUEUE_ID)
                    out.append({
                        "topic": props.get(PROPERTY_REAL_TOPIC),
                        "queueId": None if real_qid is None or java_long(real_qid) < 0 else java_long(real_qid),
                        "transactionId": props.get(PROPERTY_TRANSACTION_ID) or r["uniqKey"],
                        "producerGroup": props.get(PROPERTY_PRODUCER_GROUP), "checkTimes": check_times(props),
                        "bornTimestamp": _epoch_ms(r["bornTimestamp"]),
                        "storeTimestamp": _epoch_ms(r["storeTimestamp"]), "halfQueueId": queue_id,
                        "halfOffset": r["queueOffset"], "commitLogOffset": r["commitLogOffset"],
                        "uniqKey": r["uniqKey"], "tags": r["tags"], "keys": r["keys"], "bornHost": r["bornHost"],
                        "properties": props, "body": r["body"]})
        return out

    @staticmethod
    def _first_copy_resolved(props: dict, done: set[int]) -> bool:
        """A copy written back in its check-immunity time is resolved by an op record naming its first copy
        (``checkPrepareQueueOffset``)."""
        if PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS not in props:
            return False
        first = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        return first is not None and java_long(first) in done


__all__ = ["PENDING_TRANSACTION_FIELDS", "PendingTransactions"]
