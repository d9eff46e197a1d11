"""Timer messages (the 5.x timer wheel, ``timerWheelEnable``) as the broker keeps them.

A message sent with a delivery time (``Message.setDeliverTimeMs``, ``setDelayTimeMs``/``Sec``) further than one
precision step (``timerPrecisionMs``, 1 s) ahead is stored under ``rmq_sys_wheel_timer`` (queue 0) instead of
its topic, the real topic and queue kept in ``REAL_TOPIC`` / ``REAL_QID`` and the delivery time, rounded down to
the precision, in ``TIMER_OUT_MS`` (the requested one in ``TIMER_DELIVER_MS``). ``TimerMessageStore`` reads that
queue into its wheel (``timerwheel``, ``timerlog/``) and, when the time comes, puts a copy into the real topic
(``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS`` added). A delivery time further ahead than the roll window
(``timerRollWindowSlot`` slots) is *rolled*: at the window's end the message is written to ``rmq_sys_wheel_timer``
again with ``TIMER_ROLL_TIMES`` incremented, and waits another window. A message carrying ``TIMER_DEL_UNIQKEY``
(``<topic>+<UNIQ_KEY>``) cancels the timer message it names instead of being delivered. The progress is in
``config/timercheck`` (:mod:`..files.timer_checkpoint`).
"""

from __future__ import annotations

TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (SYSTEM_TOPIC_PREFIX + "wheel_timer")

# MessageConst's property names
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
DELETE_KEY_SEPARATOR = "+"  # TimerMessageStore.buildDeleteKey: topic + "+" + uniqKey

# the states of a timer message (the table's `state` column)
STATE_PENDING = "pending"  # not delivered yet: the broker delivers it at deliverTime (or on restart, if past)
STATE_DELIVERED = "delivered"  # put into its real topic
STATE_ROLLED = "rolled"  # written to the timer topic again (a later entry of the same message carries on)
STATE_CANCELLED = "cancelled"  # a TIMER_DEL_UNIQKEY message named it before its delivery
TIMER_STATES = (STATE_PENDING, STATE_DELIVERED, STATE_ROLLED, STATE_CANCELLED)


def delete_key(topic: str, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what a cancelling message's ``TIMER_DEL_UNIQKEY`` holds."""
    return f"{topic}{DELETE_KEY_SEPARATOR}{uniq_key}"


__all__ = ["TIMER_TOPIC", "PROPERTY_TIMER_OUT_MS", "PROPERTY_TIMER_DELIVER_MS", "PROPERTY_TIMER_ENQUEUE_MS",
           "PROPERTY_TIMER_DEQUEUE_MS", "PROPERTY_TIMER_ROLL_TIMES", "PROPERTY_TIMER_DEL_UNIQKEY",
           "DELETE_KEY_SEPARATOR", "STATE_PENDING", "STATE_DELIVERED", "STATE_ROLLED", "STATE_CANCELLED",
           "TIMER_STATES", "delete_key"]
