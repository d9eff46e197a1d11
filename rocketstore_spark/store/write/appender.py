"""``StoreWriter``: a store opened for appending, single process, the way ``DefaultMessageStore`` appends.

While open it holds a POSIX record lock on ``lock`` (what the broker's ``FileChannel.tryLock`` takes, so a
running broker and a second writer both fail fast) and keeps an ``abort`` marker. It is the writers of each file
kind together — :class:`~.commitlog_writer.CommitLogWriter`, :class:`~.consume_queue_writer.QueueOffsets` and
:class:`~.consume_queue_writer.ConsumeQueueWriter`, :class:`~.index_writer.IndexWriter`, the checkpoint — over
the store's state as recovery left it. Each ``append`` writes commit-log records (BLANK-filled file ends, v2
records for long topics, body CRCs), then consume-queue units, then index entries — so a crash leaves at worst a
torn tail that recovery cuts off. ``close`` flushes, writes the checkpoint and removes ``abort``: the store then
opens in RocketMQ with normal recovery.
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

from ...errors import DiskFullError, StoreClosedError, StoreFormatError, StoreNotFoundError
from ..files.checkpoint import Checkpoint, write_checkpoint
from ..files.disk_full import disk_full, os_cause, with_advice
from ..files.known_end import forget_known_end, known_end, record_known_end
from ..files.locking import StoreLock
from ..files.mapped_file_queue import list_offset_files, missing_file_names
from ..files.sizes import StoreSizes, detect_sizes
from ..files.store_location import local_store_path
from ..files.topic_config import existing_queue_counts, load_topic_table, queue_dir_counts, register_topics
from ..files.variant import refuse_variant_writes
from ..format import layout as L
from ..format.encoder import UniqKeyFactory
from ..read.store_reader import StoreReader
from .commitlog_writer import CommitLogWriter
from .consume_queue_writer import ConsumeQueueWriter, QueueOffsets
from .encoded_batch import EncodedBatch, encode_table
from .index_writer import IndexWriter
from .journal import snapshot
from .open_files import OpenFiles
from .placement import place_records
from .producer import COMPRESS_THRESHOLD, flag_compression, select_queues
from .rollback import rollback
from .write_recovery import recover_store

DEFAULT_STORE_HOST = "127.0.0.1:10911"
CHUNK_BYTES = 64 * 1024 * 1024  # encode at most this much message payload at a time
#: index keys :meth:`StoreWriter.index_batches` gathers into one put (24 bytes each while gathered)
INDEX_PUT_KEYS = 2_000_000


def refuse_commit_log_holes(root: Path, file_size: Optional[int]) -> None:
    """A store whose commit log misses files between others (a copy with holes) is read around them, but never
    appended to: the messages they held are lost, and a store grown on top of them would look whole to a broker
    that only logs the gap."""
    files = list_offset_files(root / L.COMMITLOG_DIR)
    if not file_size or len(files) < 2:
        return
    gaps = [(a.from_offset + file_size, b.from_offset) for a, b in zip(files, files[1:])
            if b.from_offset > a.from_offset + file_size]
    if gaps:
        names = missing_file_names(gaps, file_size)
        raise StoreFormatError(f"expected consecutive commit-log files, found {len(names)} missing between others "
                               f"({', '.join(names[:5])}{' …' if len(names) > 5 else ''}); a store with holes is "
                               "read around them but not appended to: restore the files, or copy its readable "
                               "messages into a new store (spark.read … df.write, or `rocketstore dump`)",
                               root / L.COMMITLOG_DIR)


class StoreWriter:
    """A store opened for appending. Use as a context manager or call :meth:`close`."""

    def __init__(self, root: Path, sizes, lock: StoreLock, store_host: str, max_message_size: int):
        self.root = root
        self.sizes = sizes
        self._lock = lock
        self.store_host = store_host
        self.max_message_size = max_message_size
        # the end the last writer recorded, while nothing recovery looks at changed; else recovery's walk
        reader = StoreReader(root, sizes, valid_end=known_end(root, sizes))
        self.next_phy = reader.max_phy_offset()
        self.offsets = QueueOffsets({key: cq.max_offset for key, cq in reader.queues.loaded_items()})
        # units that opening would re-dispatch are not on disk: the next open must find them again by walking
        self._fully_dispatched = not any(len(cq.virtual) for cq in reader.queues.loaded_queues())
        self._checkpoint = reader.checkpoint() or Checkpoint()
        reader.close()
        forget_known_end(root)  # from now on only this writer's close knows the end
        (root / L.COMMITLOG_DIR).mkdir(parents=True, exist_ok=True)
        (root / L.CONSUMEQUEUE_DIR).mkdir(parents=True, exist_ok=True)
        self._files = OpenFiles()
        self.commitlog = CommitLogWriter(root, sizes.commit_log_file_size, self._files)
        self.consume_queues = ConsumeQueueWriter(root, sizes.consume_queue_file_size, self._files)
        self.index = IndexWriter(root / L.INDEX_DIR, sizes.index_hash_slots, sizes.index_max_entries)
        self._uniq = UniqKeyFactory()
        self._rows_selected = 0  # messages whose queue append's round-robin selector picked
        self.sync_flush = True  # flush() forces data to disk (SYNC_FLUSH); False: ASYNC_FLUSH (see the property)
        self._closed = False
        self.recovery_actions: list[str] = []  # what opening had to finish, roll back or repair
        load_topic_table(root)  # an unreadable broker topic table fails now, not when closing
        self.register_topics_on_close = True  # a publication registers its topics itself, at its commit point
        self._appended = False  # an append of this writer succeeded (a failed one rolls back to the one before)
        with disk_full(root / L.ABORT_FILE, "the abort marker"):
            (root / L.ABORT_FILE).write_text(str(os.getpid()))

    @classmethod
    def open(cls, path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
             index_max_entries=None, store_host: str = DEFAULT_STORE_HOST,
             max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, lock: Optional[StoreLock] = None,
             recover: bool = True, variant=None, sizes: Optional[StoreSizes] = None) -> "StoreWriter":
        """Open (creating if absent) the store at ``path`` for appending.

        Finishes or rolls back an interrupted publication and repairs a crashed tail first. ``lock`` lets a
        caller that already holds the store's lock hand it over (the writer releases it on close);
        ``recover=False`` is for that caller when it has just recovered the store itself, and ``sizes`` the
        store's sizes when that caller has just detected them under the lock (a store of thousands of queues is
        not listed again for them).
        """
        root = local_store_path(path, writing=True)
        if root.exists() and not root.is_dir():
            raise StoreNotFoundError(f"{root} is a file; expected a store directory (or a path to create one)")
        # the default layout only: a DLedger, RocksDB, LMQ or prop-crc broker could not use what this writes
        refuse_variant_writes(root, variant)
        with disk_full(root, "the store directory"):
            root.mkdir(parents=True, exist_ok=True)
        lock = lock or StoreLock.acquire(root)
        had_abort = (root / L.ABORT_FILE).exists()
        try:
            if sizes is None:
                sizes = detect_sizes(root, commit_log_file_size, consume_queue_file_size, index_hash_slots,
                                     index_max_entries)
            sizes.require_index_sizes()  # a writer extends the index: it must know its exact layout
            refuse_commit_log_holes(root, sizes.commit_log_file_size)
            actions = recover_store(root, sizes) if recover else []
            writer = cls(root, sizes, lock, store_host, max_message_size)
            writer.recovery_actions = actions
            return writer
        except BaseException as e:
            if not had_abort:  # the marker this open wrote (on a full disk, perhaps empty): nothing else changed
                (root / L.ABORT_FILE).unlink(missing_ok=True)
            lock.release()
            error = with_advice(e, f"free space on that filesystem, then open the store {root} again (or run "
                                f"`rocketstore recover {root}`)")
            if error is None:
                raise
            raise error from os_cause(e)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def sync_flush(self) -> bool:
        return self._files.sync_evicted

    @sync_flush.setter
    def sync_flush(self, value: bool) -> None:
        self._files.sync_evicted = bool(value)  # files let go early are forced to disk like the rest

    def queue_next_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message of (topic, queue_id) gets."""
        return self.offsets.next_offset(topic, queue_id)

    # --- appending ---------------------------------------------------------------------------------------

    def append(self, table: pa.Table, *, queue_selector: Optional[str] = None, queue_nums: int = 8,
               compress_body: Optional[str] = None, compress_threshold: int = COMPRESS_THRESHOLD) -> dict:
        """Append the messages of ``table`` (columns as the store layer's; see message_input) in order.

        The producer's rules (:mod:`.producer`), when asked: without a ``queueId`` column, ``queue_selector``
        (``roundRobin``, ``hash`` of the ``shardingKey`` column or the first key, ``partition``) picks each
        message's queue among its topic's queues (a new topic's ``queue_nums``); ``compress_body`` (``zlib``,
        ``lz4``, ``zstd``) compresses the bodies longer than ``compress_threshold``.
        Returns ``{"count", "first_phy_offset", "end_phy_offset"}``.
        """
        self._check_open()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if queue_selector is not None:
            if "queueId" not in table.column_names:
                queues = self._selected_queues(table, queue_selector, queue_nums)
                table = table.append_column("queueId", pa.array(queues, pa.int32()))
            if "shardingKey" in table.column_names:  # what the hash selector reads; no field of the message
                table = table.drop_columns(["shardingKey"])
        if compress_body not in (None, "none") and "body" in table.column_names:
            table = flag_compression(table, compress_body, compress_threshold)
        first = self.next_phy
        before = self._before_append()
        try:
            for chunk in _chunks(table):
                self.append_encoded(self.encode(chunk))
            self.consume_queues.write_pending()  # an appended table is readable once append returns
        except (OSError, DiskFullError) as e:
            error = with_advice(e, f"the append was rolled back and the writer closed: the store {self.root} is as "
                                "it was before this append (earlier appends of this writer are kept); free space on "
                                "that filesystem and open it again")
            if error is None:
                raise
            self._undo_append(before)
            raise error from os_cause(e)
        self._appended = True
        return {"count": table.num_rows, "first_phy_offset": first, "end_phy_offset": self.next_phy}

    def _selected_queues(self, table: pa.Table, selector: str, queue_nums: int) -> np.ndarray:
        """The queue of each message of ``table`` by ``selector``, round-robin continuing across appends."""
        known = existing_queue_counts(self.root)
        for topic, queue_id in self.offsets.keys():
            known[topic] = max(known.get(topic, 0), queue_id + 1)
        topics = table.column("topic").combine_chunks().dictionary_encode()
        per_topic = np.array([known.get(t, queue_nums) for t in topics.dictionary.to_pylist()], dtype=np.int64)
        counts = per_topic[np.asarray(topics.indices)]
        queues = select_queues(table, counts, selector, row_base=self._rows_selected)
        self._rows_selected += table.num_rows
        return queues

    def _before_append(self) -> dict:
        """What :meth:`_undo_append` needs to put the store back as it is now (in memory: read only on failure)."""
        payload = snapshot(self.root, "append", self.next_phy, {}, self.root / L.INDEX_DIR, 0)
        payload["offsets"] = self.offsets.as_dict()
        return payload

    def _undo_append(self, before: dict) -> None:
        """After a failed append: roll the store back to ``before`` (:meth:`_before_append`), as a journal's
        rollback does, and close the writer (its state in memory is past the rollback). Writes only over pages
        that hold data, so it works on a full disk."""
        self.consume_queues.discard_pending()
        self.index.close()
        self._files.close_all()
        try:
            cq = self.root / L.CONSUMEQUEUE_DIR
            queues = {}
            for (topic, qid), end in self.offsets.as_dict().items():
                start = before["offsets"].get((topic, qid))
                if start == end:
                    continue
                directory = cq / topic / str(qid)
                cut = (start or 0) * L.CQ_STORE_UNIT_SIZE
                queues[f"{topic}/{qid}"] = [start or 0, None if start is None else sorted(
                    p.name for p in directory.iterdir() if p.name.isdigit() and int(p.name) < cut)
                    if directory.is_dir() else []]
            rollback(self.root, self.sizes, dict(before, queues=queues))
            if not self._appended:  # nothing of this writer is left: the store is as it was opened
                (self.root / L.ABORT_FILE).unlink(missing_ok=True)
        finally:
            self._closed = True
            self._lock.release()

    def encode(self, table: pa.Table) -> EncodedBatch:
        """Prepare and encode messages without publishing them (what Spark tasks do in parallel)."""
        return encode_table(table, store_host=self.store_host, uniq_factory=self._uniq,
                            max_message_size=self.max_message_size)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed; open it again with RocketStore.open_writer")

    def append_encoded(self, batch: EncodedBatch, now_ms: Optional[int] = None) -> None:
        """Publish an encoded batch: assign offsets and store times, write commit log, queues and index."""
        self._check_open()
        if len(batch) == 0:
            return
        queue_offset, store_ts = self.assign(batch, now_ms)
        self.write_assigned(batch, queue_offset, store_ts)

    def assign(self, batch: EncodedBatch, now_ms: Optional[int] = None) -> tuple[np.ndarray, np.ndarray]:
        """Queue offsets (consecutive per queue, from each queue's end) and store times (given ones kept,
        else ``now_ms``) of the next records appended."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return self.offsets.assign(batch), np.where(batch.ts_given, batch.store_ts, now_ms)

    def write_assigned(self, batch: EncodedBatch, queue_offset: np.ndarray, store_ts: np.ndarray) -> None:
        """Copy records whose offsets and times are assigned to the commit log's end, then dispatch them."""
        placement = place_records(self.next_phy, batch.lengths, self.sizes.commit_log_file_size)
        self.commitlog.write(batch, placement, queue_offset, store_ts)
        self.dispatch(batch, placement.phy, queue_offset, store_ts)

    def dispatch(self, batch: EncodedBatch, phy: np.ndarray, queue_offset: np.ndarray,
                 store_ts: np.ndarray, *, index: bool = True) -> None:
        """Write the consume-queue units and (unless ``index`` is off: the caller runs :meth:`index_batch`
        itself, in the same order) the index entries of records now in the commit log at ``phy``, and advance
        the commit log's end and the checkpoint past them (``ReputMessageService``'s dispatch)."""
        self._check_open()
        self.consume_queues.write(batch, phy, queue_offset, store_ts)
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
        self.index_batches([batch], [phy], [store_ts])

    def index_batches(self, batches: list[EncodedBatch], phys: list[np.ndarray], store_tss: list[np.ndarray]) -> None:
        """:meth:`index_batch` of each batch in turn, put :data:`INDEX_PUT_KEYS` keys or more at a time: on a
        thread beside the publisher's, each return from the native kernel waits for the GIL (up to the
        interpreter's switch interval, 5 ms), once per call rather than once per batch. Each batch's keys go to
        the kernel as they are (hashes, the rows of their records, the records' offsets and times)."""
        group: list = []
        count = 0
        for b, phy, ts in zip(batches, phys, store_tss):
            if len(b.entry_rec):
                group.append((b.entry_hash, b.entry_rec, phy, ts))
                count += len(b.entry_rec)
            if count >= INDEX_PUT_KEYS:
                self.index.put_parts(group)
                group, count = [], 0
        self.index.put_parts(group)

    # --- closing -----------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the checkpoint; with ``sync_flush`` (RocketMQ's SYNC_FLUSH) first force data files and the
        index to disk. Without it (ASYNC_FLUSH) the bytes are in the page cache, where any other process sees
        them and a killed process cannot lose them, and the kernel writes them back on its own schedule."""
        self.consume_queues.write_pending()
        if self.sync_flush:
            self._files.fsync_all()
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
            self.consume_queues.discard_pending()
            self.index.close()
            self._files.close_all()
            recover_store(self.root, self.sizes)
        finally:
            self._closed = True
            self._lock.release()

    def close(self) -> None:
        """Flush everything, remove ``abort`` and release the lock. Idempotent. A full disk raises
        :class:`~...errors.DiskFullError`; the store then holds what was appended, ``abort`` included, as after a
        killed process (the next writer or ``rocketstore recover`` repairs it)."""
        if self._closed:
            return
        try:
            self.flush()
            self.index.close()
            self._files.close_all()
            (self.root / L.ABORT_FILE).unlink(missing_ok=True)
            if self._fully_dispatched:
                record_known_end(self.root, self.next_phy, sync=self.sync_flush)
            # the broker serves only the topics its table lists; done once the store itself is complete, so
            # that a failure here concerns the table alone
            if self.register_topics_on_close and self.offsets.written_topics:
                dirs = queue_dir_counts(self.root)
                register_topics(self.root, {t: dirs.get(t, 1) for t in self.offsets.written_topics})
        except (OSError, DiskFullError) as e:
            error = with_advice(e, f"the appended messages are in the store, but closing it failed; free space on "
                                f"that filesystem, then run `rocketstore recover {self.root}`")
            if error is None:
                raise
            raise error from os_cause(e)
        finally:
            self.close_after_failure()

    def close_after_failure(self) -> None:
        """Let go of files, maps and the lock without writing anything (what :meth:`close` does last)."""
        self.index.close()
        self._files.close_all()
        self._closed = True
        self._lock.release()


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
