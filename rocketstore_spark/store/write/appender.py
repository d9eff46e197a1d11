"""``StoreWriter``: appending messages to a store, single process, the way ``DefaultMessageStore`` does.

While open it holds a POSIX record lock on ``lock`` (what the broker's ``FileChannel.tryLock`` takes, so a
running broker and a second writer both fail fast) and keeps an ``abort`` marker. Each ``append`` writes
commit-log records (BLANK-filled file ends, v2 records for long topics, body CRCs), then consume-queue units,
then index entries — so a crash leaves at worst a torn tail that recovery cuts off. ``close`` flushes, writes
the checkpoint and removes ``abort``: the store then opens in RocketMQ with normal recovery.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import MessageValidationError, StoreClosedError, StoreNotFoundError
from ..format import layout as L
from ..files.checkpoint import Checkpoint, write_checkpoint
from .encoded_batch import EncodedBatch, encode_batch
from ..format.encoder import UniqKeyFactory
from .index_writer import IndexWriter
from ..files.locking import StoreLock
from .message_input import prepare_messages
from .placement import patch_longs, place_records
from ..files.store_files import create_full_size
from ..files.topic_config import load_topic_table, queue_dir_counts, register_topics
from .journal import recover_store
from ..files.sizes import detect_sizes
from ..read.store_reader import StoreReader

DEFAULT_STORE_HOST = "127.0.0.1:10911"
CHUNK_BYTES = 64 * 1024 * 1024  # encode at most this much message payload at a time
MAX_OPEN_FILES = 256  # data files (commit log, consume queues) a writer keeps open at once


class StoreWriter:
    """A store opened for appending. Use as a context manager or call :meth:`close`."""

    def __init__(self, root: Path, sizes, lock: StoreLock, store_host: str, max_message_size: int):
        self.root = root
        self.sizes = sizes
        self._lock = lock
        self.store_host = store_host
        self.max_message_size = max_message_size
        reader = StoreReader(root, sizes)
        self.next_phy = reader.max_phy_offset()
        self._queue_next = {key: cq.max_offset for key, cq in reader._queues.items()}
        self._checkpoint = reader.checkpoint() or Checkpoint()
        reader.close()
        (root / L.COMMITLOG_DIR).mkdir(parents=True, exist_ok=True)
        (root / L.CONSUMEQUEUE_DIR).mkdir(parents=True, exist_ok=True)
        self.index = IndexWriter(root / L.INDEX_DIR, sizes.index_hash_slots, sizes.index_max_entries)
        self._uniq = UniqKeyFactory()
        self._fds: dict[Path, int] = {}
        self._scratch: np.ndarray | None = None  # reused for every chunk copied into the commit log
        self.sync_flush = True  # flush() forces data to disk (SYNC_FLUSH); False: ASYNC_FLUSH
        self._closed = False
        self.recovery_actions: list[str] = []  # what opening had to finish, roll back or repair
        load_topic_table(root)  # an unreadable broker topic table fails now, not when closing
        self.register_topics_on_close = True  # a publication registers its topics itself, at its commit point
        self._written_topics: set[str] = set()
        (root / L.ABORT_FILE).write_text(str(os.getpid()))

    @classmethod
    def open(cls, path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
             index_max_entries=None, store_host: str = DEFAULT_STORE_HOST,
             max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, lock: Optional[StoreLock] = None,
             recover: bool = True) -> "StoreWriter":
        """Open (creating if absent) the store at ``path`` for appending.

        Finishes or rolls back an interrupted publication and repairs a crashed tail first. ``lock`` lets a
        caller that already holds the store's lock hand it over (the writer releases it on close);
        ``recover=False`` is for that caller when it has just recovered the store itself.
        """
        root = Path(path).expanduser()
        if root.exists() and not root.is_dir():
            raise StoreNotFoundError(f"{root} is a file; expected a store directory (or a path to create one)")
        root.mkdir(parents=True, exist_ok=True)
        lock = lock or StoreLock.acquire(root)
        try:
            sizes = detect_sizes(root, commit_log_file_size, consume_queue_file_size, index_hash_slots,
                                 index_max_entries)
            sizes.require_index_sizes()  # a writer extends the index: it must know its exact layout
            actions = recover_store(root, sizes) if recover else []
            writer = cls(root, sizes, lock, store_host, max_message_size)
            writer.recovery_actions = actions
            return writer
        except BaseException:
            lock.release()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def queue_next_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message of (topic, queue_id) gets."""
        return self._queue_next.get((topic, int(queue_id)), 0)

    # --- appending ---------------------------------------------------------------------------------------

    def append(self, table: pa.Table) -> dict:
        """Append the messages of ``table`` (columns as the store layer's; see message_input) in order.

        Returns ``{"count", "first_phy_offset", "end_phy_offset"}``.
        """
        self._check_open()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        first = self.next_phy
        for chunk in _chunks(table):
            self.append_encoded(self.encode(chunk))
        return {"count": table.num_rows, "first_phy_offset": first, "end_phy_offset": self.next_phy}

    def encode(self, table: pa.Table) -> EncodedBatch:
        """Prepare and encode messages without publishing them (what Spark tasks do in parallel)."""
        return encode_table(table, store_host=self.store_host, uniq_factory=self._uniq,
                            max_message_size=self.max_message_size)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed; open it again with mode='a'")

    def append_encoded(self, batch: EncodedBatch, now_ms: Optional[int] = None) -> None:
        """Publish an encoded batch: assign offsets and store times, write commit log, queues and index."""
        self._check_open()
        if len(batch) == 0:
            return
        placement = place_records(self.next_phy, batch.lengths, self.sizes.commit_log_file_size)
        queue_offset, store_ts = self.assign(batch, now_ms)
        self._write_commitlog(batch, placement.phy, queue_offset, store_ts, placement.blanks)
        self.dispatch(batch, placement.phy, queue_offset, store_ts)

    def assign(self, batch: EncodedBatch, now_ms: Optional[int] = None) -> tuple[np.ndarray, np.ndarray]:
        """Queue offsets (consecutive per queue, from each queue's end) and store times (given ones kept,
        else ``now_ms``) of the next records appended."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return self._assign_queue_offsets(batch), np.where(batch.ts_given, batch.store_ts, now_ms)

    def dispatch(self, batch: EncodedBatch, phy: np.ndarray, queue_offset: np.ndarray,
                 store_ts: np.ndarray, *, index: bool = True) -> None:
        """Write the consume-queue units and (unless ``index`` is off: the caller runs :meth:`index_batch`
        itself, in the same order) the index entries of records now in the commit log at ``phy``, and advance
        the commit log's end and the checkpoint past them (``ReputMessageService``'s dispatch)."""
        self._check_open()
        tags_code = np.where(batch.delay_ms > 0, store_ts + batch.delay_ms, batch.tags_code)
        self._write_consume_queues(batch, phy, queue_offset, tags_code)
        if index:
            self.index_batch(batch, phy, store_ts)
        self.next_phy = int(phy[-1] + batch.lengths[-1])
        dispatched = np.flatnonzero(batch.dispatch)
        self._checkpoint = Checkpoint(
            physic_msg_timestamp=int(store_ts[-1]),
            logics_msg_timestamp=int(store_ts[dispatched[-1]]) if len(dispatched)
            else self._checkpoint.logics_msg_timestamp,
            index_msg_timestamp=self._checkpoint.index_msg_timestamp)

    def index_batch(self, batch: EncodedBatch, phy: np.ndarray, store_ts: np.ndarray) -> None:
        """The index entries of ``batch``'s records at ``phy`` (``IndexService.buildIndex``). Touches only the
        index files, so a publication may run it beside the consume-queue writes."""
        if len(batch.entry_rec):
            self.index.put(batch.entry_hash, phy[batch.entry_rec], store_ts[batch.entry_rec])

    def _assign_queue_offsets(self, batch: EncodedBatch) -> np.ndarray:
        """Consecutive offsets per queue for dispatched records; 0 for PREPARED/ROLLBACK halves."""
        out = np.zeros(len(batch), dtype=np.int64)
        rows, bounds, queues = batch.queue_groups()
        if not len(rows):
            return out
        base = np.array([self._queue_next.get(q, 0) for q in queues], dtype=np.int64)
        counts = np.diff(bounds)
        assigned = np.repeat(base - bounds[:-1], counts) + np.arange(len(rows))
        given = batch.queue_offset_given[rows]
        wrong = np.flatnonzero((given >= 0) & (given != assigned))
        if len(wrong):
            i = int(wrong[np.argmin(rows[wrong])])  # the first such row of the batch
            topic, qid = queues[int(np.searchsorted(bounds, i, side="right")) - 1]
            raise MessageValidationError(
                f"row {int(rows[i])}: queueOffset {int(given[i])} given for {topic}/{qid}, but that queue's next "
                f"offset is {int(assigned[i])}; drop the queueOffset column to have offsets assigned")
        out[rows] = assigned
        for q, b, c in zip(queues, base.tolist(), counts.tolist()):
            self._queue_next[q] = b + c
        self._written_topics.update(q[0] for q in queues)
        return out

    def _fd(self, path: Path, size: int) -> int:
        fd = self._fds.pop(path, None)
        if fd is None:
            if not path.exists():
                create_full_size(path, size)  # never a short file in the store, whatever kills us
            fd = os.open(path, os.O_RDWR, 0o644)
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            # a write into thousands of queues keeps the most recently used files open, not one per queue
            # (the process's descriptor limit); a file let go is forced to disk first when flushes sync
            while len(self._fds) >= MAX_OPEN_FILES:
                oldest = next(iter(self._fds))
                old = self._fds.pop(oldest)
                if self.sync_flush:
                    os.fsync(old)
                os.close(old)
        self._fds[path] = fd  # most recently used last
        return fd

    def _write_commitlog(self, batch: EncodedBatch, phy, queue_offset, store_ts, blanks) -> None:
        """Copy the records into place, patching queue offset, physical offset and store time."""
        size = self.sizes.commit_log_file_size
        rec_off = batch.record_offsets
        file_no = phy // size
        bounds = np.flatnonzero(np.diff(file_no)) + 1
        for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(phy)]))):
            for a, b in _byte_bounded(rec_off, int(lo), int(hi), PATCH_CHUNK_BYTES):
                need = int(rec_off[b] - rec_off[a])
                if self._scratch is None or len(self._scratch) < need:
                    self._scratch = np.empty(max(need, PATCH_CHUNK_BYTES), dtype=np.uint8)
                chunk = batch.read_into(int(rec_off[a]), int(rec_off[b]), self._scratch)
                rel = rec_off[a:b] - rec_off[a]
                patch_longs(chunk, rel + L.QUEUE_OFFSET_POSITION, queue_offset[a:b])
                patch_longs(chunk, rel + L.PHYSICAL_OFFSET_POSITION, phy[a:b])
                patch_longs(chunk, rel + batch.ts_pos[a:b], store_ts[a:b])
                path = self.root / L.COMMITLOG_DIR / L.offset_to_file_name(int(file_no[a]) * size)
                os.pwrite(self._fd(path, size), memoryview(chunk), int(phy[a] % size))
        for pos, length in blanks:
            path = self.root / L.COMMITLOG_DIR / L.offset_to_file_name(pos - pos % size)
            os.pwrite(self._fd(path, size), L.BLANK_MARKER.pack(length, L.BLANK_MAGIC_CODE), pos % size)

    def _write_consume_queues(self, batch: EncodedBatch, phy, queue_offset, tags_code) -> None:
        rows, bounds, queues = batch.queue_groups()
        cq_size = self.sizes.consume_queue_file_size
        for (topic, queue_id), lo, hi in zip(queues, bounds[:-1].tolist(), bounds[1:].tolist()):
            members = rows[lo:hi]
            directory = self.root / L.CONSUMEQUEUE_DIR / topic / str(queue_id)
            directory.mkdir(parents=True, exist_ok=True)
            units = np.zeros(len(members), dtype=L.CQ_UNIT_DTYPE)
            units["phy_offset"], units["size"] = phy[members], batch.lengths[members]
            units["tags_code"] = tags_code[members]
            byte = queue_offset[members] * L.CQ_STORE_UNIT_SIZE
            file_no = byte // cq_size
            cuts = (np.flatnonzero(np.diff(file_no)) + 1).tolist()  # a queue's offsets only grow
            for a, b in zip([0] + cuts, cuts + [len(members)]):
                f = int(file_no[a])
                path = directory / L.offset_to_file_name(f * cq_size)
                os.pwrite(self._fd(path, cq_size), units[a:b].view(np.uint8), int(byte[a]) - f * cq_size)

    def track_file(self, path: Path) -> None:
        """A commit-log file written outside this writer (moved in by a publication): flushed with the rest."""
        self._fd(Path(path), self.sizes.commit_log_file_size)

    def ensure_queues(self, topic: str, queue_nums: int) -> None:
        """Create the consume-queue directories 0..queue_nums-1 of ``topic`` (a new topic's queues)."""
        for qid in range(queue_nums):
            (self.root / L.CONSUMEQUEUE_DIR / topic / str(qid)).mkdir(parents=True, exist_ok=True)

    # --- closing -----------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the checkpoint; with ``sync_flush`` (RocketMQ's SYNC_FLUSH) first force data files and the
        index to disk. Without it (ASYNC_FLUSH) the bytes are in the page cache, where any other process sees
        them and a killed process cannot lose them, and the kernel writes them back on its own schedule."""
        if self.sync_flush:
            for fd in self._fds.values():
                os.fsync(fd)
            self.index.flush()
        # indexMsgTimestamp: the end time of the newest index file that filled up
        self._checkpoint = dataclasses.replace(self._checkpoint, index_msg_timestamp=(
            self.index.last_full_end_timestamp or self._checkpoint.index_msg_timestamp))
        write_checkpoint(self.root / L.CHECKPOINT_FILE, self._checkpoint, sync=self.sync_flush)

    def abandon(self) -> None:
        """Give up after a failure: undo whatever a journalled publication wrote (or repair the tail),
        then release the lock."""
        if self._closed:
            return
        try:
            self.index.close()
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            recover_store(self.root, self.sizes)
        finally:
            self._closed = True
            self._lock.release()

    def close(self) -> None:
        """Flush everything, remove ``abort`` and release the lock. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
            self.index.close()
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            (self.root / L.ABORT_FILE).unlink(missing_ok=True)
            # the broker serves only the topics its table lists; done once the store itself is complete, so
            # that a failure here concerns the table alone
            if self.register_topics_on_close and self._written_topics:
                dirs = queue_dir_counts(self.root)
                register_topics(self.root, {t: dirs.get(t, 1) for t in self._written_topics})
        finally:
            self._closed = True
            self._lock.release()


PATCH_CHUNK_BYTES = 64 * 1024 * 1024


def _byte_bounded(offsets: np.ndarray, lo: int, hi: int, limit: int):
    """Split rows [lo, hi) into runs of at most ``limit`` bytes (at least one row each)."""
    while lo < hi:
        stop = int(np.searchsorted(offsets, offsets[lo] + limit, side="right")) - 1
        stop = min(max(stop, lo + 1), hi)
        yield lo, stop
        lo = stop


def encode_table(table: pa.Table, *, store_host: str, uniq_factory: UniqKeyFactory,
                 max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE) -> EncodedBatch:
    """Check, resolve and encode the messages of ``table`` (see :mod:`.message_input`)."""
    prepared = prepare_messages(table, store_host=store_host, uniq_factory=uniq_factory,
                                max_message_size=max_message_size)
    if "storeTimestamp" in table.column_names:
        ts_given = np.asarray(pc.is_valid(table.column("storeTimestamp").combine_chunks()
                                          if isinstance(table.column("storeTimestamp"), pa.ChunkedArray)
                                          else table.column("storeTimestamp")))
    else:
        ts_given = np.zeros(table.num_rows, dtype=bool)
    return encode_batch(prepared, ts_given)


def _chunks(table: pa.Table):
    """Slices of ``table`` holding at most about CHUNK_BYTES of bodies each."""
    if "body" in table.column_names or "rawBody" in table.column_names:
        col = table.column("rawBody" if "rawBody" in table.column_names else "body")
        lengths = np.asarray(pc.fill_null(pc.binary_length(col), 0), dtype=np.int64)
        cum = np.cumsum(lengths)
        start = 0
        while start < table.num_rows:
            base = cum[start - 1] if start else 0
            stop = int(np.searchsorted(cum, base + CHUNK_BYTES, side="right"))
            stop = max(stop, start + 1)
            yield table.slice(start, stop - start)
            start = stop
    else:
        yield table


__all__ = ["StoreWriter", "DEFAULT_STORE_HOST"]
