"""The streaming sink's batch ids: the newest batch each sink committed into a store, so that a batch Spark
runs again after a failure is not published twice."""

from __future__ import annotations

import json
from pathlib import Path

from .store_meta import sink_state_path, write_json_atomically


def last_sink_batch(root: Path, sink_id: str) -> int:
    """The newest batch id a streaming sink committed into this store (-1 when none)."""
    path = sink_state_path(root, sink_id)
    return json.loads(path.read_text())["lastBatchId"] if path.exists() else -1


def record_sink_batch(root: Path, sink_id: str, batch_id: int, sync: bool = True) -> None:
    """Record ``batch_id`` as the sink's newest (``sync``: forced to disk, under SYNC_FLUSH)."""
    if batch_id > last_sink_batch(root, sink_id):
        write_json_atomically(sink_state_path(root, sink_id), {"sinkId": sink_id, "lastBatchId": batch_id},
                              sync=sync)


__all__ = ["last_sink_batch", "record_sink_batch"]
