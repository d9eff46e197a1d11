"""A batch consume-queue store (``batch-cq``): ``batchconsumequeue/<topic>/<queueId>/`` queues
(:mod:`...files.batch_consume_queue`) count messages. A row read at a queue offset inside an inner batch is that
inner message, unwrapped as RocketMQ's client does (:mod:`...format.inner_batch`): its own queue offset, FLAG,
body, properties (so tags, keys, uniqKey) and stored inner BODYCRC (0); the record's topic, queue id, commit-log
offset, size, msgId, hosts, times and sysFlag."""

from __future__ import annotations

import numpy as np

from ....errors import CorruptRecordError, StoreFormatError
from ...files.batch_consume_queue import BatchConsumeQueue
from ...format.codec import RecordBatchFields
from ...format.inner_batch import BATCH_CONSUMEQUEUE_DIR, inner_messages, is_inner_batch
from .part import VariantPart


class BatchQueues(VariantPart):
    """The ``batchconsumequeue/`` queues of the store (their units are 46 bytes: no planned runs)."""

    planned_runs = False

    def open_queues(self, store, queues) -> None:
        """Add the ``batchconsumequeue/<topic>/<queueId>`` queues."""
        base = store.root / BATCH_CONSUMEQUEUE_DIR
        if not base.is_dir():
            return
        for topic_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            for directory in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                if not directory.name.isdigit():
                    raise StoreFormatError(f"unexpected directory {directory.name!r} in {topic_dir}: expected "
                                           "numeric queue ids", directory)
                key = (topic_dir.name, int(directory.name))
                if queues.loaded(*key) is not None:
                    raise StoreFormatError(f"{key[0]}/{key[1]} has both a consume queue and a batch consume queue; "
                                           "expected one (the topic's queue.type decides which the broker uses)",
                                           directory)
                queues.add(BatchConsumeQueue(key[0], key[1], directory, store.settings.batch_consume_queue_file_size))


def unwrap_inner(buf: np.ndarray, fields: RecordBatchFields, cqs: list, group_of_row: np.ndarray,
                 unit_offsets: np.ndarray, path) -> RecordBatchFields:
    """Rows of batch consume queues whose record is an inner batch: the fields of message ``queue offset - record
    QUEUEOFFSET`` of the record (``MessageDecoder.decodeMessage``), positions into the same buffer; a unit offset
    the record holds no message for is a CorruptRecordError."""
    batch_row = np.array([cqs[g].is_batch for g in group_of_row.tolist()], dtype=bool)
    rows = np.flatnonzero(batch_row & is_inner_batch(fields.sysflag))
    singles = np.flatnonzero(batch_row & ~is_inner_batch(fields.sysflag) & (unit_offsets != fields.queue_offset))
    if len(singles):
        _past_the_record(cqs[int(group_of_row[singles[0]])], int(unit_offsets[singles[0]]), fields,
                         int(singles[0]), 1)
    if not len(rows):
        return fields
    out = fields.take(np.arange(len(fields)))
    decoded: dict = {}
    for i in rows.tolist():
        pos = int(fields.position[i])
        if pos not in decoded:
            try:
                decoded[pos] = inner_messages(buf, int(fields.body_pos[i]), int(fields.body_len[i]))
            except ValueError as e:
                raise CorruptRecordError(f"inner batch record at commit-log offset {int(fields.phy_offset[i])}: "
                                         f"{e.args[0]}", path, int(e.args[1])) from e
        inner = decoded[pos]
        k = int(unit_offsets[i]) - int(fields.queue_offset[i])
        if not 0 <= k < len(inner):
            _past_the_record(cqs[int(group_of_row[i])], int(unit_offsets[i]), fields, i, len(inner))
        m = inner[k]
        out.queue_offset[i] = int(unit_offsets[i])
        out.flag[i], out.body_crc[i] = m["flag"], m["body_crc"]
        out.body_pos[i], out.body_len[i] = m["body_pos"], m["body_len"]
        out.props_pos[i], out.props_len[i] = m["props_pos"], m["props_len"]
    return out


def _past_the_record(cq, offset: int, fields: RecordBatchFields, i: int, held: int) -> None:
    where, at = cq.unit_location(offset)
    raise CorruptRecordError(
        f"batch consume-queue unit of {cq.topic}/{cq.queue_id} for queue offset {offset} points past its record: "
        f"expected the record at commit-log offset {int(fields.phy_offset[i])} (QUEUEOFFSET "
        f"{int(fields.queue_offset[i])}) to hold message {offset - int(fields.queue_offset[i])}, found it holds "
        f"{held} message(s)", where, at)


__all__ = ["BatchQueues", "unwrap_inner"]
