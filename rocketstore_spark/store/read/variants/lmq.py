"""A light-message-queue store (``lmq``): a ``%LMQ%<name>`` consume queue holds ordinary units pointing at records
of other topics (``LmqDispatch``): the record's topic, queue id and QUEUEOFFSET are its parent queue's, and the
LMQ offset is only in ``INNER_MULTI_QUEUE_OFFSET`` at the position of the LMQ's name in
``INNER_MULTI_DISPATCH``. Rows read through an LMQ carry the LMQ as topic, queue id 0 and the LMQ offset (checked
against that property), and the parent record's fields otherwise; the parent queue returns each record once.
Re-dispatch after a crash adds the LMQ units a recovered record names (``ConsumeQueue.multiDispatchLmqQueue``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ....errors import CorruptRecordError
from ...files.variant import LMQ_PREFIX
from ...format.codec import RecordBatchFields
from ...format.columns import parse_properties, property_values, single_property, view_array
from .part import VariantPart

PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # MessageConst.PROPERTY_INNER_MULTI_DISPATCH
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET
MULTI_DISPATCH_QUEUE_SPLITTER = ","  # MixAll.MULTI_DISPATCH_QUEUE_SPLITTER
LMQ_QUEUE_ID = 0  # MixAll.LMQ_QUEUE_ID: every LMQ has the one queue 0


def lmq_offsets_of(dispatch: list, offsets: list, lmq: str) -> list:
    """Per record, the offset its INNER_MULTI_QUEUE_OFFSET gives for ``lmq`` (None where it names none)."""
    out = []
    for names, values in zip(dispatch, offsets):
        found = None
        if names is not None and values is not None:
            names, values = names.split(MULTI_DISPATCH_QUEUE_SPLITTER), values.split(MULTI_DISPATCH_QUEUE_SPLITTER)
            if lmq in names and len(values) == len(names):
                text = values[names.index(lmq)]
                found = int(text) if text.strip().lstrip("-").isdigit() else None
        out.append(found)
    return out


class LightMessageQueues(VariantPart):
    """The ``%LMQ%`` queues of the store (their rows are overlaid: no planned runs)."""

    planned_runs = False

    def is_lmq(self, topic: str) -> bool:
        return topic.startswith(LMQ_PREFIX)

    def redispatch_more(self, row: dict, tags_code: int, store_time: int, queue_for) -> None:
        """The units of the LMQs a recovered record names, each at the offset its property gives."""
        props = dict(row["properties"])
        names, offsets = props.get(PROPERTY_INNER_MULTI_DISPATCH), props.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)
        if not names or not offsets:
            return
        for name in names.split(MULTI_DISPATCH_QUEUE_SPLITTER):
            if not name.startswith(LMQ_PREFIX):
                continue
            at = lmq_offsets_of([names], [offsets], name)[0]
            cq = queue_for(name, LMQ_QUEUE_ID, dict(row, sysFlag=0))  # a file or RocksDB queue
            if at == cq.max_offset:  # as for the record's own queue: units already on disk are not written twice
                cq.append_virtual(row["commitLogOffset"], row["storeSize"], tags_code, store_time)


def lmq_overlay(batch: pa.RecordBatch, cq, unit_offsets: np.ndarray, dispatch: list, offsets: list
                ) -> pa.RecordBatch:
    """Rows read through LMQ ``cq`` at ``unit_offsets``: the LMQ's topic, queue 0 and offset, after checking that
    each record's INNER_MULTI_QUEUE_OFFSET agrees with the unit that points at it."""
    said = lmq_offsets_of(dispatch, offsets, cq.topic)
    for i, (unit, value) in enumerate(zip(unit_offsets.tolist(), said)):
        if value != unit:
            path, at = cq.unit_location(int(unit))
            phy = batch.column("commitLogOffset")[i].as_py() if "commitLogOffset" in batch.schema.names else None
            raise CorruptRecordError(
                f"LMQ consume-queue unit {unit} of {cq.topic}/{cq.queue_id} points at a record"
                + (f" (commit-log offset {phy})" if phy is not None else "")
                + f" whose {PROPERTY_INNER_MULTI_QUEUE_OFFSET} gives "
                + ("no offset for this LMQ" if value is None else f"offset {value}")
                + f" (expected {unit}; {PROPERTY_INNER_MULTI_DISPATCH}={dispatch[i]!r}, "
                f"{PROPERTY_INNER_MULTI_QUEUE_OFFSET}={offsets[i]!r})", path, at)
    names = batch.schema.names
    replace = {"topic": pa.array([cq.topic] * batch.num_rows, pa.string()),
               "queueId": pa.array(np.full(batch.num_rows, LMQ_QUEUE_ID, np.int32)),
               "queueOffset": pa.array(np.asarray(unit_offsets, dtype=np.int64))}
    columns = [replace[n] if n in replace else batch.column(n) for n in names]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def lmq_overlay_fields(is_lmq, batch: pa.RecordBatch, buf: np.ndarray, fields: RecordBatchFields, cqs: list,
                       group_of_row: np.ndarray, unit_offsets: np.ndarray) -> pa.RecordBatch:
    """:func:`lmq_overlay` for the rows of a decoded chunk whose units came from LMQ queues (``cqs[g]`` is the
    queue of group ``g``, ``is_lmq(topic)`` tells an LMQ); rows of other queues pass unchanged."""
    lmq_groups = [g for g, cq in enumerate(cqs) if is_lmq(cq.topic)]
    if not lmq_groups:
        return batch
    raw = view_array(buf, fields.props_pos, fields.props_len, pa.binary())
    dispatch = single_property(raw, PROPERTY_INNER_MULTI_DISPATCH).to_pylist()
    offsets = single_property(raw, PROPERTY_INNER_MULTI_QUEUE_OFFSET).to_pylist()
    if len(set(group_of_row.tolist())) == 1:
        cq = cqs[int(group_of_row[0])]
        return lmq_overlay(batch, cq, unit_offsets, dispatch, offsets) if is_lmq(cq.topic) else batch
    parts, order = [], []
    for g in np.unique(group_of_row).tolist():
        rows = np.flatnonzero(group_of_row == g)
        part = batch.take(pa.array(rows))
        if is_lmq(cqs[g].topic):
            part = lmq_overlay(part, cqs[g], unit_offsets[rows], [dispatch[i] for i in rows],
                               [offsets[i] for i in rows])
        parts.append(part)
        order.append(rows)
    table = pa.Table.from_batches(parts).combine_chunks()
    back = np.argsort(np.concatenate(order), kind="stable")  # rows in their decoded order again
    return table.take(pa.array(back)).to_batches()[0]


def lmq_overlay_table(records, table: pa.Table, cq, phy_offsets: list, unit_offsets: list) -> pa.Table:
    """:func:`lmq_overlay` for the records at ``phy_offsets`` (one row each, in that order, read by ``records``, a
    :class:`~..records.CommitLogReads`) read through LMQ ``cq`` at ``unit_offsets`` (consumer-style paging reads
    records by offset, not by decoded chunk)."""
    raw = records.read_records_at(phy_offsets, ["propertiesString"]).column(0)
    props = parse_properties(raw.combine_chunks())
    dispatch = property_values(props, PROPERTY_INNER_MULTI_DISPATCH).to_pylist()
    offsets = property_values(props, PROPERTY_INNER_MULTI_QUEUE_OFFSET).to_pylist()
    batch = table.combine_chunks().to_batches()[0]
    return pa.Table.from_batches([lmq_overlay(batch, cq, np.asarray(unit_offsets, dtype=np.int64), dispatch,
                                              offsets)])


__all__ = ["LightMessageQueues", "lmq_offsets_of", "lmq_overlay", "lmq_overlay_fields", "lmq_overlay_table",
           "LMQ_QUEUE_ID"]
