"""``StoreWriter``: appending messages to a store, single process, the way ``DefaultMessageStore`` does.

While open it holds a POSIX record lock on ``lock`` (what the broker's ``FileChannel.tryLock`` takes, so a
running broker and a second writer both fail fast) and keeps an ``abort`` marker. Each ``append`` writes
commit-log records (BLANK-filled file ends, v2 records for long topics, body CRCs), then consume-queue units,
then index entries — so a crash leaves at worst a torn tail that recovery cuts off. ``close`` flushes, writes
the checkpoint and removes ``abort``: the store then opens in RocketMQ with normal recovery.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MessageValidationError, StoreClosedError, StoreNotFoundError
from . import layout as L
from .checkpoint import Checkpoint, write_checkpoint
from .codec import java_string_hashes
from .encoder import UniqKeyFactory, encode_records, record_lengths, value_offsets
from .index_writer import IndexWriter
from .locking import StoreLock
from .message_input import PreparedMessages, prepare_messages
from .repair import repair_store
from .sizes import detect_sizes
from .store import RocketStore

DEFAULT_STORE_HOST = "127.0.0.1:10911"
CHUNK_BYTES = 64 * 1024 * 1024  # encode at most this much message payload at a time


class StoreWriter:
    """A store opened for appending. Use as a context manager or call :meth:`close`."""

    def __init__(self, root: Path, sizes, lock: StoreLock, store_host: str, max_message_size: int):
        self.root = root
        self.sizes = sizes
        self._lock = lock
        self.store_host = store_host
        self.max_message_size = max_message_size
        reader = RocketStore(root, sizes)
        self.next_phy = reader.max_phy_offset()
        self._queue_next = {key: cq.max_offset for key, cq in reader._queues.items()}
        self._checkpoint = reader.checkpoint() or Checkpoint()
        reader.close()
        (root / L.COMMITLOG_DIR).mkdir(parents=True, exist_ok=True)
        (root / L.CONSUMEQUEUE_DIR).mkdir(parents=True, exist_ok=True)
        self.index = IndexWriter(root / L.INDEX_DIR, sizes.index_hash_slots, sizes.index_max_entries)
        self._uniq = UniqKeyFactory()
        self._fds: dict[Path, int] = {}
        self._closed = False
        (root / L.ABORT_FILE).write_text(str(os.getpid()))

    @classmethod
    def open(cls, path, *, commit_log_file_size=None, consume_queue_file_size=None, index_hash_slots=None,
             index_max_entries=None, store_host: str = DEFAULT_STORE_HOST,
             max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE) -> "StoreWriter":
        """Open (creating if absent) the store at ``path`` for appending; repairs a crashed tail first."""
        root = Path(path).expanduser()
        if root.exists() and not root.is_dir():
            raise StoreNotFoundError(f"{root} is a file; expected a store directory (or a path to create one)")
        root.mkdir(parents=True, exist_ok=True)
        lock = StoreLock.acquire(root)
        try:
            sizes = detect_sizes(root, commit_log_file_size, consume_queue_file_size, index_hash_slots,
                                 index_max_entries)
            if (root / L.ABORT_FILE).exists():
                repair_store(root, sizes)
            return cls(root, sizes, lock, store_host, max_message_size)
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
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        first = self.next_phy
        for chunk in _chunks(table):
            prepared = prepare_messages(chunk, store_host=self.store_host, uniq_factory=self._uniq,
                                        max_message_size=self.max_message_size)
            self._append_prepared(prepared)
        return {"count": table.num_rows, "first_phy_offset": first, "end_phy_offset": self.next_phy}

    def _append_prepared(self, msgs: PreparedMessages) -> None:
        enc = msgs.enc
        n = len(enc)
        if n == 0:
            return
        tran = enc.sysflag & L.TRANSACTION_TYPE_MASK
        dispatch = (tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT_TYPE)
        topics = enc.topic.to_pylist()
        enc.queue_offset = self._assign_queue_offsets(topics, enc.queue_id, dispatch, msgs.given_queue_offset)
        lengths = record_lengths(enc)
        limit = self.sizes.commit_log_file_size - L.END_FILE_MIN_BLANK_LENGTH
        if (lengths > limit).any():
            row = int(np.flatnonzero(lengths > limit)[0])
            raise MessageValidationError(f"row {row}: a {int(lengths[row])}-byte record cannot fit in a "
                                         f"{self.sizes.commit_log_file_size}-byte commit-log file")
        phy, blanks = self._place(lengths)
        records = encode_records(enc, phy)
        self._write_commitlog(records, phy, blanks)
        self._write_consume_queues(msgs, topics, phy, lengths, dispatch)
        self._write_index(msgs, topics, phy, tran)
        self.next_phy = int(phy[-1] + lengths[-1])
        last_dispatched = np.flatnonzero(dispatch)
        self._checkpoint = Checkpoint(
            physic_msg_timestamp=int(enc.store_timestamp[-1]),
            logics_msg_timestamp=int(enc.store_timestamp[last_dispatched[-1]]) if len(last_dispatched)
            else self._checkpoint.logics_msg_timestamp,
            index_msg_timestamp=self.index.last_full_end_timestamp or self._checkpoint.index_msg_timestamp)

    def _assign_queue_offsets(self, topics, queue_ids, dispatch, given) -> np.ndarray:
        """Consecutive offsets per queue for dispatched records; 0 (or as given) for PREPARED/ROLLBACK."""
        out = np.zeros(len(topics), dtype=np.int64) if given is None else np.maximum(given, 0)
        counters = dict(self._queue_next)
        for i in np.flatnonzero(dispatch):
            key = (topics[i], int(queue_ids[i]))
            nxt = counters.get(key, 0)
            if given is not None and given[i] >= 0 and given[i] != nxt:
                raise MessageValidationError(
                    f"row {i}: queueOffset {int(given[i])} given for {key[0]}/{key[1]}, but that queue's next "
                    f"offset is {nxt}; drop the queueOffset column to have offsets assigned")
            out[i] = nxt
            counters[key] = nxt + 1
        self._queue_next = counters
        return out

    def _place(self, lengths: np.ndarray):
        """Physical offsets of the records and the BLANK markers closing full files (``doAppend``)."""
        size = self.sizes.commit_log_file_size
        pos = self.next_phy
        out = np.empty(len(lengths), dtype=np.int64)
        blanks = []
        i = 0
        while i < len(lengths):
            file_end = (pos // size + 1) * size
            room = file_end - pos
            window = lengths[i:i + room // 92 + 2]
            cum = np.cumsum(window)
            fit = int(np.searchsorted(cum, room - L.END_FILE_MIN_BLANK_LENGTH, side="right"))
            out[i:i + fit] = pos + np.concatenate(([0], cum[:fit - 1])) if fit else out[i:i]
            pos += int(cum[fit - 1]) if fit else 0
            i += fit
            if i < len(lengths) and fit < len(window):
                blanks.append((pos, file_end - pos))
                pos = file_end
        return out, blanks

    def _fd(self, path: Path, size: int) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self._fds[path] = fd
        return fd

    def _write_commitlog(self, records: pa.Array, phy: np.ndarray, blanks) -> None:
        size = self.sizes.commit_log_file_size
        offsets = value_offsets(records)
        data = memoryview(records.buffers()[2]) if records.buffers()[2] is not None else memoryview(b"")
        file_no = phy // size
        for f in np.unique(file_no):
            rows = np.flatnonzero(file_no == f)
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            path = self.root / L.COMMITLOG_DIR / L.offset_to_file_name(int(f) * size)
            os.pwrite(self._fd(path, size), data[offsets[lo]:offsets[hi]], int(phy[lo] - f * size))
        for pos, length in blanks:
            path = self.root / L.COMMITLOG_DIR / L.offset_to_file_name(pos - pos % size)
            os.pwrite(self._fd(path, size), L.BLANK_MARKER.pack(length, L.BLANK_MAGIC_CODE), pos % size)

    def _write_consume_queues(self, msgs, topics, phy, lengths, dispatch) -> None:
        enc = msgs.enc
        rows = np.flatnonzero(dispatch)
        if not len(rows):
            return
        tags_codes = _dispatch_tags_codes(msgs, topics, rows)
        cq_size = self.sizes.consume_queue_file_size
        groups: dict[tuple[str, int], list[int]] = {}
        for r in rows:
            groups.setdefault((topics[r], int(enc.queue_id[r])), []).append(r)
        code_of = dict(zip(rows.tolist(), tags_codes.tolist()))
        for (topic, qid), members in groups.items():
            members = np.array(members)
            units = np.zeros(len(members), dtype=L.CQ_UNIT_DTYPE)
            units["phy_offset"], units["size"] = phy[members], lengths[members]
            units["tags_code"] = [code_of[m] for m in members]
            byte = enc.queue_offset[members] * L.CQ_STORE_UNIT_SIZE
            directory = self.root / L.CONSUMEQUEUE_DIR / topic / str(qid)
            directory.mkdir(parents=True, exist_ok=True)
            file_no = byte // cq_size
            for f in np.unique(file_no):
                sel = np.flatnonzero(file_no == f)
                path = directory / L.offset_to_file_name(int(f) * cq_size)
                os.pwrite(self._fd(path, cq_size), units[sel].tobytes(), int(byte[sel[0]] - f * cq_size))

    def _write_index(self, msgs, topics, phy, tran) -> None:
        rows = np.flatnonzero(tran != L.TRANSACTION_ROLLBACK_TYPE)
        keys_offsets = np.asarray(msgs.keys.offsets)
        tokens = msgs.keys.flatten().to_pylist()
        uniq = msgs.uniq_key.to_pylist()
        full_keys, entry_rows = [], []
        for r in rows:
            if uniq[r] is not None:
                full_keys.append(f"{topics[r]}#{uniq[r]}")
                entry_rows.append(r)
            for t in tokens[keys_offsets[r]:keys_offsets[r + 1]]:
                full_keys.append(f"{topics[r]}#{t}")
                entry_rows.append(r)
        if not full_keys:
            return
        hashes = np.abs(java_string_hashes(full_keys))
        hashes = np.where(hashes >= 1 << 31, 0, hashes)
        entry_rows = np.array(entry_rows)
        self.index.put(hashes, phy[entry_rows], msgs.enc.store_timestamp[entry_rows])

    # --- closing -----------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync data files and the index, then write the checkpoint."""
        for fd in self._fds.values():
            os.fsync(fd)
        self.index.flush()
        write_checkpoint(self.root / L.CHECKPOINT_FILE, self._checkpoint)

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
        finally:
            self._closed = True
            self._lock.release()


