"""Commit-log-ordered reads that return exactly the rows of a consume-queue read.

A read of most of a store is fastest as a sequential scan of the commit log, split into stretches inside the
1 GiB files. A stretch starts at a record start (:meth:`OrderedScanner.record_start_at_or_after` finds one from
consume-queue units near any offset, checked against the record's own PHYSICALOFFSET), its records are found by
following TOTALSIZE (:func:`~..format.record_chain.chain_record_starts`), and only the records a queue read of the
same request returns are kept, decided on their headers:

* the record is no PREPARED or ROLLBACK transaction half (dispatch skips those);
* its (topic, queue id) is one of the ``selected`` queues;
* its QUEUEOFFSET lies in the queue's range: ``limits`` gives ``[lo, hi)`` for the queues whose range starts or
  ends inside the stretch (the planner knows where in the commit log each queue's range starts and ends); every
  record of any other selected queue in the stretch lies inside its range.

The QUEUEOFFSET test is what keeps out records past a queue's dispatched end (an undispatched tail, or a queue
whose units were lost while others went on) and records outside offset or time bounds; a tag filter checks the
real tag, as the queue read does after its hash test.
"""

from __future__ import annotations

import logging
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptRecordError, DataLossError
from ..files.mapped_file_queue import SEQUENTIAL_STEP
from ..format import layout as L
from ..format.codec import PROBLEM_DESCRIPTIONS, parse_records
from ..format.columns import build_batch, fixed_fields_for, normalize_columns, parse_and_decode_kept
from ..format.queue_test import QueueTest
from ..format.record_chain import CHAIN_BAD, CHAIN_BLANK, CHAIN_STOP, chain_record_starts
from ..format.subscription import Subscription
from .opened_store import OpenedStore
from .queue_set import QueueSet

log = logging.getLogger("rocketstore_spark")

DEFAULT_SCAN_ROWS = 32_768
PARSE_ROWS = 32_768  # records parsed and filtered at a time, at most
#: Record bytes parsed and filtered at a time, at most (one record at least): a chunk's columns are decoded in its
#: parsing pass into memory recycled from the chunks before (see ``columns.parse_and_decode``), which larger
#: chunks would not fit.
PARSE_BYTES = 8 << 20
FETCH_STEP = SEQUENTIAL_STEP  # bytes of a stretch fetched ahead of the walk (remote files)
#: Bytes of a stretch whose record starts are found at a time, then parsed and filtered: the walk loads the lines
#: of records of mixed sizes into the CPU's cache (see ``chain_record_starts``), where their parse finds them.
CHAIN_STEP = PARSE_BYTES


def parse_chunks(positions: np.ndarray):
    """``[a, b)`` index ranges of ascending record ``positions``: at most :data:`PARSE_ROWS` records and (but for
    a single record) :data:`PARSE_BYTES` from the first record's start to the next chunk's first."""
    a, n = 0, len(positions)
    while a < n:
        b = min(a + PARSE_ROWS, int(np.searchsorted(positions, positions[a] + PARSE_BYTES, side="left")))
        b = max(b, a + 1)
        yield a, b
        a = b


