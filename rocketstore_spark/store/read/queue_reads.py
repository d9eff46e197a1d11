"""Reading consume queues: messages of queue-offset ranges, optionally tag-filtered, as Arrow batches.

A mixin of :class:`~rocketstore_spark.store.store.RocketStore`; it relies on the facade's recovered consume
queues and commit log. A tag filter tests the consume queue's 20-byte units first and decodes only the records
whose hash matched, then checks their real tag.
"""

from __future__ import annotations

import logging
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptRecordError, DataLossError
from ..files.consume_queue import Subscription
from ..format import layout as L
from ..format.columns import build_batch, fixed_fields_for, normalize_columns

log = logging.getLogger("rocketstore_spark")

DEFAULT_BATCH_ROWS = 10_000
FAULT_WINDOW = 64 << 10  # bytes the kernel maps around a touched page of a file (fault-around): what RSS grows by
SCATTER_WINDOWS = 1024  # windows one decoded piece may touch, however scattered its records
COPY_BYTES = 64 << 20  # scattered records are copied out of the commit log up to this many bytes at a time
# A tag read decodes its hash matches once several batches' worth have gathered: each decode costs a fixed
# amount per commit-log file the matches fall in, and selective matches spread over every file. The byte cap
# bounds the memory of one decode (the consume-queue units give each record's size).
TAG_DECODE_BATCHES = 4
TAG_DECODE_BYTES = 64 << 20


