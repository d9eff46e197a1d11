"""Timer messages: every message the timer wheel holds or held, with its real topic, delivery time and state.

The entries are those of the timer topic ``rmq_sys_wheel_timer`` (see :mod:`..format.timer`); their state follows
the broker's progress in ``config/timercheck`` (:mod:`..files.timer_checkpoint`), as ``TimerMessageStore``
recovers it:

* an entry at or past ``lastTimerQueueOffset`` was never read into the wheel: **pending** (a restarted broker reads
  it and delivers it at its time, at once when that has passed);
* an entry a later entry of the same message (``UNIQ_KEY``) with more ``TIMER_ROLL_TIMES`` follows was **rolled**:
  the wheel wrote it again at its roll window's end (the later entry carries on);
* an entry whose delivery time (``TIMER_OUT_MS``, already on the precision) lies before ``lastReadTimeMs`` was
  **delivered**: the dequeue put it into its real topic;
* an entry a cancelling message (``TIMER_DEL_UNIQKEY``) names, not delivered, was **cancelled**;
* any other is **pending**: the broker delivers it at ``deliverTime``.

The cancelling messages themselves are not rows. Without a ``timercheck`` file the wheel never ran: all pending.
"""

from __future__ import annotations

from typing import Optional

from ..files.timer_checkpoint import load_timer_checkpoint
from ..format.timer import (
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    STATE_CANCELLED,
    STATE_DELIVERED,
    STATE_PENDING,
    STATE_ROLLED,
    TIMER_TOPIC,
    delete_key,
)
from ..format.transaction import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, java_long

#: the rows' fields, in order (the Spark table's columns besides brokerName)
TIMER_MESSAGE_FIELDS = ("topic", "queueId", "uniqKey", "state", "deliverTime", "requestedDeliverTime", "rollTimes",
                        "timerQueueOffset", "commitLogOffset", "bornTimestamp", "storeTimestamp", "tags", "keys",
                        "properties", "body")
_COLUMNS = ["queueOffset", "commitLogOffset", "uniqKey", "tags", "keys", "properties", "body", "bornTimestamp",
            "storeTimestamp"]


def _epoch_ms(value) -> Optional[int]:
    return None if value is None else int(round(value.timestamp() * 1000))


def _number(value) -> Optional[int]:
    if value is None:
        return None
    n = java_long(value)
    return None if n < 0 else n


class TimerMessages:
    """The timer messages of a store (a reader passed in, its root for ``config/timercheck``)."""

    def __init__(self, reader, root):
        self.reader, self.root = reader, root

    def rows(self, topic: Optional[str] = None, state: Optional[str] = None) -> list[dict]:
        """One dict per entry of the timer topic (of real topic ``topic`` / in ``state`` when given), fields
        :data:`TIMER_MESSAGE_FIELDS`: the real topic and queue, the message's UNIQ_KEY, its state (see the
        module), the delivery time (``TIMER_OUT_MS``) and the requested one (``TIMER_DELIVER_MS``), both epoch ms,
        how often it was rolled, where the entry lies, born and store time, and the message."""
        checkpoint = load_timer_checkpoint(self.root)
        read_time = checkpoint.last_read_time_ms if checkpoint else 0
        enqueued_to = checkpoint.last_timer_queue_offset if checkpoint else 0
        entries, cancelled = [], set()
        for queue_id in self.reader.queue_ids(TIMER_TOPIC):
            for batch in self.reader.read_queue(TIMER_TOPIC, queue_id, columns=_COLUMNS):
                for r in batch.to_pylist():
                    r["properties"] = props = dict(r["properties"] or [])
                    if PROPERTY_TIMER_DEL_UNIQKEY in props:
                        cancelled.add(props[PROPERTY_TIMER_DEL_UNIQKEY])
                    else:
                        entries.append(r)
        last_roll: dict = {}  # UNIQ_KEY → the most rolls any entry of the message carries
        for r in entries:
            rolls = _number(r["properties"].get(PROPERTY_TIMER_ROLL_TIMES)) or 0
            last_roll[r["uniqKey"]] = max(rolls, last_roll.get(r["uniqKey"], 0))
        out = []
        for r in entries:
            props = r["properties"]
            real_topic = props.get(PROPERTY_REAL_TOPIC)
            rolls = _number(props.get(PROPERTY_TIMER_ROLL_TIMES)) or 0
            deliver = _number(props.get(PROPERTY_TIMER_OUT_MS))
            if r["queueOffset"] >= enqueued_to:
                row_state = STATE_PENDING
            elif rolls < last_roll[r["uniqKey"]]:
                row_state = STATE_ROLLED
            elif deliver is not None and deliver < read_time:
                row_state = STATE_DELIVERED
            else:
                row_state = STATE_PENDING
            if row_state == STATE_PENDING and delete_key(real_topic, r["uniqKey"]) in cancelled:
                row_state = STATE_CANCELLED
            if (topic is not None and real_topic != topic) or (state is not None and row_state != state):
                continue
            out.append({"topic": real_topic, "queueId": _number(props.get(PROPERTY_REAL_QUEUE_ID)),
                        "uniqKey": r["uniqKey"], "state": row_state, "deliverTime": deliver,
                        "requestedDeliverTime": _number(props.get(PROPERTY_TIMER_DELIVER_MS)), "rollTimes": rolls,
                        "timerQueueOffset": r["queueOffset"], "commitLogOffset": r["commitLogOffset"],
                        "bornTimestamp": _epoch_ms(r["bornTimestamp"]),
                        "storeTimestamp": _epoch_ms(r["storeTimestamp"]), "tags": r["tags"], "keys": r["keys"],
                        "properties": props, "body": r["body"]})
        return out


__all__ = ["TIMER_MESSAGE_FIELDS", "TimerMessages"]
