"""``EncodedBatch``: records encoded ahead of publication, with what publishing still has to fill in.

Everything that does not depend on where a record lands is done here (by writers and Spark tasks, in
parallel): properties, UNIQ_KEY, body compression and CRC, the record bytes, the index key hashes. For the store
writer, what only the publisher knows — physical offset, queue offset and (when not given) the store timestamp —
is left as zeros at fixed positions and patched at publication. A Spark task reserves them instead
(:mod:`.reservation`), encodes its records final and stages them at the reserved offsets (``phy``) in a job's
staged commit log, and saves the rest here as metadata; the publisher loads the metadata back and finds the bytes
by ``phy``.
"""

from __future__ import annotations

import dataclasses
import functools
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import StoreFormatError
from ..files.index_file import index_key
from ..format import layout as L
from ..format.encoder import (
    UniqKeyFactory,
    encode_pieces,
    encode_records,
    piece_scratch_size,
    record_lengths,
    record_offsets,
)
from ..format.java_hash import java_string_hash, java_string_hashes
from .message_input import PreparedMessages, prepare_messages

META_SUFFIX = ".meta.npy"

#: ``write(at, data)``: takes encoded record bytes that belong at commit-log offset ``at`` (see :func:`encode_table`)
PieceWriter = Callable[[int, np.ndarray], None]


