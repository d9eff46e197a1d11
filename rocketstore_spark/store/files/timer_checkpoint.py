"""``config/timercheck`` (``TimerCheckpoint``): how far the broker's timer wheel has got.

One 4096-byte page (``OS_PAGE_SIZE``) of big-endian longs; older brokers wrote only the first four::

    offset  size  field
    0       8     lastReadTimeMs          the dequeue's progress: every slot before it was delivered
    8       8     lastTimerLogFlushPos    timerlog/ flushed up to here
    16      8     lastTimerQueueOffset    rmq_sys_wheel_timer's queue offset read into the wheel up to here
    24      8     masterTimerQueueOffset  the same, as the master last reported it
    32      8     dataVersion.stateVersion
    40      8     dataVersion.timestamp
    48      8     dataVersion.counter
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .byte_source import as_path
from .topic_config import CONFIG_DIR

TIMER_CHECK_FILE = "timercheck"  # BrokerPathConfigHelper / DefaultMessageStore: <root>/config/timercheck
_HEAD = struct.Struct(">4q")
_VERSION = struct.Struct(">3q")


@dataclass(frozen=True)
class TimerCheckpoint:
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int = 0
    data_version_timestamp: int = 0
    data_version_counter: int = 0


def timer_check_path(root) -> Path:
    return as_path(root) / CONFIG_DIR / TIMER_CHECK_FILE


def parse_timer_checkpoint(data: bytes, path) -> TimerCheckpoint:
    """The checkpoint in ``data`` (``path`` names the file in errors)."""
    if len(data) < _HEAD.size:
        raise StoreFormatError(f"expected the timer checkpoint's {_HEAD.size} bytes (four longs), found "
                               f"{len(data)}: the file is cut short; the broker rewrites it every "
                               "timerFlushIntervalMs while it runs", path, 0)
    head = _HEAD.unpack_from(data, 0)
    version = _VERSION.unpack_from(data, _HEAD.size) if len(data) >= _HEAD.size + _VERSION.size else (0, 0, 0)
    return TimerCheckpoint(*head, *version)


def load_timer_checkpoint(root) -> Optional[TimerCheckpoint]:
    """The store's timer checkpoint; None when the broker never ran its timer wheel (no file)."""
    path = timer_check_path(root)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_timer_checkpoint(data, path)


__all__ = ["TIMER_CHECK_FILE", "TimerCheckpoint", "timer_check_path", "parse_timer_checkpoint",
           "load_timer_checkpoint"]
