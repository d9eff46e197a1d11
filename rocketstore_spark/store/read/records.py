"""Reads of the commit log by position: a range of records in commit-log order (every record, also those no
consume queue points at), records at given commit-log offsets, one record's store time, whether the record a
live queue's last unit points at is complete."""

from __future__ import annotations

import functools
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError
from ..files.commitlog import END_BLANK
from ..format import layout as L
from ..format.codec import parse_records, read_be
from ..format.columns import arrow_schema, build_batch, normalize_columns
from .decode_ahead import in_order
from .opened_store import OpenedStore
from .queue_set import QueueSet

DEFAULT_BATCH_ROWS = 10_000


def _raw_batch(walk, idx, buf, columns, where: str, index: int):
    """The batch of the walked records ``idx``, its records' bytes and its file index."""
    fields = walk.fields_at(idx, decode=columns)
    return build_batch(buf, fields, columns, where), int(fields.total_size.sum()), index


class CommitLogReads:
    """Commit-log reads of ``store``; ``queues`` give the record starts a walk is guided by."""

    def __init__(self, store: OpenedStore, queues: QueueSet):
        self.store = store
        self.queues = queues

    def scan_raw(self, start: int = 0, end: Optional[int] = None, columns=None, *,
                 batch_rows: int = DEFAULT_BATCH_ROWS, verify_crc: bool = False,
                 threads: Optional[int] = None) -> Iterator[pa.RecordBatch]:
        """Every record in commit-log order from ``start`` to ``end`` (clamped to the valid end), including
        records that never reach a consume queue (PREPARED / ROLLBACK transaction halves).

        ``threads``: batches decoded at once, on worker threads (see :mod:`.decode_ahead`; None: one per core,
        at most four; a remote store's reads stay on the caller's thread). A reader already running one task per
        core (a Spark task) passes 1."""
        columns = normalize_columns(columns)
        if self.store.commitlog.queue.remote:
            threads = 1
        for batch, nbytes, index in in_order(self._raw_jobs(start, end, columns, batch_rows, verify_crc), threads):
            self.store.commitlog.queue.note_read(index, nbytes)
            yield batch

    def _raw_jobs(self, start, end, columns, batch_rows, verify_crc):
        """:meth:`scan_raw`'s batches as jobs, each decoding one (with its bytes and file)."""
        valid_end = self.store.recovery.valid_end
        end = valid_end if end is None else min(int(end), valid_end)
        start = max(int(start), self.store.min_phy_offset())
        walks = {w.file_index: w for w in self.store.recovery.walks}
        files = self.store.commitlog.queue.files
        for index, info in enumerate(files):
            if info.from_offset + self.store.sizes.commit_log_file_size <= start or info.from_offset >= end:
                continue
            walk = walks.get(index)
            if walk is None or verify_crc:
                # units mark record starts: chains of them are checked in vectorised steps, only the records no
                # queue points at are walked one by one (remotely a request per queue costs more than the walk)
                base = info.from_offset
                hints = None if self.store.commitlog.queue.remote else np.concatenate([np.zeros(0, np.int64)] + [
                    q.phy_offsets_between(base, base + self.store.sizes.commit_log_file_size) - base
                    for q in self.queues.loaded_queues()])
                walk = self.store.commitlog.walk_file(index, check_crc=verify_crc, hints=hints)
                stopped_at = walk.end_position if walk.problem_position is None else walk.problem_position
                # a bad record inside the range is an error (a DLedger walk ends at its entries' end even then)
                if (walk.end_kind != END_BLANK or walk.problem_position is not None) and \
                        info.from_offset + stopped_at < end:
                    raise CorruptRecordError(
                        f"commit log stops early: {walk.problem or 'no record where one was expected'} "
                        f"before the valid end {end}", info.path, stopped_at)
            absolute = info.from_offset + walk.positions
            sel = np.flatnonzero((absolute >= start) & (absolute < end))
            buf = self.store.commitlog.queue.buffer(index)
            where = str(info.path)
            for chunk in range(0, len(sel), batch_rows):
                yield functools.partial(_raw_batch, walk, sel[chunk:chunk + batch_rows], buf, columns, where, index)

    def read_record_at(self, phy_offset: int, columns=None) -> Optional[pa.RecordBatch]:
        """The record starting at ``phy_offset`` as a one-row batch (None outside the valid range or in a missing
        commit-log file)."""
        columns = normalize_columns(columns)
        if phy_offset < self.store.min_phy_offset() or phy_offset >= self.store.recovery.valid_end or \
                self.store.commitlog.in_missing(np.array([phy_offset]))[0]:
            return None
        file_idx, pos = self.store.commitlog.locate(np.array([phy_offset]))
        fields = self.store.commitlog.read_fields(int(file_idx[0]), pos, what=" (lookup by physical offset)")
        return build_batch(self.store.commitlog.queue.buffer(int(file_idx[0])), fields, columns)

    def complete_queue_end(self, topic: str, queue_id: int, max_back: int = 1024) -> int:
        """The queue's end for a live store: the offset after the last unit whose record is complete and
        passes RocketMQ's checks (a writer may be halfway through the tail). Looks back at most ``max_back``."""
        cq = self.queues.consume_queue(topic, queue_id)
        hi = cq.max_offset
        floor = max(cq.first_offset, hi - max_back)
        while hi > floor:
            unit = cq.units(hi - 1, hi)[0]
            if self._record_complete(int(unit["phy_offset"]), int(unit["size"])):
                return hi
            hi -= 1
        return hi

    def _record_complete(self, phy_offset: int, size: int) -> bool:
        if size == L.CQ_FILLER_SIZE:
            return True
        if phy_offset < self.store.min_phy_offset() or phy_offset + size > self.store.commitlog.queue.end_offset:
            return False
        file_idx, pos = self.store.commitlog.locate(np.array([phy_offset]))
        if file_idx[0] < 0:
            return True  # in a commit-log file missing between others: lost, never being written
        self.store.commitlog.queue.ensure_records(int(file_idx[0]), pos, np.array([size]))
        buf = self.store.commitlog.queue.buffer(int(file_idx[0]))
        fields = parse_records(buf, pos)
        if not fields.valid[0] or int(fields.total_size[0]) != size:
            return False
        return not self.store.commitlog.check_crcs(buf, fields)[0]

    def read_records_at(self, phy_offsets, columns=None) -> pa.Table:
        """Records at the given commit-log offsets (in the order given), each checked; offsets outside
        [min_phy_offset, valid end) or in a missing commit-log file are skipped (the broker finds no file there)."""
        columns = normalize_columns(columns)
        phy = np.asarray(phy_offsets, dtype=np.int64)
        phy = phy[(phy >= self.store.min_phy_offset()) & (phy < self.store.recovery.valid_end)]
        file_idx, pos = self.store.commitlog.locate(phy)
        if (file_idx < 0).any():
            held = file_idx >= 0
            phy, file_idx, pos = phy[held], file_idx[held], pos[held]
        batches, order = [], []
        for f in dict.fromkeys(file_idx.tolist()):
            sel = np.flatnonzero(file_idx == f)
            fields = self.store.commitlog.read_fields(f, pos[sel], what=" (lookup by physical offset)")
            batches.append(build_batch(self.store.commitlog.queue.buffer(f), fields, columns))
            order.append(sel)
        if not batches:
            return arrow_schema(columns).empty_table()
        table = pa.Table.from_batches(batches)
        grouped = np.concatenate(order)
        if (np.diff(grouped) < 0).any():  # rows were gathered file by file: put them back in the given order
            table = table.take(pa.array(np.argsort(grouped, kind="stable")))
        return table

    def store_time_at(self, phy_offset: int, size: int) -> int:
        """``pickupStoreTimestamp``: store time of the record at ``phy_offset``; -1 when not readable."""
        if phy_offset < self.store.min_phy_offset() or phy_offset + size > self.store.recovery.valid_end:
            return -1
        file_idx, pos = self.store.commitlog.locate(np.array([phy_offset]))
        if file_idx[0] < 0:
            return -1  # in a missing commit-log file
        self.store.commitlog.queue.ensure_records(int(file_idx[0]), pos, np.array([size]))
        buf = self.store.commitlog.queue.buffer(int(file_idx[0]))
        p = int(pos[0])
        if p + L.BORN_HOST_POSITION + L.IPV6_HOST_LENGTH + 8 > len(buf):
            return -1
        sysflag = int(read_be(buf, np.array([p + L.SYSFLAG_POSITION]), 4)[0])
        at = p + L.BORN_HOST_POSITION + L.host_length(sysflag, L.BORNHOST_V6_FLAG)
        return int(read_be(buf, np.array([at]), 8)[0])
