"""Reading consume queues: messages of queue-offset ranges, optionally tag-filtered, as Arrow batches.

A :class:`QueueReader` reads the queues of a :class:`~.queue_set.QueueSet` through the commit log of their
:class:`~.opened_store.OpenedStore`; what a storage variant adds (inner batches unwrapped, LMQ rows overlaid) is
its :class:`~.variant_reads.VariantReads`'. A tag filter tests the consume queue's 20-byte units first and
decodes only the records whose hash matched, then checks their real tag.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptRecordError, DataLossError
from ..format import layout as L
from ..format.columns import build_batch, fixed_fields_for, normalize_columns
from ..format.subscription import Subscription
from .opened_store import OpenedStore
from .planned_units import PlannedUnits
from .queue_set import QueueSet
from .records import DEFAULT_BATCH_ROWS
from .variant_reads import VariantReads

log = logging.getLogger("rocketstore_spark")

FAULT_WINDOW = 64 << 10  # bytes the kernel maps around a touched page of a file (fault-around): what RSS grows by
SCATTER_WINDOWS = 1024  # windows one decoded piece may touch, however scattered its records
COPY_BYTES = 64 << 20  # scattered records are copied out of the commit log up to this many bytes at a time
# A tag read decodes its hash matches once several batches' worth have gathered: each decode costs a fixed
# amount per commit-log file the matches fall in, and selective matches spread over every file. The byte cap
# bounds the memory of one decode (the consume-queue units give each record's size).
TAG_DECODE_BATCHES = 4
TAG_DECODE_BYTES = 64 << 20


@dataclass(frozen=True)
class DecodePlan:
    """What decoding the live units of a gathered read needs, whichever commit-log file the records are in: their
    positions and sizes (``pos``, ``size``: per row), the queue each row's unit came from (``cqs[group_of_row]``)
    and its queue offset, the columns to build, the fixed fields they need (None: all), and whether rows of LMQ or
    batch consume queues are among them."""

    pos: np.ndarray
    size: np.ndarray
    verify_crc: bool
    what: str  # names the queues for error messages
    fixed: Optional[tuple]
    want: tuple
    cqs: list
    group_of_row: np.ndarray
    unit_offsets: np.ndarray
    lmq: bool
    batch_cq: bool


class QueueReader:
    """``read_queue`` / ``read_queues`` over ``queues`` of ``store``."""

    def __init__(self, store: OpenedStore, queues: QueueSet, planned: PlannedUnits, variants: VariantReads):
        self.store = store
        self.queues = queues
        self.planned = planned
        self.variants = variants

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
            cq, lo, hi = self.queues.clamped_range(topic, queue_id, start, end, fail_on_data_loss)
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
        """A tag filter: one pass over the 20-byte units (:meth:`.PlannedUnits.tag_groups`: short planned ranges
        in runs); the matching records are decoded together once several batches (or TAG_DECODE_BYTES) have gathered."""
        pending: list = []
        gathered = gathered_bytes = 0
        for group in self.planned.tag_groups(ranges, sub, fail_on_data_loss):
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
        valid_end = self.store.recovery.valid_end
        past = keep & (phy + size > valid_end)
        if past.any():
            i = int(np.flatnonzero(past)[0])
            cq = groups[int(group_of_row[i])][0]
            path, at = cq.unit_location(int(offsets[i]))
            raise CorruptRecordError(
                f"consume-queue unit {int(offsets[i])} of {cq.topic}/{cq.queue_id} points at commit-log offset "
                f"{int(phy[i])} (+{int(size[i])} bytes), past the commit log's valid end {valid_end}", path, at)
        gone = keep & (phy < self.store.min_phy_offset())
        if gone.any():
            lost = np.flatnonzero(gone)
            if fail_on_data_loss:
                cq = groups[int(group_of_row[lost[0]])][0]
                raise DataLossError(
                    f"{cq.topic}/{cq.queue_id} offset {int(offsets[lost[0]])}: commit-log offset "
                    f"{int(phy[lost[0]])} is before the oldest commit-log file ({self.store.min_phy_offset()}); pass "
                    "fail_on_data_loss=False to skip expired messages")
            for g in np.unique(group_of_row[lost]).tolist():
                mine = lost[group_of_row[lost] == g]
                cq = groups[g][0]
                log.warning("%s/%s: skipping %d messages between offsets %d and %d whose commit-log files expired "
                            "(fail_on_data_loss=False)", cq.topic, cq.queue_id, len(mine), int(offsets[mine[0]]),
                            int(offsets[mine[-1]]))
            keep &= ~gone
        if self.store.commitlog.missing:
            # units pointing into commit-log files missing between the first and the last: lost messages, an error
            # unless ``fail_on_data_loss`` is off (the queue's range check named them, or its planner did)
            missing = keep & self.store.commitlog.in_missing(phy)
            if missing.any() and fail_on_data_loss:
                cq = groups[int(group_of_row[np.flatnonzero(missing)[0]])][0]
                lost = self.queues.lost_ranges_of(cq, past_end=False)
                raise DataLossError(f"lost messages: {'; '.join(r.describe() for r in lost)}; pass "
                                    "fail_on_data_loss=False to read what is left")
            keep &= ~missing
        return phy[keep], size[keep], offsets[keep], group_of_row[keep]

    def _read_units(self, groups, columns, sub, batch_rows, verify_crc, fail_on_data_loss, decode_rows=None):
        """Decode the units of ``groups`` ((consume queue, queue offsets, units) each, every unit already past
        the tag-hash test) ``decode_rows`` at a time per commit-log file, yielding batches of at most
        ``batch_rows``; the real tag is checked on the decoded records."""
        phy, size, unit_offsets, group_of_row = self._live_rows(groups, fail_on_data_loss)
        cqs = [cq for cq, _, _ in groups]
        lmq = any(self.variants.is_lmq(cq.topic) for cq in cqs)  # rows of LMQ units are overlaid (variant_reads)
        batch_cq = any(cq.is_batch for cq in cqs)  # inner batches unwrapped (variant_reads)
        what = " for " + ", ".join(dict.fromkeys(f"{cq.topic}/{cq.queue_id}" for cq, _, _ in groups))
        want = columns if sub.is_all or "tags" in columns else columns + ("tags",)
        fixed = None if batch_cq else fixed_fields_for(want)
        file_idx, pos = self.store.commitlog.locate(phy)
        plan = DecodePlan(pos, size, verify_crc, what, fixed, want, cqs, group_of_row, unit_offsets, lmq, batch_cq)
        step = max(batch_rows if decode_rows is None else decode_rows, 1)
        for chunk_start in range(0, len(phy), step):
            part = slice(chunk_start, chunk_start + step)
            chunk_files = file_idx[part]
            single = chunk_files.min() == chunk_files.max()
            for f in chunk_files[:1] if single else np.unique(chunk_files):
                # most chunks of a full read lie in one commit-log file: no per-file selection to compute
                in_file = (np.arange(len(chunk_files)) if single else np.flatnonzero(chunk_files == f)) + chunk_start
                for batch in self._file_batches(int(f), in_file, plan):
                    if not sub.is_all:
                        keep = pc.fill_null(pc.is_in(batch.column("tags"), value_set=pa.array(sub.tags)), False)
                        if not pc.all(keep).as_py():  # only a tag-hash collision fails: no copy of the usual batch
                            batch = batch.filter(keep)
                        if want != columns:
                            batch = batch.select(list(columns))
                    for start in range(0, batch.num_rows, max(batch_rows, 1)):
                        yield batch.slice(start, batch_rows)

    def _file_batches(self, f: int, rows: np.ndarray, plan: DecodePlan) -> Iterator[pa.RecordBatch]:
        """Batches of the records ``rows`` of commit-log file ``f``. Records scattered over the file (a selective
        read: most of them alone in their page window) are copied with a read each and decoded from the copy;
        records close together are decoded through the file's map, piece by piece, the pages they fault in
        counted so that a task's resident share of the commit log is let go in bounded steps."""
        commitlog, pos, size = self.store.commitlog, plan.pos, plan.size
        if not (plan.lmq or plan.batch_cq) and _scattered(pos[rows], size[rows]):
            copied = commitlog.queue.copy_ranges(f, pos[rows], size[rows])
            if copied is not None:  # None: a remote file (its map fetches just these ranges)
                fields = commitlog.read_fields(f, pos[rows], size[rows], plan.verify_crc, plan.what, plan.fixed,
                                               copied=copied, decode=plan.want)
                yield build_batch(copied, fields, plan.want, str(commitlog.queue.files[f].path))
                return
        for piece, windows in _resident_pieces(pos, rows):
            yield self._decode_piece(f, piece, plan)
            # the kernel maps a window around each touched page: that is what the piece made resident
            commitlog.queue.note_read(f, windows * FAULT_WINDOW)

    def _decode_piece(self, f: int, rows: np.ndarray, plan: DecodePlan) -> pa.RecordBatch:
        """The batch of the records ``rows`` of commit-log file ``f`` (inner batches unwrapped, LMQ rows overlaid)."""
        commitlog = self.store.commitlog
        buf, path = commitlog.queue.buffer(f), commitlog.queue.files[f].path
        # the columns are decoded in the parsing pass, except where inner batches replace the records parsed
        fields = commitlog.read_fields(f, plan.pos[rows], plan.size[rows], plan.verify_crc, plan.what, plan.fixed,
                                       decode=None if plan.batch_cq else plan.want)
        if plan.batch_cq:
            fields = self.variants.unwrap_inner(buf, fields, plan.cqs, plan.group_of_row[rows],
                                                plan.unit_offsets[rows], path)
        batch = build_batch(buf, fields, plan.want, str(path))
        if plan.lmq:
            batch = self.variants.lmq_overlay_fields(batch, buf, fields, plan.cqs, plan.group_of_row[rows],
                                                     plan.unit_offsets[rows])
        return batch