@dataclass
class EncodedBatch:
    data: np.ndarray  # uint8, records end to end
    record_offsets: np.ndarray  # int64, n + 1
    topic_names: list
    topic_idx: np.ndarray  # int32 index into topic_names
    queue_id: np.ndarray
    queue_offset_given: np.ndarray  # int64, -1 where the publisher assigns it
    dispatch: np.ndarray  # bool: NOT_TYPE / COMMIT records go to consume queues
    tags_code: np.ndarray  # int64 (SCHEDULE_TOPIC_XXXX rows: delay_ms is added to the store time instead)
    delay_ms: np.ndarray  # int64, > 0 only for SCHEDULE_TOPIC_XXXX rows with a DELAY level
    store_ts: np.ndarray  # int64
    ts_given: np.ndarray  # bool: False → the publisher stamps its own time
    ts_pos: np.ndarray  # int64, position of STORETIMESTAMP inside the record (56 or 68)
    entry_rec: np.ndarray  # int32: record of each index entry (UNIQ_KEY first, then KEYS tokens)
    entry_hash: np.ndarray  # int32: indexKeyHashMethod(topic#key)
    phy: Optional[np.ndarray] = None  # int64: where a staged batch's records are, in its job's staged commit log
    staged_queue_offset: Optional[np.ndarray] = None  # int64: the queue offsets a staged batch's records hold
    chunk_starts: Optional[np.ndarray] = None  # int64: first row of each reservation (staged batches)
    staged_dir: Optional[Path] = None  # the staged commit log holding the record bytes (loaded batches)
    staged_file_size: int = 0  # its file size
    _queue_groups: Optional[tuple] = field(default=None, repr=False, compare=False)  # see queue_groups()

    def __len__(self) -> int:
        return len(self.topic_idx)

    def queue_groups(self) -> tuple[np.ndarray, np.ndarray, list]:
        """The dispatched rows grouped by queue, computed once for both offset assignment and consume-queue
        writes: ``(rows, bounds, queues)`` where ``rows[bounds[g]:bounds[g + 1]]`` are the rows of queue
        ``queues[g]`` (a ``(topic, queue id)`` pair), in row order."""
        if self._queue_groups is None:
            self._queue_groups = group_by_queue(self.dispatch, self.topic_idx, self.queue_id, self.topic_names)
        return self._queue_groups

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.record_offsets)

    def topics(self) -> list:
        names = self.topic_names
        return [names[i] for i in self.topic_idx]

    @staticmethod
    def save_meta(parts: list["EncodedBatch"], stem: Path) -> None:
        """Write ``<stem>.meta.npy``: the metadata of staged batches (each part one reservation) as one batch,
        everything but the record bytes, as consecutive ``.npy`` arrays (field names, topic names, then one array
        per field; a zip archive would CRC every byte when read back). A field is written part after part, as
        ``np.save`` would write the parts concatenated: the concatenation is never built in memory. A per-row
        field holding one value on every row (the usual delay, given offsets, timestamp position...) is written as
        that one value, and index entries as 32-bit numbers: every byte written here is fresh page-cache memory,
        written by a task and read by the driver once. Not fsynced: only the same job's driver reads it back,
        through the same page cache."""
        every_name = [t for part in parts for t in part.topic_names]
        numbering = pc.dictionary_encode(pa.array(every_name, pa.string()))  # topics numbered as they appear
        number = np.asarray(numbering.indices, dtype=np.int32)
        sizes = np.array([len(p) for p in parts], dtype=np.int64)
        pieces: dict[str, list] = {name: [] for name in _META_FIELDS}
        pieces["record_offsets"].append(np.zeros(1, np.int64))
        pieces["chunk_starts"].append(np.cumsum(sizes) - sizes)
        base_bytes = base_rows = base_names = 0
        for part in parts:
            remap = number[base_names:base_names + len(part.topic_names)]
            pieces["topic_idx"].append(remap[part.topic_idx] if len(part.topic_idx) else part.topic_idx)
            pieces["record_offsets"].append(part.record_offsets[1:] + base_bytes)
            pieces["entry_rec"].append(part.entry_rec + base_rows)
            for name in _META_FIELDS_AS_STAGED:
                pieces[name].append(getattr(part, name))
            base_bytes += int(part.record_offsets[-1])
            base_rows += len(part)
            base_names += len(part.topic_names)
        pieces["topic_idx"] = [p.astype(np.int32, copy=False) for p in pieces["topic_idx"]]
        if base_rows > 1:
            for name in _META_ROW_FIELDS:
                value = _one_value(pieces[name])
                if value is not None:
                    pieces[name] = [value]
        with open(str(stem) + META_SUFFIX, "wb") as fh:
            np.save(fh, np.array(_META_FIELDS, dtype=str))
            np.save(fh, np.array(numbering.dictionary.to_pylist(), dtype=object).astype(str))
            for name in _META_FIELDS:
                _save_concatenated(fh, pieces[name], _META_NARROW.get(name))

    @classmethod
    def load(cls, stem: Path, staged_dir: Path, staged_file_size: int) -> "EncodedBatch":
        """The staged batch at ``stem``: its metadata; record bytes are read later with :meth:`read_into`.

        The numeric arrays are read-only views of the file's memory map: a job's metadata is some sixty bytes
        per message, and mapping the page cache spares copying it into fresh memory. A field saved as its one
        value is that value broadcast over the rows (read-only, no memory per row)."""
        with open(str(stem) + META_SUFFIX, "rb") as fh:
            names = np.load(fh, allow_pickle=False).tolist()
            topic_names = np.load(fh, allow_pickle=False).tolist()
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            fields = {name: _mapped_npy(fh, mm) for name in names}
        rows = len(fields["record_offsets"]) - 1
        for name in _META_ROW_FIELDS:  # a field written as its one value: that value on every row, no memory
            if name in fields and len(fields[name]) == 1 and rows != 1:
                fields[name] = np.broadcast_to(fields[name], (rows,))
        return cls(data=np.zeros(0, np.uint8), topic_names=[str(t) for t in topic_names],
                   staged_dir=Path(staged_dir), staged_file_size=int(staged_file_size), **fields)

    def chunks(self) -> list[tuple[int, int]]:
        """Row ranges [lo, hi) of the reservations this staged batch was written in."""
        bounds = np.append(self.chunk_starts, len(self)).astype(np.int64)
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def slice_rows(self, lo: int, hi: int) -> "EncodedBatch":
        """Rows [lo, hi) as a batch of their own (metadata only for a staged batch)."""
        # entries are in record order: the rows' entries are one run, found without scanning them all (a
        # job of interleaved reservations slices each batch many times)
        keep = slice(*np.searchsorted(self.entry_rec, [lo, hi]))
        per_row = ("topic_idx", "queue_id", "queue_offset_given", "dispatch", "tags_code", "delay_ms", "store_ts",
                   "ts_given", "ts_pos", "phy", "staged_queue_offset")
        base = int(self.record_offsets[lo])
        data = self.data[base:int(self.record_offsets[hi])] if len(self.data) else self.data
        return EncodedBatch(
            data=data, record_offsets=self.record_offsets[lo:hi + 1] - base, topic_names=self.topic_names,
            entry_rec=self.entry_rec[keep] - lo, entry_hash=self.entry_hash[keep], chunk_starts=np.zeros(1, np.int64),
            staged_dir=self.staged_dir, staged_file_size=self.staged_file_size,
            **{k: (getattr(self, k)[lo:hi] if getattr(self, k) is not None else None) for k in per_row})

    def read_into(self, start: int, stop: int, out: np.ndarray) -> np.ndarray:
        """Record bytes [start, stop) (record boundaries) copied into the front of ``out``, a reusable scratch
        buffer (reading with ``preadv`` into it avoids faulting in fresh memory for every chunk)."""
        view = out[:stop - start]
        if self.staged_dir is None:
            view[:] = self.data[start:stop]
            return view
        lo, hi = np.searchsorted(self.record_offsets, [start, stop])
        phy, lengths = self.phy[lo:hi], self.lengths[lo:hi]
        size = self.staged_file_size
        # runs of records that are contiguous in one staged file (a run ends at a file end or a reservation gap)
        breaks = np.flatnonzero((phy[1:] != phy[:-1] + lengths[:-1]) | (phy[1:] // size != phy[:-1] // size)) + 1
        for a, b in zip(np.concatenate(([0], breaks)), np.concatenate((breaks, [len(phy)]))):
            first, nbytes = int(phy[a]), int(phy[b - 1] + lengths[b - 1] - phy[a])
            dest = int(self.record_offsets[lo + a]) - start
            path = self.staged_dir / L.offset_to_file_name(first - first % size)
            fd = os.open(path, os.O_RDONLY)
            try:
                got = os.preadv(fd, [memoryview(view[dest:dest + nbytes])], first % size)
            finally:
                os.close(fd)
            if got != nbytes:
                raise StoreFormatError(f"staged records end early: expected {nbytes} bytes, found {got}",
                                       str(path), first % size)
        return view


def group_by_queue(dispatch: np.ndarray, topic_idx: np.ndarray, queue_id: np.ndarray,
                   topic_names: list) -> tuple[np.ndarray, np.ndarray, list]:
    """The ``dispatch`` rows grouped by queue: ``(rows, bounds, queues)`` (see :meth:`EncodedBatch.queue_groups`)."""
    rows = np.flatnonzero(dispatch)
    topic, qid = topic_idx[rows].astype(np.int64), queue_id[rows].astype(np.int64)
    width = int(qid.max()) + 1 if len(rows) else 1
    slots = len(topic_names) * width
    if slots <= max(4 * len(rows), 1 << 16):
        # the (topic, queue) pairs numbered densely: counting them finds the queues, in the same order as
        # sorting the pairs would, and a table lookup numbers the rows (no hashing, no binary search)
        key = topic * width + qid
        counts = np.bincount(key, minlength=slots)
        present = np.flatnonzero(counts)
        rank = np.zeros(slots, dtype=np.int64)
        rank[present] = np.arange(len(present))
        inv = rank[key]
        uniq_topic, uniq_qid, per_queue = present // width, present % width, counts[present]
    else:  # queue ids too sparse to number densely
        pairs = (topic << 32) | qid
        uniq = np.unique(pairs)
        inv = np.searchsorted(uniq, pairs)
        uniq_topic, uniq_qid = uniq >> 32, uniq & 0xFFFFFFFF
        per_queue = np.bincount(inv, minlength=len(uniq))
    # a stable sort of small ints is a radix sort: far cheaper than sorting the 64-bit pairs
    order = np.argsort(inv.astype(np.uint16) if len(per_queue) <= 0xFFFF else inv, kind="stable")
    bounds = np.zeros(len(per_queue) + 1, dtype=np.int64)
    np.cumsum(per_queue, out=bounds[1:])
    # thousands of queues per batch: the pairs are built from two lists, not per element
    queues = list(zip(map(topic_names.__getitem__, uniq_topic.tolist()), uniq_qid.tolist()))
    return rows[order], bounds, queues


def consecutive_offsets(n: int, groups: tuple, first: np.ndarray) -> np.ndarray:
    """Queue offsets of ``n`` rows: the rows of each queue of ``groups`` (:func:`group_by_queue`) numbered from
    that queue's ``first`` offset on, in row order; 0 for the rows no queue references."""
    rows, bounds, _ = groups
    out = np.zeros(n, dtype=np.int64)
    if len(rows):
        out[rows] = np.repeat(first - bounds[:-1], np.diff(bounds)) + np.arange(len(rows))
    return out


#: the fields of a staged batch's metadata file, in their order there, and those of them copied from the parts
_META_FIELDS = ("record_offsets", "topic_idx", "queue_id", "queue_offset_given", "dispatch", "tags_code", "delay_ms",
                "store_ts", "ts_given", "ts_pos", "entry_rec", "entry_hash", "phy", "staged_queue_offset",
                "chunk_starts")
_META_FIELDS_AS_STAGED = ("queue_id", "queue_offset_given", "dispatch", "tags_code", "delay_ms", "store_ts",
                          "ts_given", "ts_pos", "entry_hash", "phy", "staged_queue_offset")
#: the per-row fields written as one value when every row holds the same (see save_meta)
_META_ROW_FIELDS = ("topic_idx", "queue_id", "queue_offset_given", "dispatch", "tags_code", "delay_ms", "store_ts",
                    "ts_given", "ts_pos")
#: fields saved as int32 whatever type a batch holds them in: the row of an entry (a batch has fewer than 2**31
#: rows) and its key hash (``indexKeyHashMethod``: an int made non-negative)
_META_NARROW = {"entry_rec": np.int32, "entry_hash": np.int32}


def _one_value(pieces: list) -> Optional[np.ndarray]:
    """The one value every element of ``pieces`` (arrays, some maybe empty) holds, as a 1-element array; None when
    they hold more than one."""
    first = next((p[:1] for p in pieces if len(p)), None)
    if first is None:
        return None
    for p in pieces:
        if len(p) and not (p == first[0]).all():
            return None
    return np.array(first)


def _save_concatenated(fh, pieces: list, dtype=None) -> None:
    """What ``np.save(fh, np.concatenate(pieces).astype(dtype))`` writes (``dtype`` by default the pieces' common
    type), without building the concatenation."""
    dtype = np.result_type(*pieces) if dtype is None else np.dtype(dtype)
    header = np.lib.format.header_data_from_array_1_0(np.empty(0, dtype))
    header["shape"] = (sum(len(p) for p in pieces),)
    np.lib.format.write_array_header_1_0(fh, header)
    for piece in pieces:
        fh.write(np.ascontiguousarray(piece, dtype=dtype).data)


#: ``place(lengths, (queues, counts))``: reserves room for records of ``lengths`` that dispatch ``counts`` records to
#: each of ``queues`` ((topic, queue id) pairs); returns their physical offsets, each queue's first offset, and their
#: store time (see :func:`encode_table`)
Placer = Callable[[np.ndarray, tuple[list, np.ndarray]], tuple[np.ndarray, np.ndarray, int]]


def encode_table(table: pa.Table, *, store_host: str, uniq_factory: UniqKeyFactory,
                 max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE, place: Optional[Placer] = None,
                 scratch: Optional[np.ndarray] = None, write: Optional[PieceWriter] = None) -> EncodedBatch:
    """Check, resolve and encode the messages of ``table`` (see :mod:`.message_input`): what the store writer
    does before publishing and a Spark task before staging.

    Without ``place`` the records' physical and queue offsets are left zero and store times not given are the
    time of encoding (all patched when published). ``place`` (a :data:`Placer`) reserves where the records go,
    their queue offsets and store time, and they are encoded final (the batch's ``phy``, ``staged_queue_offset``
    and ``store_ts``). ``scratch`` is memory the records may be encoded into (see
    :func:`~..format.encoder.encode_records`). With ``place``, ``write(at, data)`` takes the records as they are
    encoded, a few MiB at a time (bytes that belong at commit-log offset ``at``, in pieces aligned as
    :func:`~..format.encoder.encode_pieces` cuts them; ``data`` valid during the call only): the batch then keeps
    no record bytes (``data`` empty)."""
    prepared = prepare_messages(table, store_host=store_host, uniq_factory=uniq_factory,
                                max_message_size=max_message_size)
    if "storeTimestamp" in table.column_names:
        column = table.column("storeTimestamp")
        ts_given = np.asarray(pc.is_valid(column.combine_chunks() if isinstance(column, pa.ChunkedArray)
                                          else column))
    else:
        ts_given = np.zeros(table.num_rows, dtype=bool)
    return encode_batch(prepared, ts_given, place=place, scratch=scratch, write=write)


def encode_batch(msgs: PreparedMessages, ts_given: np.ndarray, *, place: Optional[Placer] = None,
                 scratch: Optional[np.ndarray] = None, write: Optional[PieceWriter] = None) -> EncodedBatch:
    """Encode prepared messages; see :func:`encode_table`."""
    enc = msgs.enc
    n = len(enc)
    ts_given = np.asarray(ts_given, dtype=bool)
    tran = enc.sysflag & L.TRANSACTION_TYPE_MASK
    dispatch = (tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT_TYPE)
    topic_names = msgs.topic_codes.dictionary.to_pylist()
    topic_idx = np.asarray(msgs.topic_codes.indices, dtype=np.int32)
    queue_id = enc.queue_id.astype(np.int32)
    groups = staged_queue_offset = None
    if place is None:
        phy = None
        data, offsets = encode_records(enc, np.zeros(n, dtype=np.int64))
    else:
        lengths = record_lengths(enc)
        groups = group_by_queue(dispatch, topic_idx, queue_id, topic_names)
        phy, first, stamp = place(lengths, (groups[2], np.diff(groups[1])))
        phy = np.asarray(phy, dtype=np.int64)
        # the records are encoded final: the offsets and time a broker appending them now would give them
        staged_queue_offset = consecutive_offsets(n, groups, np.asarray(first, dtype=np.int64))
        enc = dataclasses.replace(enc, queue_offset=staged_queue_offset,
                                  store_timestamp=np.where(ts_given, enc.store_timestamp, stamp))
        if write is None:
            data, offsets = encode_records(enc, phy, lengths=lengths, scratch=scratch)
        else:
            offsets = record_offsets(lengths)
            need = piece_scratch_size(lengths)
            pieces = scratch if scratch is not None and len(scratch) >= need else np.empty(need, np.uint8)
            # a piece never spans a gap of the placement (the BLANK closing a commit-log file)
            for at, piece in encode_pieces(enc, phy, offsets, pieces):
                write(at, piece)
            data = np.zeros(0, np.uint8)
    tags_code, delay_ms = _tags_codes(msgs, topic_names, topic_idx)
    entry_rec, entry_hash = _index_entries(msgs, topic_names, topic_idx, tran)
    ts_pos = L.BORN_HOST_POSITION + np.where(enc.sysflag & L.BORNHOST_V6_FLAG, L.IPV6_HOST_LENGTH,
                                             L.IPV4_HOST_LENGTH)
    given = msgs.given_queue_offset if msgs.given_queue_offset is not None else np.full(n, -1, np.int64)
    return EncodedBatch(
        data=data, record_offsets=offsets, topic_names=topic_names, topic_idx=topic_idx,
        queue_id=queue_id, queue_offset_given=np.where(dispatch, given, -1),
        dispatch=dispatch, tags_code=tags_code, delay_ms=delay_ms, store_ts=enc.store_timestamp.astype(np.int64),
        ts_given=ts_given, ts_pos=ts_pos.astype(np.int64), entry_rec=entry_rec,
        entry_hash=entry_hash, phy=phy, staged_queue_offset=staged_queue_offset, _queue_groups=groups)


def _tags_codes(msgs: PreparedMessages, topic_names, topic_idx) -> tuple[np.ndarray, np.ndarray]:
    """Java hash of TAGS per row (0 without); DELAY levels of SCHEDULE_TOPIC_XXXX rows as delays in ms."""
    n = len(topic_idx)
    encoded = pc.dictionary_encode(msgs.tags)
    dict_codes = java_string_hashes(encoded.dictionary)
    idx = np.asarray(pc.fill_null(encoded.indices, -1), dtype=np.int64)
    codes = np.where(idx >= 0, dict_codes[np.maximum(idx, 0)] if len(dict_codes) else 0, 0).astype(np.int64)
    delay_ms = np.zeros(n, dtype=np.int64)
    if L.SCHEDULE_TOPIC in topic_names and msgs.delay_level.null_count < n:
        schedule = topic_idx == topic_names.index(L.SCHEDULE_TOPIC)
        levels_ms = L.DEFAULT_DELAY_LEVELS_MS
        for r in np.flatnonzero(schedule):
            text = msgs.delay_level[int(r)].as_py()
            if text is None:
                continue
            try:
                level = min(int(text), len(levels_ms))
            except ValueError as e:
                from ...errors import MessageValidationError

                raise MessageValidationError(f"row {int(r)}: DELAY property {text!r} is not a delay level") from e
            if level > 0:
                delay_ms[r] = levels_ms[level - 1]
    return codes, delay_ms


def _index_entries(msgs: PreparedMessages, topic_names: list, topic_idx: np.ndarray, tran: np.ndarray):
    """(record, hash) of every index entry in ``buildIndex`` order; ROLLBACK records are not indexed.

    An entry's key is ``topic#key``; its hash continues from the hash of ``topic#`` (one per topic) over the
    key, so the uniq keys and key tokens are hashed where they are, never copied.
    """
    n = len(tran)
    indexed = tran != L.TRANSACTION_ROLLBACK_TYPE
    has_uniq = np.asarray(pc.is_valid(msgs.uniq_key)) & indexed
    key_offsets = value_offsets_list(msgs.keys)
    tokens = np.diff(key_offsets)
    per_row = has_uniq + np.where(indexed, tokens, 0)
    ends = np.cumsum(per_row)
    total = int(ends[-1]) if n else 0
    if total == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    first = ends - per_row  # each row's first entry
    prefix = np.array([_topic_prefix_hash(topic) for topic in topic_names], dtype=np.int64)[topic_idx]
    # every entry is written once, where it belongs: the row's UNIQ_KEY first, then its KEYS tokens
    entry_rec = np.empty(total, dtype=np.int32)
    entry_hash = np.empty(total, dtype=np.int64)
    rows = np.flatnonzero(has_uniq)
    if len(rows):
        entry_rec[first[rows]] = rows
        entry_hash[first[rows]] = java_string_hashes(msgs.uniq_key, seeds=prefix)[rows]
    if total > len(rows):
        token_row = np.repeat(np.arange(n), tokens)
        key_hash = java_string_hashes(msgs.keys.flatten(), seeds=prefix[token_row])
        slot = first[token_row] + has_uniq[token_row] + np.arange(len(token_row)) - key_offsets[token_row]
        if not indexed.all():  # ROLLBACK rows' tokens have no entries
            kept = indexed[token_row]
            token_row, slot, key_hash = token_row[kept], slot[kept], key_hash[kept]
        entry_rec[slot] = token_row
        entry_hash[slot] = key_hash
    hashes = np.abs(entry_hash)
    return entry_rec, np.where(hashes >= 1 << 31, 0, hashes).astype(np.int32)


@functools.lru_cache(maxsize=8192)
def _topic_prefix_hash(topic: str) -> int:
    """Java hash of ``topic#``, the start of every index key of ``topic`` (the same few topics, batch after
    batch)."""
    return java_string_hash(index_key(topic, ""))


def _mapped_npy(fh, mm: mmap.mmap) -> np.ndarray:
    """The ``.npy`` array at ``fh``'s position as a view of ``mm`` (its header read from ``fh``, which is
    left just past the array's data)."""
    version = np.lib.format.read_magic(fh)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(fh)
    count = int(np.prod(shape, dtype=np.int64))
    at = fh.tell()
    fh.seek(at + count * dtype.itemsize)
    array = np.frombuffer(mm, dtype=dtype, count=count, offset=at)
    return array.reshape(shape, order="F" if fortran_order else "C")


def value_offsets_list(arr: pa.ListArray) -> np.ndarray:
    """The n + 1 offsets of a list array (slices respected), relative to its flattened values."""
    raw = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    return (raw - raw[0]).astype(np.int64)