class OrderedScanner:
    """``scan_queue_records`` and ``record_start_at_or_after`` over the commit log of ``store``, whose record
    starts the units of its ``queues`` give."""

    def __init__(self, store: OpenedStore, queues: QueueSet):
        self.store = store
        self.queues = queues

    def scan_queue_records(self, start: int, end: int, selected, limits=(), *, tags=None, columns=None,
                           batch_rows: int = DEFAULT_SCAN_ROWS, verify_crc: bool = False,
                           fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """The rows a queue read of ``selected`` returns for the records in commit-log ``[start, end)``, in
        commit-log order. ``start`` is a record start; the stretch may run on into the next files (each file's
        part is scanned on its own, from the file's first record).

        ``selected``: ``(topic, queue ids)`` pairs (or a dict); ``limits``: ``(topic, queue id, lo, hi)``
        queue-offset ranges of the selected queues whose range does not cover the stretch (the other selected
        queues' records are all kept). ``tags`` is a subscription (the real tag is checked). A stretch whose
        commit-log file expired since it was planned is a :class:`DataLossError` (skipped with a warning when
        ``fail_on_data_loss`` is off), as the queue read's expired units are.
        """
        columns = normalize_columns(columns)
        sub = Subscription.parse(tags)
        want = columns if sub.is_all or "tags" in columns else columns + ("tags",)
        fixed = tuple(sorted(set(fixed_fields_for(want)) | {"queue_id", "queue_offset"}))
        test = QueueTest(selected, limits)
        size = self.store.commitlog.file_size
        while start < end:
            piece_end = min(end, start - start % size + size)
            yield from self._scan_file_part(start, piece_end, test, sub, columns, want, fixed, batch_rows,
                                            verify_crc, fail_on_data_loss)
            start = piece_end

    def _scan_file_part(self, start: int, end: int, test, sub, columns, want, fixed, batch_rows, verify_crc,
                        fail_on_data_loss) -> Iterator[pa.RecordBatch]:
        """The kept rows of commit-log ``[start, end)``: from a record start up to at most the end of its file."""
        oldest = self.store.min_phy_offset()
        if start < oldest:
            if fail_on_data_loss:
                raise DataLossError(f"commit-log offsets {start}..{end} planned for reading are gone (their "
                                    f"commit-log file expired; the commit log now starts at {oldest});"
                                    " pass fail_on_data_loss=False to skip expired messages")
            log.warning("skipping commit-log offsets %d..%d: their commit-log file expired", start, end)
            return
        if self.store.commitlog.in_missing(np.array([start]))[0]:
            # a stretch in a commit-log file missing between others: its records are lost (the planner skips such
            # files and reports the queues' lost units; a caller naming the stretch itself is told here)
            size = self.store.commitlog.file_size
            name = self.store.commitlog.queue.directory / L.offset_to_file_name(start - start % size)
            if fail_on_data_loss:
                raise DataLossError(f"commit-log offsets {start}..{end} are in {name}, which is missing (a copy with "
                                    "holes); pass fail_on_data_loss=False to skip its messages")
            log.warning("skipping commit-log offsets %d..%d: %s is missing", start, end, name)
            return
        index, base, buf = self._stretch_file(start)
        stop = min(end - base, len(buf))
        where = str(self.store.commitlog.queue.files[index].path)
        pos = start - base
        while True:
            # a step of the stretch at a time: a remote file fetches the next steps while this one is decoded
            step_stop = min(pos + CHAIN_STEP, stop)
            self.store.commitlog.queue.ensure(index, pos, step_stop + 8, ahead=FETCH_STEP, until=stop + 8)
            positions, end_pos, kind = chain_record_starts(buf, pos, step_stop)
            self.store.commitlog.queue.ensure_records(index, positions[-1:])  # the last record may end past the step
            if kind == CHAIN_STOP and end_pos < stop:
                yield from self._stretch_rows(buf, index, where, positions, end_pos, test, sub, columns, want,
                                              fixed, batch_rows, verify_crc)
                pos = end_pos
                continue
            if kind != CHAIN_STOP and kind != CHAIN_BAD and base + end_pos < min(end, self.store.recovery.valid_end) \
                    and not (kind == CHAIN_BLANK and stop >= len(buf) - L.END_FILE_MIN_BLANK_LENGTH):
                raise CorruptRecordError("commit log stops early: no record where one was expected before offset "
                                         f"{end}", where, end_pos)
            yield from self._stretch_rows(buf, index, where, positions, end_pos, test, sub, columns, want, fixed,
                                          batch_rows, verify_crc)
            return

    def _stretch_rows(self, buf, index, where, positions, end_pos, test, sub, columns, want, fixed, batch_rows,
                      verify_crc) -> Iterator[pa.RecordBatch]:
        """The rows ``test`` keeps of the records at ``positions`` (chained, the last one ending by ``end_pos``):
        a chunk at a time, each record parsed, tested and, when kept, decoded in one native pass."""
        for a, b in parse_chunks(positions):
            chunk = positions[a:b]
            # every byte of the stretch is touched (the record-start search reads them all): counted as read, so
            # that a worker scanning a 1 GiB file stretch after stretch lets its pages go (see note_read)
            span_end = int(positions[b]) if b < len(positions) else end_pos
            self.store.commitlog.queue.note_read(index, span_end - int(chunk[0]))
            fields, keep = parse_and_decode_kept(buf, chunk, want, fixed, test)
            bad = np.flatnonzero(~fields.valid)
            if len(bad):
                i = int(bad[0])
                raise CorruptRecordError(
                    f"bad commit-log record: {PROBLEM_DESCRIPTIONS.get(int(fields.problem[i]), 'invalid record')}",
                    where, int(chunk[i]))
            if not len(keep):
                continue
            if len(keep) < len(chunk):
                decoded, fields = fields.decoded, fields.take(keep)
                fields.decoded = decoded
            if verify_crc:
                failed = self.store.commitlog.check_crcs(buf, fields)
                if failed.any():
                    at = int(fields.position[int(np.flatnonzero(failed)[0])])
                    raise CorruptRecordError(f"bad commit-log record: {PROBLEM_DESCRIPTIONS[5]}", where, at)
            batch = build_batch(buf, fields, want, where)
            if not sub.is_all:
                batch = batch.filter(pc.fill_null(pc.is_in(batch.column("tags"), value_set=pa.array(sub.tags)),
                                                  False))
                if want != columns:
                    batch = batch.select(list(columns))
            for b in range(0, batch.num_rows, max(batch_rows, 1)):
                yield batch.slice(b, batch_rows)

    def commit_log_file_starts(self) -> list[int]:
        """The first offset of every commit-log file, oldest first (each holds ``sizes.commit_log_file_size``)."""
        return [f.from_offset for f in self.store.commitlog.queue.files]

    def _stretch_file(self, start: int):
        """(file index, its first offset, its bytes) of the commit-log file holding ``start``."""
        file_idx, _ = self.store.commitlog.locate(np.array([start]))
        index = int(file_idx[0])
        if index < 0:
            raise CorruptRecordError(f"commit-log offset {start} is in no commit-log file (expired?)",
                                     self.store.commitlog.queue.directory, start)
        return index, self.store.commitlog.queue.files[index].from_offset, self.store.commitlog.queue.buffer(index)

    def record_start_at_or_after(self, phy_offset: int, limit: int, probes, near: int = 0) -> Optional[int]:
        """A record start in ``[phy_offset, limit)`` taken from the units of the ``probes`` queues
        ((topic, queue id) pairs: a search each), the nearest one found, or the first found within ``near``
        bytes of ``phy_offset`` (the rest are not searched); None when no probe has a unit there. The record
        found is checked: it parses and its PHYSICALOFFSET is where it lies."""
        best = None
        for topic, queue_id in probes:
            if best is not None and best - phy_offset <= near:
                break
            cq = self.queues.consume_queue(topic, queue_id)
            at = cq.first_at_or_past(phy_offset)
            if at >= cq.max_offset:
                continue
            unit = cq.units(at, at + 1)
            if not len(unit) or int(unit["size"][0]) == L.CQ_FILLER_SIZE:
                continue
            phy = int(unit["phy_offset"][0])
            if phy < limit and (best is None or phy < best):
                best = phy
        if best is None:
            return None
        file_idx, pos = self.store.commitlog.locate(np.array([best]))
        if file_idx[0] < 0:
            return None
        self.store.commitlog.queue.ensure_records(int(file_idx[0]), pos)
        fields = parse_records(self.store.commitlog.queue.buffer(int(file_idx[0])), pos, ("phy_offset",))
        return best if fields.valid[0] and int(fields.phy_offset[0]) == best else None