def _scattered(positions: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether records are better copied than mapped: on average fewer than two per fault-around window, and at
    most :data:`COPY_BYTES` in all."""
    if not len(positions) or int(sizes.min()) <= 0 or int(sizes.sum()) > COPY_BYTES:
        # a unit's size that no record has (a damaged unit) is left to the map path, whose parse names the record
        return False
    return len(_windows(positions)) * 2 > len(positions)


def _resident_pieces(pos: np.ndarray, rows: np.ndarray):
    """``rows`` in pieces touching at most :data:`SCATTER_WINDOWS` fault-around windows each, with the number
    of windows each touches: records close together stay one piece, scattered ones (a task over thousands of
    queues) are decoded a few hundred at a time, so the mapped pages a decode holds stay bounded."""
    windows = _windows(pos[rows])
    if len(windows) <= SCATTER_WINDOWS:
        yield rows, len(windows)
        return
    for piece in np.array_split(rows, -(-len(windows) // SCATTER_WINDOWS)):
        yield piece, len(_windows(pos[piece]))


def _windows(positions: np.ndarray) -> np.ndarray:
    """The distinct fault-around windows the records at ``positions`` start in (a neighbour comparison where the
    positions ascend, as one queue's records do: no hashing of every position)."""
    windows = positions // FAULT_WINDOW
    if len(windows) > 1 and (windows[1:] >= windows[:-1]).all():
        return windows[np.concatenate(([True], windows[1:] != windows[:-1]))]
    return np.unique(windows)