def _dispatch_tags_codes(msgs: PreparedMessages, topics, rows) -> np.ndarray:
    """tagsCode per dispatched row: Java hash of TAGS (0 without), or for SCHEDULE_TOPIC_XXXX with a DELAY
    level the delivery time (``checkMessageAndReturnSize``)."""
    encoded = pc.dictionary_encode(msgs.tags.take(pa.array(rows)))
    dict_codes = java_string_hashes(encoded.dictionary)
    idx = np.asarray(pc.fill_null(encoded.indices, -1), dtype=np.int64)
    codes = np.where(idx >= 0, dict_codes[np.maximum(idx, 0)] if len(dict_codes) else 0, 0)
    delays = msgs.delay_level.take(pa.array(rows)).to_pylist() if msgs.delay_level.null_count < len(
        msgs.delay_level) else None
    if delays is not None:
        levels = L.DEFAULT_DELAY_LEVELS_MS
        for k, r in enumerate(rows):
            if topics[r] == L.SCHEDULE_TOPIC and delays[k] is not None:
                try:
                    level = min(int(delays[k]), len(levels))
                except ValueError as e:
                    raise MessageValidationError(f"row {r}: DELAY property {delays[k]!r} is not a level") from e
                if level > 0:
                    codes[k] = int(msgs.enc.store_timestamp[r]) + levels[level - 1]
    return codes


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
