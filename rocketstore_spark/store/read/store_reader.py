"""``StoreReader``: the read engine over one RocketMQ store directory (commit log, consume queues, index, checkpoint).

Opening never modifies a byte. Recovery (the valid end of the commit log) runs lazily, the first time it is
needed. The writer (:mod:`.appender`) and the job tools build on this class; users reach it through the facade
:class:`~rocketstore_spark.store.store.RocketStore`, which also opens the writer.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError, InvalidArgumentError
from ..files.byte_source import as_path, is_remote
from ..files.checkpoint import Checkpoint, read_checkpoint
from ..files.commitlog import END_BLANK
from ..files.consume_queue import ConsumeQueue
from ..files.index_file import list_index_files
from ..files.known_end import known_end
from ..files.sizes import QueueDir, StoreSizes, cq_listing, detect_sizes
from ..files.store_location import resolve_store_root
from ..files.strays import StrayFile, warn_strays
from ..files.variant import (
    ROCKSDB_CQ,
    BrokerSettings,
    StoreVariant,
    commit_log_dir,
    detect_variant,
)
from ..format import layout as L
from ..format.codec import dispatch_tags_code, parse_records, read_be
from ..format.columns import arrow_schema, build_batch, normalize_columns
from .lazy_queues import LazyQueues
from .messages import GetMessageResult, MessageLookups
from .ordered_scan import OrderedScan
from .planned_units import PlannedUnits
from .queue_reads import DEFAULT_BATCH_ROWS, QueueReads
from .recovery import MODE_ABNORMAL, LostRange, RecoveryResult, recover, undispatched_records
from .variant_reads import VariantReads

log = logging.getLogger("rocketstore_spark")

REMOTE_QUEUE_OPENS = 16  # consume queues of a remote store opened concurrently


class StoreReader(LazyQueues, PlannedUnits, VariantReads, QueueReads, OrderedScan, MessageLookups):
    """Read-only view of a RocketMQ store (commit log, consume queues, index files, checkpoint)."""

    def __init__(self, root: Path, sizes: StoreSizes, check_crc_on_recover: bool = True,
                 valid_end: Optional[int] = None, variant: Optional[StoreVariant] = None, listing=None,
                 lazy_queues: bool = False, strays: Optional[list] = None,
                 settings: Optional[BrokerSettings] = None):
        self.root = as_path(root)
        self.sizes = sizes
        self.settings = BrokerSettings() if settings is None else settings
        self.variant = detect_variant(self.root, None, self.settings.dledger_self_id, self.settings.batch_topics) \
            if variant is None else variant
        self.check_crc_on_recover = check_crc_on_recover
        # entries that are no part of the store, skipped (a warning each; inspect and verify list them); a given
        # ``listing`` comes with the strays its listing found
        self.stray_files: list[StrayFile] = list(strays or [])
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._loss_reported: set = set()  # queues whose lost messages a read skipped with a warning
        self._index_files = None
        self.commitlog = self._open_commit_log()
        self.abort_present = (self.root / L.ABORT_FILE).exists()
        self._checkpoint = read_checkpoint(self.root / L.CHECKPOINT_FILE)
        self._queue_index: Optional[tuple] = None  # (queue count, topic → queue ids): see _queue_ids_by_topic
        # where normal recovery usually starts walking (the last commit-log file): young queues keep their units
        # pointing there from the end search, so recovery's hints need no second read of them
        files = self.commitlog.queue.files
        hint_from = files[-1].from_offset if files else None
        # a rocksdb-cq store's consumequeue/ is a RocksDB database, not queue directories; lazy readers list none
        if self.variant.has(ROCKSDB_CQ) or (lazy_queues and valid_end is not None):
            listing = []
        try:
            def open_queue(entry):
                directory, queue_files = entry
                topic = directory.topic if isinstance(directory, QueueDir) else as_path(directory).parent.name
                return ConsumeQueue(topic, int(directory.name), directory, sizes.consume_queue_file_size,
                                    queue_files, hint_from, strays=self.stray_files)

            entries = cq_listing(self.root, self.stray_files) if listing is None else listing
            # a remote queue's end search is a dozen round trips: many queues search at once (I/O, not the GIL)
            if self.commitlog.queue.remote:
                with ThreadPoolExecutor(REMOTE_QUEUE_OPENS) as pool:
                    opened = list(pool.map(open_queue, entries))
            else:
                opened = map(open_queue, entries)
            for cq in opened:
                self._queues[(cq.topic, cq.queue_id)] = cq
            self._open_variant_queues()
        except BaseException:
            self.close()  # the queues opened so far hold memory maps
            raise
        list_index_files(self.root / L.INDEX_DIR, self.stray_files)
        self._recovery: Optional[RecoveryResult] = None
        self._given_valid_end = valid_end
        # queues loaded when first named (a reader of a few queues of thousands lists only those); only with a
        # given valid end, since recovery needs every queue
        self._lazy_queues = lazy_queues and valid_end is not None
        self._planned_ends: dict[tuple[str, int], int] = {}  # see expect_queue_ends
        self._planned_starts: dict[tuple[str, int], int] = {}  # ... and the earliest planned start of each
        warn_strays(self.stray_files)

    @classmethod
    def open(cls, path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
             index_max_entries=None, check_crc_on_recover: bool = True, valid_end: Optional[int] = None,
             variant=None, lazy_queues: bool = False, settings: Optional[BrokerSettings] = None,
             fs_options=None, trust_recorded_end: bool = False):
        """Open the store at ``path`` (a local path or a remote URI, see :mod:`..files.remote_fs`; ``fs_options``
        configure its filesystem) for reading.

        Sizes are detected from the files; pass them when a store has none of a kind or detection is
        ambiguous. ``valid_end`` skips recovery when the caller already knows the commit log's valid end; with
        it and the consume-queue file size, ``lazy_queues`` lists no queue up front: each is loaded when first
        named (:meth:`topics` then knows only those), for readers of a few queues of thousands. ``variant`` (see
        :func:`~..files.variant.parse_variant`) names the storage variant where the files leave it open; by
        default it is detected. ``settings`` (:class:`~..files.variant.BrokerSettings`) are the broker settings
        the files leave open. ``trust_recorded_end`` takes the commit log's end from the record rocketstore's
        last writer left (:mod:`..files.known_end`) when it still holds, instead of recovery's walk.
        """
        root = resolve_store_root(path, fs_options)
        settings = BrokerSettings() if settings is None else settings
        found = detect_variant(root, variant, settings.dledger_self_id, settings.batch_topics)
        lazy = lazy_queues and valid_end is not None and consume_queue_file_size is not None
        strays: list = []  # listed once: size detection and the queues share the listing and what it skipped
        listing = [] if lazy or found.has(ROCKSDB_CQ) else cq_listing(root, strays)
        sizes = detect_sizes(root, commit_log_file_size, consume_queue_file_size, index_hash_slots,
                             index_max_entries, log_dir=commit_log_dir(root, found), listing=listing)
        if trust_recorded_end and valid_end is None and found.is_default and not is_remote(root):
            # the end rocketstore's last writer recorded, while nothing recovery looks at changed: no walk
            valid_end = known_end(root, sizes)
        return cls(root, sizes, check_crc_on_recover, valid_end, found, listing, lazy, strays, settings)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Release memory maps."""
        self.commitlog.queue.close()
        for q in self._queues.values():
            q.files.close()
        for f in self._index_files or []:
            f.close()
        self._index_files = None
        self._close_variant()

    # --- recovery ---------------------------------------------------------------------------------------

    @property
    def recovery(self) -> RecoveryResult:
        """How the real store would recover this directory (computed once)."""
        if self._recovery is None:
            queues = list(self._queues.values())
            if self._given_valid_end is not None:
                for q in queues:
                    q.truncate_at_phy(self._given_valid_end)
                self._recovery = RecoveryResult("given", -1, self._given_valid_end)
            else:
                self._recovery = recover(self.commitlog, queues, self._checkpoint, self.abort_present,
                                         self.check_crc_on_recover, self._dispatched())
                start = self._redispatch_from(self._recovery.mode == MODE_ABNORMAL)
                # what re-dispatch indexes: every record recovery walked after a crash, else from where it starts
                self._recovery.reindex_from = 0 if self._recovery.mode == MODE_ABNORMAL else start
                if start is not None:
                    self._redispatch(self._recovery, start)
        return self._recovery

    def _redispatch(self, result: RecoveryResult, start: int) -> None:
        """Add the consume-queue units opening would write for recovered records at or past ``start`` that their
        queues lack."""
        for walk, idx in undispatched_records(result, list(self._queues.values()), self._queue_lacks, start):
            buf = self.commitlog.queue.buffer(walk.file_index)
            cols = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "properties",
                    "storeTimestamp", "sysFlag")
            fields = walk.fields_at(idx)
            batch = build_batch(buf, fields, cols)
            ts = fields.store_timestamp
            for i, (row, store_ts) in enumerate(zip(batch.to_pylist(), ts)):
                key = (row["topic"], row["queueId"])
                cq = self._queues.get(key)
                if cq is None:
                    if self._unwritable_queue(row["topic"], walk, int(idx[i])):
                        return
                    cq = self._dispatch_queue(*key, row)
                    self._queues[key] = cq
                code = dispatch_tags_code(row["topic"], dict(row["properties"]), int(store_ts))
                if getattr(cq, "is_batch", False):
                    self._redispatch_batch(cq, row, code, int(store_ts))
                elif hasattr(cq, "put_dispatched"):  # RocksDB: keys by queue offset, holes where records were skipped
                    cq.put_dispatched(row["queueOffset"], row["commitLogOffset"], row["storeSize"], code, int(store_ts))
                elif row["queueOffset"] == cq.max_offset:
                    cq.append_virtual(row["commitLogOffset"], row["storeSize"], code)
                self._redispatch_variant(row, code, int(store_ts))

    def _unwritable_queue(self, topic: str, walk, i: int) -> bool:
        """Whether re-dispatch fails on a record of ``topic`` (the ``i``-th record of ``walk``): a file consume
        queue's directory is named by the topic, and a topic holding a NUL byte names no path (Java's ``File``
        refuses it, so the broker cannot create the queue's file). The broker retries, marks its logic queues as
        failed and writes no consume-queue unit for this record or any later one; so does this reader, with a
        warning naming the record."""
        if "\0" not in topic or self.variant.has(ROCKSDB_CQ):
            return False
        path = self.commitlog.queue.files[walk.file_index].path
        log.warning("re-dispatch after the crash stops at the record at byte %d of %s (commit-log offset %d): its "
                    "topic %r names no consume-queue directory, so the broker writes no consume-queue unit for it "
                    "or any later record (its logic queues fail); their messages are read only by a raw scan",
                    int(walk.positions[i]), path, int(walk.stored_phy_offsets()[i]), topic)
        return True

    def _queue_lacks(self, topic: str, queue_id: int, queue_offsets: np.ndarray, phy_offsets: np.ndarray):
        """Per record of one queue, whether re-dispatch would add it: a queue not there yet, a record at or past
        the queue's end (``putMessagePositionInfo``'s check), past a batch queue's last unit."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return np.ones(len(phy_offsets), dtype=bool)
        if getattr(cq, "is_batch", False):
            return phy_offsets > (int(cq.raw["phy_offset"][-1]) if len(cq.raw) else -1)
        return queue_offsets >= cq.max_offset

    def lost_ranges(self, topics=None) -> list[LostRange]:
        """The messages this copy of the store lost, per queue (see :class:`~.recovery.LostRange`), in topic and
        queue order; ``topics`` limits them to those topics. Only the queues loaded are looked at (all of them,
        unless the store was opened with ``lazy_queues``)."""
        wanted = None if topics is None else set(topics)
        found = (self.lost_range_of(cq) for (topic, _), cq in sorted(self._queues.items())
                 if wanted is None or topic in wanted)
        return [lost for lost in found if lost is not None]

    def lost_range_of(self, cq) -> Optional[LostRange]:
        """The messages consume queue ``cq`` of this store lost (None when it lost none)."""
        result = self.recovery
        # where the log's records end: past the valid end only for a group of DLedger peers, whose entries past
        # committedPos are not served yet but not lost either
        walked = next((w for w in reversed(result.walks) if w.end_position), None)
        data_end = result.valid_end if walked is None else \
            max(result.valid_end, self.commitlog.queue.files[walked.file_index].from_offset + walked.end_position)
        start, end, phy = cq.dropped_units(data_end)
        if end <= start:
            return None
        return LostRange(cq.topic, cq.queue_id, start, end, phy, self._commit_log_file_for(phy), result.valid_end)

    def _commit_log_file_for(self, phy_offset: int) -> str:
        """The commit-log file that holds (or should hold) ``phy_offset``: a file of the log, or the name of the
        missing one."""
        files = self.commitlog.queue.files
        for f in reversed(files):
            if f.from_offset <= phy_offset:
                if phy_offset < f.from_offset + self.sizes.commit_log_file_size:
                    return str(f.path) if f.length >= self.sizes.commit_log_file_size else \
                        f"{f.path} (cut at {f.length} bytes)"
                break
        size = self.sizes.commit_log_file_size
        name = f"{phy_offset - phy_offset % size:020d}"
        directory = files[0].path.parent if files else self.root / L.COMMITLOG_DIR
        return f"{directory / name} (missing)"

    # --- metadata ---------------------------------------------------------------------------------------

    def checkpoint(self) -> Optional[Checkpoint]:
        """The checkpoint file's values (None when the store has none)."""
        return self._checkpoint

    def topics(self) -> list[str]:
        """Topics with a consume queue, sorted."""
        return list(self._queue_ids_by_topic())

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic``, sorted (empty for an unknown topic)."""
        return list(self._queue_ids_by_topic().get(topic, ()))

    def has_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) has a consume queue (after recovery)."""
        return self.recovery is not None and self._queue(topic, int(queue_id)) is not None

    def _queue_ids_by_topic(self) -> dict:
        """topic → sorted queue ids, in topic order; rebuilt only when queues were added (never removed), so
        planning over thousands of topics does not rescan every queue per topic."""
        _ = self.recovery
        if self._queue_index is None or self._queue_index[0] != len(self._queues):
            by_topic: dict = {}
            for t, q in sorted(self._queues):
                by_topic.setdefault(t, []).append(q)
            self._queue_index = (len(self._queues), {t: tuple(qs) for t, qs in by_topic.items()})
        return self._queue_index[1]

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue_id), recovered; an unknown one is an error."""
        _ = self.recovery
        cq = self._queue(topic, int(queue_id))
        if cq is None:
            raise InvalidArgumentError(f"no consume queue for topic {topic!r} queue {queue_id} in {self.root}; "
                                       f"topics are {self.topics()}")
        return cq

    def min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""
        return self._min_offset_of(self.consume_queue(topic, queue_id))

    def queue_edges(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(:meth:`min_offset`, :meth:`max_offset`) with one lookup: a planner asks both of thousands of queues."""
        cq = self.consume_queue(topic, queue_id)
        return self._min_offset_of(cq), cq.max_offset

    def _min_offset_of(self, cq) -> int:
        oldest = self.min_phy_offset()
        if hasattr(cq, "min_live_offset"):  # RocksDB: getMinCqOffset
            return cq.min_live_offset(oldest)
        first = cq.first_offset
        if first < cq.max_offset and (oldest <= 0 or int(cq.units(first, first + 1)["phy_offset"][0]) >= oldest):
            return first  # nothing expired (the usual case): one unit read, or none, instead of a search
        for lo, hi in cq.file_ranges(cq.first_offset, cq.max_offset):
            # a file whose last unit is expired is expired as a whole: the broker's cleaner deletes such files
            # shortly after the commit-log files, a copy taken in between still holds them
            if int(cq.units(hi - 1, hi)["phy_offset"][0]) < oldest:
                continue
            # units point forward through the commit log (leading filler units at 0): binary search the first
            # live one, reading a handful of units instead of the whole file
            return cq.first_at_or_past(oldest, lo, hi)
        return cq.max_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: the next queue offset to be written (exclusive end)."""
        return self.consume_queue(topic, queue_id).max_offset

    def min_phy_offset(self) -> int:
        """Start of the oldest commit-log file."""
        return self.commitlog.queue.min_offset

    def max_phy_offset(self) -> int:
        """The valid end of the commit log after recovery."""
        return self.recovery.valid_end

    # --- reading ----------------------------------------------------------------------------------------

    def scan_commitlog(self, start: int = 0, end: Optional[int] = None, columns=None, *,
                       batch_rows: int = DEFAULT_BATCH_ROWS, verify_crc: bool = False) -> Iterator[pa.RecordBatch]:
        """Every record in commit-log order from ``start`` to ``end`` (clamped to the valid end), including
        records that never reach a consume queue (PREPARED / ROLLBACK transaction halves)."""
        columns = normalize_columns(columns)
        valid_end = self.recovery.valid_end
        end = valid_end if end is None else min(int(end), valid_end)
        start = max(int(start), self.min_phy_offset())
        walks = {w.file_index: w for w in self.recovery.walks}
        files = self.commitlog.queue.files
        for index, info in enumerate(files):
            if info.from_offset + self.sizes.commit_log_file_size <= start or info.from_offset >= end:
                continue
            walk = walks.get(index)
            if walk is None or verify_crc:
                # units mark record starts: chains of them are checked in vectorised steps, only the records no
                # queue points at are walked one by one (remotely a request per queue costs more than the walk)
                base = info.from_offset
                hints = None if self.commitlog.queue.remote else np.concatenate([np.zeros(0, np.int64)] + [
                    q.phy_offsets_between(base, base + self.sizes.commit_log_file_size) - base
                    for q in self._queues.values()])
                walk = self.commitlog.walk_file(index, check_crc=verify_crc, hints=hints)
                stopped_at = walk.end_position if walk.problem_position is None else walk.problem_position
                # a bad record inside the range is an error (a DLedger walk ends at its entries' end even then)
                if (walk.end_kind != END_BLANK or walk.problem_position is not None) and \
                        info.from_offset + stopped_at < end:
                    raise CorruptRecordError(
                        f"commit log stops early: {walk.problem or 'no record where one was expected'} "
                        f"before the valid end {end}", info.path, stopped_at)
            absolute = info.from_offset + walk.positions
            sel = np.flatnonzero((absolute >= start) & (absolute < end))
            buf = self.commitlog.queue.buffer(index)
            for chunk in range(0, len(sel), batch_rows):
                fields = walk.fields_at(sel[chunk:chunk + batch_rows])
                self.commitlog.queue.note_read(index, int(fields.total_size.sum()))
                yield build_batch(buf, fields, columns, str(info.path))

    def read_record_at(self, phy_offset: int, columns=None) -> Optional[pa.RecordBatch]:
        """The record starting at ``phy_offset`` as a one-row batch (None outside the valid range)."""
        columns = normalize_columns(columns)
        if phy_offset < self.min_phy_offset() or phy_offset >= self.recovery.valid_end:
            return None
        file_idx, pos = self.commitlog.locate(np.array([phy_offset]))
        fields = self.commitlog.read_fields(int(file_idx[0]), pos, what=" (lookup by physical offset)")
        return build_batch(self.commitlog.queue.buffer(int(file_idx[0])), fields, columns)

    def complete_queue_end(self, topic: str, queue_id: int, max_back: int = 1024) -> int:
        """The queue's end for a live store: the offset after the last unit whose record is complete and
        passes RocketMQ's checks (a writer may be halfway through the tail). Looks back at most ``max_back``."""
        cq = self.consume_queue(topic, queue_id)
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
        if phy_offset < self.min_phy_offset() or phy_offset + size > self.commitlog.queue.end_offset:
            return False
        file_idx, pos = self.commitlog.locate(np.array([phy_offset]))
        self.commitlog.queue.ensure_records(int(file_idx[0]), pos, np.array([size]))
        buf = self.commitlog.queue.buffer(int(file_idx[0]))
        fields = parse_records(buf, pos)
        if not fields.valid[0] or int(fields.total_size[0]) != size:
            return False
        return not self.commitlog.check_crcs(buf, fields)[0]

    def read_records_at(self, phy_offsets, columns=None) -> pa.Table:
        """Records at the given commit-log offsets (in the order given), each checked; offsets outside
        [min_phy_offset, valid end) are skipped."""
        columns = normalize_columns(columns)
        phy = np.asarray(phy_offsets, dtype=np.int64)
        phy = phy[(phy >= self.min_phy_offset()) & (phy < self.recovery.valid_end)]
        file_idx, pos = self.commitlog.locate(phy)
        batches, order = [], []
        for f in dict.fromkeys(file_idx.tolist()):
            sel = np.flatnonzero(file_idx == f)
            fields = self.commitlog.read_fields(f, pos[sel], what=" (lookup by physical offset)")
            batches.append(build_batch(self.commitlog.queue.buffer(f), fields, columns))
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
        if phy_offset < self.min_phy_offset() or phy_offset + size > self.recovery.valid_end:
            return -1
        file_idx, pos = self.commitlog.locate(np.array([phy_offset]))
        self.commitlog.queue.ensure_records(int(file_idx[0]), pos, np.array([size]))
        buf = self.commitlog.queue.buffer(int(file_idx[0]))
        p = int(pos[0])
        if p + L.BORN_HOST_POSITION + L.IPV6_HOST_LENGTH + 8 > len(buf):
            return -1
        sysflag = int(read_be(buf, np.array([p + L.SYSFLAG_POSITION]), 4)[0])
        at = p + L.BORN_HOST_POSITION + L.host_length(sysflag, L.BORNHOST_V6_FLAG)
        return int(read_be(buf, np.array([at]), 8)[0])

    def _parse_one(self, phy_offset: int):
        file_idx, pos = self.commitlog.locate(np.array([phy_offset]))
        self.commitlog.queue.ensure_records(int(file_idx[0]), pos)
        return parse_records(self.commitlog.queue.buffer(int(file_idx[0])), pos)


__all__ = ["StoreReader", "GetMessageResult", "resolve_store_root", "DEFAULT_BATCH_ROWS"]
