"""What reading a store of a storage variant adds to the default reads (see :mod:`..files.variant`).

* prop-crc: the commit log checks each record's ``__CRC32#`` property wherever it checks CRCs.
* LMQ: a ``%LMQ%<name>`` consume queue holds ordinary units pointing at records of other topics
  (``LmqDispatch``): the record's topic, queue id and QUEUEOFFSET are its parent queue's, and the LMQ offset is
  only in ``INNER_MULTI_QUEUE_OFFSET`` at the position of the LMQ's name in ``INNER_MULTI_DISPATCH``. Rows read
  through an LMQ carry the LMQ as topic, queue id 0 and the LMQ offset (checked against that property), and
  the parent record's fields otherwise; the parent queue returns each record once.
* DLedger: the log is read through its entry headers (:mod:`..files.dledger_log`).
* batch-cq: ``batchconsumequeue/<topic>/<q>/`` queues (:mod:`..files.batch_consume_queue`) count messages; a row
  read at a queue offset inside an inner batch is that inner message, unwrapped as RocketMQ's client does
  (:mod:`..format.inner_batch`): its own queue offset, FLAG, body, properties (so tags, keys, uniqKey) and stored
  inner BODYCRC (0); the record's topic, queue id, commit-log offset, size, msgId, hosts, times and sysFlag.
* rocksdb-cq: ``consumequeue/`` is a RocksDB database (:mod:`..files.rocksdb_consume_queue`, opened read-only):
  its queues are those of the ``offset`` column family's ``max`` keys, units come from the ``default`` one.

A mixin of the store reader, next to the queue reads it extends.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptRecordError, StoreConfigError, StoreFormatError
from ..files.batch_consume_queue import BatchConsumeQueue
from ..files.commitlog import CommitLog
from ..files.consume_queue import ConsumeQueue
from ..files.dledger_checkpoint import peer_count
from ..files.dledger_log import DLedgerLog
from ..files.mapped_file_queue import MappedFileQueue
from ..files.rocksdb_consume_queue import RocksDBConsumeQueue, RocksDBConsumeQueueStore
from ..files.topic_config import batch_cq_topics
from ..files.variant import BATCH_CQ, DLEDGER, LMQ, LMQ_PREFIX, PROP_CRC, ROCKSDB_CQ, StoreVariant, commit_log_dir
from ..format import layout as L
from ..format.codec import RecordBatchFields
from ..format.columns import arrow_schema, parse_properties, property_values, single_property, view_array
from ..format.inner_batch import (
    BATCH_CONSUMEQUEUE_DIR,
    BCQ_STORE_UNIT_SIZE,
    PROPERTY_INNER_BASE,
    PROPERTY_INNER_NUM,
    inner_messages,
    is_inner_batch,
)

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


class VariantReads:
    """The store reader's hooks for variant stores."""

    variant: StoreVariant

    def _open_commit_log(self) -> CommitLog:
        files = MappedFileQueue(commit_log_dir(self.root, self.variant), self.sizes.commit_log_file_size,
                                strays=self.stray_files, cut_last=not self.variant.has(DLEDGER))
        if self.variant.has(DLEDGER):
            return DLedgerLog(files, prop_crc_required=self.variant.has(PROP_CRC),
                              force_verify_prop_crc=self.settings.force_verify_prop_crc,
                              committed_only=peer_count(self.settings.dledger_peers) > 1)
        return CommitLog(files, prop_crc_required=self.variant.has(PROP_CRC),
                         force_verify_prop_crc=self.settings.force_verify_prop_crc)

    def _dispatched(self):
        """A RocksDB consume-queue store's dispatch checkpoint (``getMaxPhyOffsetInConsumeQueue``: its
        ``CHECKPOINT_TOPIC`` offset, 0 without one); None for file consume queues."""
        if getattr(self, "_rocksdb", None) is None:
            return None
        return self._rocksdb.dispatched or 0

    def _redispatch_from(self, abnormal: bool):
        """Where opening starts dispatching recovered records (None: it does not): the commit log's answer;
        for a RocksDB store also after a normal exit, the records past its dispatch checkpoint
        (``recoverNormally``: ``doDispatch`` when the offset is past ``maxPhyOffsetOfConsumeQueue``)."""
        start = self.commitlog.redispatch_from(abnormal)
        dispatched = self._dispatched()
        if dispatched is not None and not self.variant.has(DLEDGER) and not abnormal:
            return dispatched + 1
        return start

    def dledger_committed(self):
        """(committedIndex, committedPos) of a DLedger store as its recovery derives them from
        ``dledger-<selfId>/checkpoint`` (None for other stores, or when the checkpoint gives none)."""
        _ = self.recovery
        return getattr(self.commitlog, "committed", None)

    def _open_variant_queues(self) -> None:
        """Add the queues of a rocksdb-cq store (the RocksDB database's) and of a batch-cq store."""
        self._rocksdb = None
        if self.variant.has(ROCKSDB_CQ):
            self._rocksdb = RocksDBConsumeQueueStore(self.root / L.CONSUMEQUEUE_DIR)
            for topic, qid in sorted(self._rocksdb.max_entries):
                self._queues[(topic, qid)] = RocksDBConsumeQueue(self._rocksdb, topic, qid)
        self._open_batch_queues()

    def _close_variant(self) -> None:
        if getattr(self, "_rocksdb", None) is not None:
            self._rocksdb.close()
            self._rocksdb = None

    def _open_batch_queues(self) -> None:
        """Add the ``batchconsumequeue/<topic>/<queueId>`` queues of a batch-cq store."""
        base = self.root / BATCH_CONSUMEQUEUE_DIR
        if not self.variant.has(BATCH_CQ) or not base.is_dir():
            return
        for topic_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            for directory in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                if not directory.name.isdigit():
                    raise StoreFormatError(f"unexpected directory {directory.name!r} in {topic_dir}: expected "
                                           "numeric queue ids", directory)
                key = (topic_dir.name, int(directory.name))
                if key in self._queues:
                    raise StoreFormatError(f"{key[0]}/{key[1]} has both a consume queue and a batch consume queue; "
                                           "expected one (the topic's queue.type decides which the broker uses)",
                                           directory)
                self._queues[key] = BatchConsumeQueue(key[0], key[1], directory,
                                                      self.settings.batch_consume_queue_file_size)

    def batch_topics(self) -> frozenset:
        """Topics whose queues are batch consume queues (``queue.type=BatchCQ``): those with a
        ``batchconsumequeue/`` directory, those ``config/topics.json`` marks, and those the caller names."""
        on_disk = {topic for (topic, _), cq in self._queues.items() if getattr(cq, "is_batch", False)}
        return frozenset(on_disk) | batch_cq_topics(self.root) | self.settings.batch_topics

    def _dispatch_queue(self, topic: str, queue_id: int, row: dict):
        """The queue re-dispatch creates for a record of a queue the store has none of yet
        (``ConsumeQueueStore.findOrCreateConsumeQueue``: a batch consume queue for a BatchCQ topic). An inner
        batch of a topic nothing marks as BatchCQ is an error: only the broker's topic table can tell."""
        batch = self.batch_topics()
        if topic not in batch and is_inner_batch(np.array([row["sysFlag"]]))[0]:
            raise StoreConfigError(
                f"re-dispatch after the crash would create queue {topic}/{queue_id} for the inner batch at commit-log "
                f"offset {row['commitLogOffset']}, and nothing says whether {topic!r} is a BatchCQ topic (expected "
                f"it in the batch topics {sorted(batch)}: no batchconsumequeue/ directory and no config/topics.json "
                "entry with queue.type=BatchCQ, found neither); name it with batchTopics (--batch-topics), and the "
                "batch consume-queue file size with batchConsumeQueueFileSize (--bcq-size)")
        if getattr(self, "_rocksdb", None) is not None:
            return RocksDBConsumeQueue(self._rocksdb, topic, queue_id)
        if topic in batch:
            return BatchConsumeQueue(topic, queue_id, self.root / BATCH_CONSUMEQUEUE_DIR / topic / str(queue_id),
                                     self.settings.batch_consume_queue_file_size)
        return ConsumeQueue(topic, queue_id, self.root / L.CONSUMEQUEUE_DIR / topic / str(queue_id),
                            self.sizes.consume_queue_file_size)

    @staticmethod
    def _redispatch_batch(cq, row: dict, tags_code: int, store_time: int) -> None:
        """A recovered record's unit in batch consume queue ``cq`` (``DispatchRequest`` as
        ``checkMessageAndReturnSize`` builds it): base offset and batch size from ``INNER_BASE`` / ``INNER_NUM``
        when the record has both (an inner batch), else its QUEUEOFFSET and 1 (``setBatchSizeIfNeeded``)."""
        props = dict(row["properties"])
        base, count = row["queueOffset"], 1
        if PROPERTY_INNER_NUM in props and PROPERTY_INNER_BASE in props:
            try:
                base, count = int(props[PROPERTY_INNER_BASE]), int(props[PROPERTY_INNER_NUM])
            except ValueError as e:
                path, at = cq.unit_location(cq.max_offset)
                raise CorruptRecordError(
                    f"record at commit-log offset {row['commitLogOffset']} of batch topic {cq.topic}: expected "
                    f"integer {PROPERTY_INNER_BASE}/{PROPERTY_INNER_NUM}, found {props[PROPERTY_INNER_BASE]!r}/"
                    f"{props[PROPERTY_INNER_NUM]!r}", path, at) from e
        cq.dispatch(row["commitLogOffset"], row["storeSize"], tags_code, store_time, base, count)

    def is_batch_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) is a batch consume queue (queue offsets count inner messages)."""
        return getattr(self._queues.get((topic, int(queue_id))), "is_batch", False)

    def _unwrap_inner(self, buf: np.ndarray, fields: RecordBatchFields, cqs: list, group_of_row: np.ndarray,
                      unit_offsets: np.ndarray, path) -> RecordBatchFields:
        """Rows of batch consume queues whose record is an inner batch: the fields of message
        ``queue offset - record QUEUEOFFSET`` of the record (``MessageDecoder.decodeMessage``), positions into
        the same buffer; a unit offset the record holds no message for is a CorruptRecordError."""
        batch_row = np.array([getattr(cqs[g], "is_batch", False) for g in group_of_row.tolist()], dtype=bool)
        rows = np.flatnonzero(batch_row & is_inner_batch(fields.sysflag))
        singles = np.flatnonzero(batch_row & ~is_inner_batch(fields.sysflag)
                                 & (unit_offsets != fields.queue_offset))
        if len(singles):
            self._past_the_record(cqs[int(group_of_row[singles[0]])], int(unit_offsets[singles[0]]), fields,
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
                self._past_the_record(cqs[int(group_of_row[i])], int(unit_offsets[i]), fields, i, len(inner))
            m = inner[k]
            out.queue_offset[i] = int(unit_offsets[i])
            out.flag[i], out.body_crc[i] = m["flag"], m["body_crc"]
            out.body_pos[i], out.body_len[i] = m["body_pos"], m["body_len"]
            out.props_pos[i], out.props_len[i] = m["props_pos"], m["props_len"]
        return out

    def _get_batch_message(self, cq, offset: int, max_nums: int, sub, columns, limits) -> tuple:
        """``getMessage`` over a batch consume queue (``DefaultMessageStore.getMessage`` with a
        ``BatchConsumeQueue``): from the unit holding ``offset`` to the end of its file, whole records, limits
        counted in messages (``isTheBatchFull``), ``nextBeginOffset`` = base + batchSize of the last unit looked
        at; the status from the units' tag hashes as the broker decides it. Returns (status, next offset, rows):
        the rows are the returned records unwrapped as the client does (every message of a batch, also those
        before ``offset``), then checked on their real tags."""
        max_filter_bytes, limit_bytes, limit_count = limits
        max_filter_bytes = max(max_filter_bytes, max_nums * BCQ_STORE_UNIT_SIZE)
        first = int(cq.unit_of([offset])[0])
        stop = int(np.flatnonzero(cq.file_of_units() == cq.file_of_units()[first])[-1]) + 1
        status, next_offset, picked, messages, total_bytes = "NO_MATCHED_MESSAGE", offset, [], 0, 0
        for u in range(first, stop):
            unit = cq.raw[u]
            base, count, size, phy = int(unit["base_offset"]), int(unit["batch_size"]), int(unit["size"]), \
                int(unit["phy_offset"])
            if next_offset >= cq.max_offset or (base - offset) * BCQ_STORE_UNIT_SIZE >= max_filter_bytes:
                break
            if messages and (messages + count > max_nums or total_bytes + size > limit_bytes
                             or messages > limit_count - 1):
                break
            next_offset = base + count
            if not (sub.is_all or sub.matches_codes(np.array([int(unit["tags_code"])]), cq.topic)[0]):
                continue
            if phy < self.min_phy_offset() or phy + size > self.recovery.valid_end:
                if not picked:
                    status = "MESSAGE_WAS_REMOVING"
                continue
            picked.append((cq.topic, cq.queue_id, base, base + count))
            messages, total_bytes, status = messages + count, total_bytes + size, "FOUND"
        want = columns if sub.is_all or "tags" in columns else columns + ("tags",)
        batches = list(self.read_queues(picked, None, want)) if picked else []
        table = pa.Table.from_batches(batches, schema=arrow_schema(want))
        if not sub.is_all and table.num_rows:
            table = table.filter(pc.fill_null(pc.is_in(table.column("tags"), value_set=pa.array(sub.tags)), False))
        return status, next_offset, table.select(list(columns))

    @staticmethod
    def _past_the_record(cq, offset: int, fields: RecordBatchFields, i: int, held: int) -> None:
        where, at = cq.unit_location(offset)
        raise CorruptRecordError(
            f"batch consume-queue unit of {cq.topic}/{cq.queue_id} for queue offset {offset} points past its record: "
            f"expected the record at commit-log offset {int(fields.phy_offset[i])} (QUEUEOFFSET "
            f"{int(fields.queue_offset[i])}) to hold message {offset - int(fields.queue_offset[i])}, found it holds "
            f"{held} message(s)", where, at)

    def _redispatch_variant(self, row: dict, tags_code: int, store_time: int = 0) -> None:
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
                cq = self._dispatch_queue(name, LMQ_QUEUE_ID, dict(row, sysFlag=0))  # a file or RocksDB queue
                self._queues[key] = cq
            if at == cq.max_offset:  # as for the record's own queue: units already on disk are not written twice
                cq.append_virtual(row["commitLogOffset"], row["storeSize"], tags_code, store_time)

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
