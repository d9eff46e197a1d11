"""Message traces: the trace records clients with message trace on wrote to a trace topic, decoded (see
:mod:`..format.trace`), one row per record, with where its trace message lies."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import StoreFormatError
from ..format.trace import RMQ_SYS_TRACE_TOPIC, TRACE_RECORD_FIELDS, TraceDecodeError, decode_trace_data

#: the rows' fields, in order (the Spark table's columns besides brokerName)
MESSAGE_TRACE_FIELDS = TRACE_RECORD_FIELDS + ("traceQueueId", "traceQueueOffset", "traceCommitLogOffset",
                                              "traceStoreTimestamp")
_COLUMNS = ["queueId", "queueOffset", "commitLogOffset", "storeTimestamp", "body"]


class MessageTraces:
    """The decoded trace records of a store's trace topic (a reader passed in)."""

    def __init__(self, reader):
        self.reader = reader

    def rows(self, trace_topic: str = RMQ_SYS_TRACE_TOPIC, msg_id: Optional[str] = None,
             trace_type: Optional[str] = None) -> list[dict]:
        """One dict per trace record of ``trace_topic`` (of the traced message ``msg_id``, of ``trace_type`` when
        given), fields :data:`MESSAGE_TRACE_FIELDS`: the record's fields (``timestamp`` in epoch ms) and its trace
        message's queue, queue offset, commit-log offset and store time (epoch ms)."""
        out = []
        for queue_id in self.reader.queue_ids(trace_topic):
            for batch in self.reader.read_queue(trace_topic, queue_id, columns=_COLUMNS):
                for r in batch.to_pylist():
                    try:
                        records = decode_trace_data(r["body"])
                    except TraceDecodeError as e:
                        path, at = self._where(r["commitLogOffset"])
                        raise StoreFormatError(
                            f"expected trace records in the client's trace encoding in the message at queue offset "
                            f"{r['queueOffset']} of {trace_topic}/{queue_id}, found: {e}; if {trace_topic} is not "
                            "a trace topic, name the clients' trace topic (customizedTraceTopic)", path, at) from e
                    stored = int(round(r["storeTimestamp"].timestamp() * 1000))
                    for rec in records:
                        if (msg_id is not None and rec["msgId"] != msg_id) or \
                                (trace_type is not None and rec["traceType"] != trace_type):
                            continue
                        out.append(rec | {"traceQueueId": queue_id, "traceQueueOffset": r["queueOffset"],
                                          "traceCommitLogOffset": r["commitLogOffset"],
                                          "traceStoreTimestamp": stored})
        return out

    def _where(self, phy_offset: int):
        """(commit-log file, position in it) of a record, for errors."""
        log = self.reader.store.commitlog
        idx, pos = log.locate(np.array([phy_offset], dtype=np.int64))
        if idx[0] < 0:
            return None, phy_offset
        return log.queue.files[int(idx[0])].path, int(pos[0])


__all__ = ["MESSAGE_TRACE_FIELDS", "MessageTraces"]