class QueueReads:
    """``read_queue`` / ``read_queues`` for the store facade."""

    def read_queue(self, topic: str, queue_id: int, start: Optional[int] = None, end: Optional[int] = None,
                   tags=None, columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS, verify_crc: bool = False,
                   fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """Messages of one queue in queue-offset order, as RecordBatches of about ``batch_rows`` rows.

        ``tags`` is a subscription expression: units are filtered on the consume-queue hash before any
        commit-log byte is read, then the real tag is checked. ``columns`` limits what is decoded.
        """
        yield from self.read_queues([(topic, queue_id, start, end)], tags, columns, batch_rows=batch_rows,
                                    verify_crc=verify_crc, fail_on_data_loss=fail_on_data_loss)

    def read_queues(self, ranges, tags=None, columns=None, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                    verify_crc: bool = False, fail_on_data_loss: bool = True) -> Iterator[pa.RecordBatch]:
        """Messages of several ``(topic, queue_id, start, end)`` ranges (None: the queue's edges).

        Without tags each range is read in queue-offset order; short ranges (fewer than ``batch_rows``
        messages: a micro-batch spread over thousands of queues) and, with tags, the hash matches of all ranges
        are gathered until about a batch is ready and decoded together (per commit-log file), so such reads
        decode a few large batches instead of many small ones; rows of one queue keep their queue-offset order.
        """
        columns = normalize_columns(columns)
        sub = Subscription.parse(tags)
        if not sub.is_all:
            yield from self._read_tag_matches(ranges, sub, columns, batch_rows, verify_crc, fail_on_data_loss)
            return
        pending: list = []  # (consume queue, queue offsets, units) of short ranges, decoded together
        gathered = gathered_bytes = 0
        for topic, queue_id, start, end in ranges:
            cq, lo, hi = self._clamped_range(topic, queue_id, start, end, fail_on_data_loss)
            if 0 < hi - lo < batch_rows:
                # a short range (a micro-batch spread over many queues): decoded with the next ones, as matches are
                units = cq.units(lo, hi)
                pending.append((cq, np.arange(lo, lo + len(units), dtype=np.int64), units))
                gathered += len(units)
                gathered_bytes += int(units["size"].sum(dtype=np.int64))
                if gathered >= batch_rows or gathered_bytes >= TAG_DECODE_BYTES:
                    yield from self._read_units(pending, columns, sub, batch_rows, verify_crc, fail_on_data_loss,
                                                decode_rows=gathered)
                    pending, gathered, gathered_bytes = [], 0, 0
                continue
            step = max(batch_rows, 1) * 4
            while lo < hi:
                stop = min(hi, lo + step)
                units = cq.units(lo, stop)
                group = (cq, np.arange(lo, lo + len(units), dtype=np.int64), units)
                yield from self._read_units([group], columns, sub, batch_rows, verify_crc, fail_on_data_loss)
                lo = stop
        if pending:
            yield from self._read_units(pending, columns, sub, batch_rows, verify_crc, fail_on_data_loss,
                                        decode_rows=gathered)

    def _read_tag_matches(self, ranges, sub, columns, batch_rows, verify_crc, fail_on_data_loss):
        """A tag filter: one pass over the 20-byte units (:meth:`_tag_groups`: short planned ranges in runs);
        the matching records are decoded together once several batches (or TAG_DECODE_BYTES) have gathered."""
        pending: list = []
        gathered = gathered_bytes = 0
        for group in self._tag_groups(ranges, sub, fail_on_data_loss):
            pending.append(group)
            gathered += len(group[1])
            gathered_bytes += int(group[2]["size"].sum(dtype=np.int64))
            if gathered >= batch_rows * TAG_DECODE_BATCHES or gathered_bytes >= TAG_DECODE_BYTES:
                yield from self._read_units(pending, columns, sub, batch_rows, verify_crc, fail_on_data_loss,
                                            decode_rows=gathered)
                pending, gathered, gathered_bytes = [], 0, 0
        if pending:
            yield from self._read_units(pending, columns, sub, batch_rows, verify_crc, fail_on_data_loss,
                                        decode_rows=gathered)

    def _clamped_range(self, topic, queue_id, start, end, fail_on_data_loss):
        """(consume queue, first, end) of a requested range; a start before what is left is data loss, and so is
        a planned queue that is gone."""
        if end is not None and self.planned_to(topic, queue_id, end) and self._queue(topic, int(queue_id)) is None:
            raise DataLossError(f"{topic}/{queue_id}: offsets up to {end} were planned but the consume queue is no "
                                f"longer in {self.root / L.CONSUMEQUEUE_DIR} (removed or replaced since planning)")
        cq = self.consume_queue(topic, queue_id)
        first = self.min_offset(topic, queue_id)
        lo = first if start is None else max(int(start), cq.first_offset)
        hi = cq.max_offset if end is None else min(int(end), cq.max_offset)
        if start is not None and int(start) < first and fail_on_data_loss and int(start) < hi:
            raise DataLossError(
                f"{topic}/{queue_id}: offsets {start}..{first} are gone (their commit-log files expired); "
                f"start at {first} or pass fail_on_data_loss=False to skip them")
        if end is None or int(end) > hi:
            lost = self.lost_range_of(cq)
            if lost is not None and lo < (lost.end if end is None else min(int(end), lost.end)):
                if fail_on_data_loss:
                    raise DataLossError(f"lost messages: {lost.describe()}; read up to offset {lost.start} or pass "
                                        "fail_on_data_loss=False to read what is left")
                if (topic, queue_id) not in self._loss_reported:
                    self._loss_reported.add((topic, queue_id))
                    log.warning("lost messages, skipped (fail_on_data_loss=False): %s", lost.describe())
        return cq, lo, hi

    def _live_rows(self, groups, fail_on_data_loss) -> tuple:
        """(commit-log offsets, sizes, queue offsets, group index) of the units of ``groups`` to decode (already
        past the tag-hash test): not fillers, not expired (an error unless ``fail_on_data_loss`` is off), never
        past the commit log's valid end (an error). Checked for all groups at once: a tag read over thousands of
        queues brings a group per queue with a match."""
        lengths = [len(units) for _, _, units in groups]
        phy = np.concatenate([units["phy_offset"] for _, _, units in groups]).astype(np.int64)
        size = np.concatenate([units["size"] for _, _, units in groups]).astype(np.int64)
        offsets = np.concatenate([np.asarray(o, dtype=np.int64) for _, o, _ in groups])
        group_of_row = np.repeat(np.arange(len(groups)), lengths)
        keep = size != L.CQ_FILLER_SIZE
        valid_end = self.recovery.valid_end
        past = keep & (phy + size > valid_end)
        if past.any():
            i = int(np.flatnonzero(past)[0])
            cq = groups[int(group_of_row[i])][0]
            path, at = cq.unit_location(int(offsets[i]))
            raise CorruptRecordError(
                f"consume-queue unit {int(offsets[i])} of {cq.topic}/{cq.queue_id} points at commit-log offset "
                f"{int(phy[i])} (+{int(size[i])} bytes), past the commit log's valid end {valid_end}", path, at)
        gone = keep & (phy < self.min_phy_offset())
        if gone.any():
            lost = np.flatnonzero(gone)
            if fail_on_data_loss:
                cq = groups[int(group_of_row[lost[0]])][0]
                raise DataLossError(
                    f"{cq.topic}/{cq.queue_id} offset {int(offsets[lost[0]])}: commit-log offset "
                    f"{int(phy[lost[0]])} is before the oldest commit-log file ({self.min_phy_offset()}); pass "
                    "fail_on_data_loss=False to skip expired messages")
            for g in np.unique(group_of_row[lost]).tolist():
                mine = lost[group_of_row[lost] == g]
                cq = groups[g][0]
                log.warning("%s/%s: skipping %d messages between offsets %d and %d whose commit-log files expired "
                            "(fail_on_data_loss=False)", cq.topic, cq.queue_id, len(mine), int(offsets[mine[0]]),
                            int(offsets[mine[-1]]))
            keep &= ~gone
        return phy[keep], size[keep], offsets[keep], group_of_row[keep]

    def _read_units(self, groups, columns, sub, batch_rows, verify_crc, fail_on_data_loss, decode_rows=None):
        """Decode the units of ``groups`` ((consume queue, queue offsets, units) each, every unit already past
        the tag-hash test) ``decode_rows`` at a time per commit-log file, yielding batches of at most
        ``batch_rows``; the real tag is checked on the decoded records."""
        phy, size, unit_offsets, group_of_row = self._live_rows(groups, fail_on_data_loss)
        cqs = [cq for cq, _, _ in groups]
        lmq = any(self.is_lmq(cq.topic) for cq in cqs)  # rows of LMQ units are overlaid (variant_reads)
        batch_cq = any(getattr(cq, "is_batch", False) for cq in cqs)  # inner batches unwrapped (variant_reads)
        what = " for " + ", ".join(dict.fromkeys(f"{cq.topic}/{cq.queue_id}" for cq, _, _ in groups))
        want = columns if sub.is_all or "tags" in columns else columns + ("tags",)
        fixed = None if batch_cq else fixed_fields_for(want)
        file_idx, pos = self.commitlog.locate(phy)
        step = max(batch_rows if decode_rows is None else decode_rows, 1)
        for chunk_start in range(0, len(phy), step):
            part = slice(chunk_start, chunk_start + step)
            chunk_files = file_idx[part]
            single = chunk_files.min() == chunk_files.max()
            for f in chunk_files[:1] if single else np.unique(chunk_files):
                # most chunks of a full read lie in one commit-log file: no per-file selection to compute
                in_file = (np.arange(len(chunk_files)) if single else np.flatnonzero(chunk_files == f)) + chunk_start
                for batch in self._file_batches(int(f), in_file, pos, size, verify_crc, what, fixed, want, cqs,
                                                group_of_row, unit_offsets, lmq, batch_cq):
                    if not sub.is_all:
                        batch = batch.filter(pc.fill_null(pc.is_in(batch.column("tags"),
                                                                   value_set=pa.array(sub.tags)), False))
                        if want != columns:
                            batch = batch.select(list(columns))
                    for start in range(0, batch.num_rows, max(batch_rows, 1)):
                        yield batch.slice(start, batch_rows)

    def _file_batches(self, f, rows, pos, size, verify_crc, what, fixed, want, cqs, group_of_row, unit_offsets, lmq,
                      batch_cq) -> Iterator[pa.RecordBatch]:
        """Batches of the records ``rows`` of commit-log file ``f``. Records scattered over the file (a selective
        read: most of them alone in their page window) are copied with a read each and decoded from the copy;
        records close together are decoded through the file's map, piece by piece, the pages they fault in
        counted so that a task's resident share of the commit log is let go in bounded steps."""
        if not (lmq or batch_cq) and _scattered(pos[rows], size[rows]):
            copied = self.commitlog.queue.copy_ranges(f, pos[rows], size[rows])
            if copied is not None:  # None: a remote file (its map fetches just these ranges)
                fields = self.commitlog.read_fields(f, pos[rows], size[rows], verify_crc, what, fixed, copied=copied)
                yield build_batch(copied, fields, want, str(self.commitlog.queue.files[f].path))
                return
        for piece, windows in _resident_pieces(pos, rows):
            yield self._decode_piece(f, piece, pos, size, verify_crc, what, fixed, want, cqs, group_of_row,
                                     unit_offsets, lmq, batch_cq)
            # the kernel maps a window around each touched page: that is what the piece made resident
            self.commitlog.queue.note_read(f, windows * FAULT_WINDOW)

    def _decode_piece(self, f, rows, pos, size, verify_crc, what, fixed, want, cqs, group_of_row, unit_offsets, lmq,
                      batch_cq) -> pa.RecordBatch:
        """The batch of the records ``rows`` of commit-log file ``f`` (inner batches unwrapped, LMQ rows overlaid)."""
        buf, path = self.commitlog.queue.buffer(f), self.commitlog.queue.files[f].path
        fields = self.commitlog.read_fields(f, pos[rows], size[rows], verify_crc, what, fixed)
        if batch_cq:
            fields = self._unwrap_inner(buf, fields, cqs, group_of_row[rows], unit_offsets[rows], path)
        batch = build_batch(buf, fields, want, str(path))
        if lmq:
            batch = self._lmq_overlay_fields(batch, buf, fields, cqs, group_of_row[rows], unit_offsets[rows])
        return batch


def _scattered(positions: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether records are better copied than mapped: on average fewer than two per fault-around window, and at
    most :data:`COPY_BYTES` in all."""
    if not len(positions) or int(sizes.min()) <= 0 or int(sizes.sum()) > COPY_BYTES:
        # a unit's size that no record has (a damaged unit) is left to the map path, whose parse names the record
        return False
    return len(np.unique(positions // FAULT_WINDOW)) * 2 > len(positions)


def _resident_pieces(pos: np.ndarray, rows: np.ndarray):
    """``rows`` in pieces touching at most :data:`SCATTER_WINDOWS` fault-around windows each, with the number
    of windows each touches: records close together stay one piece, scattered ones (a task over thousands of
    queues) are decoded a few hundred at a time, so the mapped pages a decode holds stay bounded."""
    windows = np.unique(pos[rows] // FAULT_WINDOW)
    if len(windows) <= SCATTER_WINDOWS:
        yield rows, len(windows)
        return
    for piece in np.array_split(rows, -(-len(windows) // SCATTER_WINDOWS)):
        yield piece, len(np.unique(pos[piece] // FAULT_WINDOW))
