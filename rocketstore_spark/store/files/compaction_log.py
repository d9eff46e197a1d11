"""The broker's compaction log of one queue of a compaction topic (``S/kv/CompactionLog.java``).

Every message the broker dispatches to a queue of a topic with ``cleanup.policy=COMPACTION`` is also copied into
that queue's compaction log (``CompactionService.putRequest`` → ``CompactionLog.asyncPutMessage``); the broker
serves the topic's reads from it alone (``DefaultMessageStore.getMessage`` → ``CompactionStore.getMessage``).
Every ``compactionScheduleInternal`` ms (15 min by default) ``CompactionLog.doCompaction`` rewrites all its
files but the last one being written: only the last message of each key is kept, none when that message has no
body (``shouldRetainMsg``), and the rewritten files are renamed into place from the sub-directory
``compacting/``. Files on disk, under the store root::

    compaction/compactionLog/<topic>/<queueId>/<20-digit offset>   the log (CompactionStore.COMPACTION_LOG_DIR)
    compaction/compactionCq/<topic>/<queueId>/<20-digit offset>    its consume queue (COMPACTION_CQ_DIR)
    compaction/position-checkpoint                                 how far compaction went (compaction_position)

A log file and its consume-queue file share their name: the log offset of the file's first byte
(``TopicPartitionLog.roll``). Rewritten files start again at offset 0, so the names of a queue's files need not
be contiguous. Log files are ``compactionMappedFileSize`` rounded to a multiple (at least five) of the consume
queue's file size (``getCompactionLogSize``), consume-queue files ``compactionCqMappedFileSize`` rounded down to
a multiple of 46 bytes.

Log record: a commit-log record copied byte for byte (``CompactionAppendMessageCallback.doAppend``), except
PHYSICALOFFSET, which is the record's position in the compaction log; QUEUEOFFSET is the message's offset in the
topic's queue. A file ends with TOTALSIZE (the bytes left) and BLANK_MAGIC_CODE when the next record (or the
consume queue's next unit) would not fit.

Consume-queue unit: the batch consume queue's 46 bytes (``BatchConsumeQueue.putBatchMessagePositionInfo``, see
:mod:`..format.inner_batch`), one per record, ascending in MSGBASEOFFSET with gaps where compaction dropped
messages (a sparse queue, ``SparseConsumeQueue``)::

    offset  bytes  field
    0       8      PHYOFFSET            the record's position in the compaction log
    8       4      SIZE                 the record's TOTALSIZE
    12      8      TAGSCODE             tag hash
    20      8      STORETIME            the record's STORETIMESTAMP
    28      8      MSGBASEOFFSET        the message's queue offset
    36      2      BATCHSIZE            1
    38      4      COMPACTEDOFFSET      -1 (INVALID_POS)
    42      4      RESERVED             0

A unit is valid when PHYOFFSET >= 0, SIZE > 0, MSGBASEOFFSET >= 0 and BATCHSIZE > 0
(``SparseConsumeQueue.recover``); the first other unit ends the file: zeros never written, or the end marker
``putEndPositionInfo`` writes (PHYOFFSET -1) when the log file is full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError, StoreFormatError
from ..format.codec import PROBLEM_DESCRIPTIONS
from ..format.columns import build_batch, fixed_fields_for, parse_and_decode
from ..format.inner_batch import BCQ_STORE_UNIT_SIZE, BCQ_UNIT_DTYPE
from .byte_source import as_path, map_file, scandir
from .mapped_file_queue import MappedFileInfo, list_offset_files

COMPACTION_DIR = "compaction"  # CompactionStore.COMPACTION_DIR
COMPACTION_LOG_DIR = "compactionLog"  # CompactionStore.COMPACTION_LOG_DIR
COMPACTION_CQ_DIR = "compactionCq"  # CompactionStore.COMPACTION_CQ_DIR


def compaction_queue_ids(root, topic: str) -> list[int]:
    """The queue ids of ``topic`` that have a compaction log (``CompactionStore.load`` lists the same
    directories), sorted; empty when the broker kept none."""
    base = as_path(root) / COMPACTION_DIR / COMPACTION_LOG_DIR / topic
    if not base.is_dir():
        return []
    return sorted(int(e.name) for e in scandir(base) if e.name.isdigit() and e.is_dir())


def _valid(units: np.ndarray) -> np.ndarray:
    return ((units["phy_offset"] >= 0) & (units["size"] > 0) & (units["base_offset"] >= 0)
            & (units["batch_size"] > 0))


@dataclass(frozen=True)
class CompactionUnits:
    """The valid consume-queue units of one compaction log, in queue order, with where each one came from."""

    units: np.ndarray  # BCQ_UNIT_DTYPE
    file_index: np.ndarray  # per unit: index into the log's files
    where: np.ndarray  # per unit: its byte position in its consume-queue file


class CompactionLog:
    """The compaction log of ``topic``/``queue_id`` under the store ``root``: its consume queue's units and the
    records they point at. Damaged bytes raise :class:`~rocketstore_spark.errors.StoreFormatError` (a record:
    :class:`~rocketstore_spark.errors.CorruptRecordError`) naming the file and byte offset."""

    def __init__(self, root, topic: str, queue_id: int):
        base = as_path(root) / COMPACTION_DIR
        self.topic, self.queue_id = topic, queue_id
        self.log_dir = base / COMPACTION_LOG_DIR / topic / str(queue_id)
        self.cq_dir = base / COMPACTION_CQ_DIR / topic / str(queue_id)
        self.log_files = list_offset_files(self.log_dir) if self.log_dir.is_dir() else []
        cq_files = list_offset_files(self.cq_dir) if self.cq_dir.is_dir() else []
        by_name = {f.from_offset: f for f in cq_files}
        self.cq_files: list[MappedFileInfo] = []
        for log in self.log_files:  # TopicPartitionLog.sanityCheck: one consume-queue file per log file
            cq = by_name.pop(log.from_offset, None)
            if cq is None:
                raise StoreFormatError(f"expected the compaction consume-queue file {log.from_offset:020d} in "
                                       f"{self.cq_dir} for the compaction log file, found none (the broker "
                                       "refuses to load such a compaction log)", log.location)
            self.cq_files.append(cq)
        if by_name:
            stray = by_name[min(by_name)]
            raise StoreFormatError(f"expected a compaction log file {stray.from_offset:020d} in {self.log_dir} for "
                                   "the compaction consume-queue file, found none (the broker refuses to load "
                                   "such a compaction log)", stray.location)

    def units(self) -> CompactionUnits:
        """The valid units of every consume-queue file; queue offsets must ascend across them."""
        parts, indexes, wheres = [], [], []
        for i, cq in enumerate(self.cq_files):
            whole = cq.length // BCQ_STORE_UNIT_SIZE
            if not whole:
                continue
            mapped = map_file(cq.location, cq.length)
            try:
                mapped.ensure(0, whole * BCQ_STORE_UNIT_SIZE)
                units = np.frombuffer(mapped.array[:whole * BCQ_STORE_UNIT_SIZE].tobytes(), dtype=BCQ_UNIT_DTYPE)
            finally:
                mapped.close()
            invalid = np.flatnonzero(~_valid(units))
            count = int(invalid[0]) if len(invalid) else len(units)
            parts.append(units[:count])
            indexes.append(np.full(count, i, dtype=np.int64))
            wheres.append(np.arange(count, dtype=np.int64) * BCQ_STORE_UNIT_SIZE)
        if not parts:
            return CompactionUnits(np.empty(0, BCQ_UNIT_DTYPE), np.empty(0, np.int64), np.empty(0, np.int64))
        out = CompactionUnits(np.concatenate(parts), np.concatenate(indexes), np.concatenate(wheres))
        offsets = out.units["base_offset"].astype(np.int64)
        back = np.flatnonzero(offsets[1:] <= offsets[:-1])
        if len(back):
            j = int(back[0]) + 1
            raise StoreFormatError(f"expected the compaction consume queue's queue offsets to ascend, found "
                                   f"{int(offsets[j])} after {int(offsets[j - 1])}",
                                   self.cq_files[int(out.file_index[j])].location, int(out.where[j]))
        return out

    def next_offset(self, units: Optional[CompactionUnits] = None) -> int:
        """The queue offset after the log's last message (0 when it holds none)."""
        units = self.units() if units is None else units
        if not len(units.units):
            return 0
        last = units.units[-1]
        return int(last["base_offset"]) + int(last["batch_size"])

    def read(self, columns, units: Optional[CompactionUnits] = None) -> Iterator[pa.RecordBatch]:
        """One Arrow batch of ``columns`` (the queue reads' column names) per log file, the records of the valid
        units in queue order. ``commitLogOffset`` is the record's position in the compaction log."""
        units = self.units() if units is None else units
        wanted = list(dict.fromkeys([*columns, "queueOffset", "storeSize"]))
        fixed = fixed_fields_for(wanted)
        for i, log in enumerate(self.log_files):
            mine = np.flatnonzero(units.file_index == i)
            if not len(mine):
                continue
            chosen = units.units[mine]
            positions = chosen["phy_offset"].astype(np.int64) - log.from_offset
            sizes = chosen["size"].astype(np.int64)
            outside = np.flatnonzero((positions < 0) | (positions + sizes > log.length))
            if len(outside):
                j = int(mine[outside[0]])
                raise StoreFormatError(f"expected the unit's record (log offset {int(units.units[j]['phy_offset'])}, "
                                       f"{int(units.units[j]['size'])} bytes) inside the compaction log file "
                                       f"{log.location} ({log.from_offset}..{log.from_offset + log.length}), found "
                                       "it outside", self.cq_files[i].location, int(units.where[j]))
            mapped = map_file(log.location, log.length)
            try:
                mapped.ensure(int(positions.min()), int((positions + sizes).max()))
                buf = mapped.array
                fields = parse_and_decode(buf, positions, wanted, fixed, record_bytes=int(sizes.sum()))
                bad = np.flatnonzero(~fields.valid.astype(bool))
                if len(bad):
                    k = int(bad[0])
                    reason = PROBLEM_DESCRIPTIONS.get(int(fields.problem[k]), "invalid record")
                    raise CorruptRecordError(f"bad compaction-log record of queue offset "
                                             f"{int(chosen['base_offset'][k])}: {reason}; the broker would not "
                                             "serve it either", log.location, int(positions[k]))
                batch = build_batch(buf, fields, wanted, str(log.location))
            finally:
                mapped.close()
            self._check(batch, chosen, positions, log)
            yield batch.select(list(columns))

    def _check(self, batch: pa.RecordBatch, chosen: np.ndarray, positions: np.ndarray, log: MappedFileInfo):
        got_offsets = batch.column("queueOffset").to_numpy()
        got_sizes = batch.column("storeSize").to_numpy()
        for name, got, want in (("QUEUEOFFSET", got_offsets, chosen["base_offset"]),
                                ("TOTALSIZE", got_sizes, chosen["size"])):
            differ = np.flatnonzero(got != want.astype(np.int64))
            if len(differ):
                k = int(differ[0])
                raise CorruptRecordError(f"expected the compaction-log record's {name} to be {int(want[k])} as its "
                                         f"consume-queue unit says, found {int(got[k])}", log.location,
                                         int(positions[k]))


__all__ = ["COMPACTION_CQ_DIR", "COMPACTION_DIR", "COMPACTION_LOG_DIR", "CompactionLog", "CompactionUnits",
           "compaction_queue_ids"]
