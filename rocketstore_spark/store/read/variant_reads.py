"""What reading a store of a storage variant adds to the default reads (see :mod:`..files.variant`).

* prop-crc: the commit log checks each record's ``__CRC32#`` property wherever it checks CRCs.
* LMQ: a ``%LMQ%<name>`` consume queue holds ordinary units pointing at records of other topics
  (``LmqDispatch``): the record's topic, queue id and QUEUEOFFSET are its parent queue's, and the LMQ offset is
  only in ``INNER_MULTI_QUEUE_OFFSET`` at the position of the LMQ's name in ``INNER_MULTI_DISPATCH``. Rows read
  through an LMQ carry the LMQ as topic, queue id 0 and the LMQ offset (checked against that property), and
  the parent record's fields otherwise; the parent queue returns each record once.
* DLedger: the log is read through its entry headers (:mod:`..files.dledger_log`).
* RocksDB and batch consume queues are refused for now, naming the variant.

A mixin of the store reader, next to the queue reads it extends.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError, UnsupportedVariantError
from ..files.commitlog import CommitLog
from ..files.consume_queue import ConsumeQueue
from ..files.dledger_log import DLedgerLog
from ..files.mapped_file_queue import MappedFileQueue
from ..files.variant import BATCH_CQ, DLEDGER, LMQ, LMQ_PREFIX, PROP_CRC, ROCKSDB_CQ, StoreVariant, commit_log_dir
from ..format import layout as L
from ..format.codec import RecordBatchFields
from ..format.columns import parse_properties, property_values, single_property, view_array

PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # MessageConst.PROPERTY_INNER_MULTI_DISPATCH
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET
MULTI_DISPATCH_QUEUE_SPLITTER = ","  # MixAll.MULTI_DISPATCH_QUEUE_SPLITTER
LMQ_QUEUE_ID = 0  # MixAll.LMQ_QUEUE_ID: every LMQ has the one queue 0

_NOT_YET = (ROCKSDB_CQ, BATCH_CQ)


def refuse_unsupported_reads(variant: StoreVariant, root) -> None:
    """Reads of the variants not implemented yet fail at open, naming the variant (never a partial answer)."""
    missing = [f for f in _NOT_YET if variant.has(f)]
    if missing:
        raise UnsupportedVariantError(
            f"store {root} is a {variant.name} store ({'; '.join(variant.evidence)}); reading the "
            f"{' and '.join(missing)} layout is not supported yet", variant=variant.name)


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


class VariantReads:
    """The store reader's hooks for variant stores."""

    variant: StoreVariant

    def _open_commit_log(self) -> CommitLog:
        files = MappedFileQueue(commit_log_dir(self.root, self.variant), self.sizes.commit_log_file_size,
                                strays=self.stray_files)
        log = DLedgerLog if self.variant.has(DLEDGER) else CommitLog
        return log(files, prop_crc_required=self.variant.has(PROP_CRC))

    def _redispatch_variant(self, row: dict, tags_code: int) -> None:
        """What re-dispatch on opening adds for a recovered record besides its own queue's unit: the units of the
        LMQs it names (``ConsumeQueue.multiDispatchLmqQueue``), each at the offset its property gives."""
        if not self.variant.has(LMQ):
            return
        props = dict(row["properties"])
        names, offsets = props.get(PROPERTY_INNER_MULTI_DISPATCH), props.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)
        if not names or not offsets:
            return
        for name in names.split(MULTI_DISPATCH_QUEUE_SPLITTER):
            if not name.startswith(LMQ_PREFIX):
                continue
            at = lmq_offsets_of([names], [offsets], name)[0]
            key = (name, LMQ_QUEUE_ID)
            cq = self._queues.get(key)
            if cq is None:
                cq = ConsumeQueue(name, LMQ_QUEUE_ID, self.root / L.CONSUMEQUEUE_DIR / name / str(LMQ_QUEUE_ID),
                                  self.sizes.consume_queue_file_size)
                self._queues[key] = cq
            if at == cq.max_offset:  # as for the record's own queue: units already on disk are not written twice
                cq.append_virtual(row["commitLogOffset"], row["storeSize"], tags_code)

    def is_lmq(self, topic: str) -> bool:
        """Whether ``topic`` is a light message queue of this store (its rows are overlaid, see the module)."""
        return self.variant.has(LMQ) and topic.startswith(LMQ_PREFIX)

    def lmq_topics(self) -> list[str]:
        """The ``%LMQ%`` topics with a consume queue (a subset of :meth:`topics`)."""
        return [t for t in self.topics() if self.is_lmq(t)]

    def _lmq_overlay(self, batch: pa.RecordBatch, cq, unit_offsets: np.ndarray, dispatch: list, offsets: list
                     ) -> pa.RecordBatch:
        """Rows read through LMQ ``cq`` at ``unit_offsets``: the LMQ's topic, queue 0 and offset, after checking
        that each record's INNER_MULTI_QUEUE_OFFSET agrees with the unit that points at it."""
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

    def _lmq_overlay_fields(self, batch: pa.RecordBatch, buf: np.ndarray, fields: RecordBatchFields, cqs: list,
                            group_of_row: np.ndarray, unit_offsets: np.ndarray) -> pa.RecordBatch:
        """:meth:`_lmq_overlay` for the rows of a decoded chunk whose units came from LMQ queues (``cqs[g]`` is
        the queue of group ``g``); rows of other queues pass unchanged."""
        lmq_groups = [g for g, cq in enumerate(cqs) if self.is_lmq(cq.topic)]
        if not lmq_groups:
            return batch
        raw = view_array(buf, fields.props_pos, fields.props_len, pa.binary())
        dispatch = single_property(raw, PROPERTY_INNER_MULTI_DISPATCH).to_pylist()
        offsets = single_property(raw, PROPERTY_INNER_MULTI_QUEUE_OFFSET).to_pylist()
        if len(set(group_of_row.tolist())) == 1:
            cq = cqs[int(group_of_row[0])]
            return self._lmq_overlay(batch, cq, unit_offsets, dispatch, offsets) if self.is_lmq(cq.topic) else batch
        parts, order = [], []
        for g in np.unique(group_of_row).tolist():
            rows = np.flatnonzero(group_of_row == g)
            part = batch.take(pa.array(rows))
            if self.is_lmq(cqs[g].topic):
                part = self._lmq_overlay(part, cqs[g], unit_offsets[rows], [dispatch[i] for i in rows],
                                         [offsets[i] for i in rows])
            parts.append(part)
            order.append(rows)
        table = pa.Table.from_batches(parts).combine_chunks()
        back = np.argsort(np.concatenate(order), kind="stable")  # rows in their decoded order again
        return table.take(pa.array(back)).to_batches()[0]

    def _lmq_overlay_table(self, table: pa.Table, cq, phy_offsets: list, unit_offsets: list) -> pa.Table:
        """:meth:`_lmq_overlay` for the records at ``phy_offsets`` (one row each, in that order) read through LMQ
        ``cq`` at ``unit_offsets`` (consumer-style paging reads records by offset, not by decoded chunk)."""
        props = parse_properties(self.read_records_at(phy_offsets, ["propertiesString"]).column(0).combine_chunks())
        dispatch = property_values(props, PROPERTY_INNER_MULTI_DISPATCH).to_pylist()
        offsets = property_values(props, PROPERTY_INNER_MULTI_QUEUE_OFFSET).to_pylist()
        batch = table.combine_chunks().to_batches()[0]
        return pa.Table.from_batches([self._lmq_overlay(batch, cq, np.asarray(unit_offsets, dtype=np.int64),
                                                        dispatch, offsets)])
