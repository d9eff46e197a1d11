"""Index files (``index/<yyyyMMddHHmmssSSS>``): hash slots and chained 20-byte entries, read-only.

Layout in :mod:`.layout`. A file's slot count and entry capacity are not stored in it (the header's
``hashSlotCount`` counts *used* slots), so :func:`detect_index_sizes` infers them from the file length and the
slot/entry structure, and asks for the options when that is ambiguous.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ... import _native
from ...errors import IndexSizesAmbiguousError, StoreConfigError, StoreFormatError
from ..format import layout as L
from ..format.codec import read_be
from ..format.java_hash import index_key_hash
from .byte_source import as_path, map_file, scandir
from .strays import note, stray_reason

INDEX_NAME_DIGITS = 17  # yyyyMMddHHmmssSSS (UtilAll.timeMillisToHumanString)


@dataclass(frozen=True)
class IndexHeader:
    """The 40-byte header of an index file."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


def index_file_size(slots: int, max_entries: int) -> int:
    """``IndexFile`` size: header + slots × 4 + entries × 20."""
    return L.INDEX_HEADER_SIZE + slots * L.INDEX_SLOT_SIZE + max_entries * L.INDEX_ENTRY_SIZE


def put_keys(file, slots: int, max_entries: int, parts: list, path: Path) -> tuple[int, IndexHeader]:
    """``IndexFile.putKey`` for each key of ``parts`` in order while the file has room: entries, bucket slots and
    header written into ``file`` (the writable map of the index file at ``path``) by the native kernel. Returns
    how many keys were put and the new header.

    Each part is ``(hashes, rows, phy_offsets, store_timestamps)``: a hash per key (``indexKeyHashMethod``:
    0 ..= 2^31-1), the row of its record in the part's per-record columns (None: key k is record k), each
    record's physical offset and store time. The kernel looks each key's record up itself: a publication's
    batches are handed over as they are, nothing gathered or concatenated first."""
    def column(values, dtype):  # aligned too: a staged batch's columns are views of a memory-mapped file
        return np.require(values, dtype=dtype, requirements=["C", "A"])

    given = [(column(h, np.int32), None if r is None else column(r, np.int32), column(p, np.int64),
              column(t, np.int64)) for h, r, p, t in parts]
    problem, value = _native.put_index_keys(file, slots, max_entries, given)
    if problem == _native.INDEX_BAD_HEADER:
        raise StoreFormatError(f"index header's indexCount is outside 0..{max_entries}; the file is damaged: move "
                               "it out of index/ (the broker rebuilds what it needs)", str(path), 36)
    if problem in (_native.INDEX_BAD_HASH, _native.INDEX_BAD_ROW):
        hashes, rows, records = _key(given, value)
        if problem == _native.INDEX_BAD_HASH:
            raise StoreFormatError(f"key {value}: expected an indexKeyHashMethod value (0 ..= 2^31-1), found "
                                   f"{int(hashes)}", str(path))
        raise StoreFormatError(f"key {value}: expected the row of its record among the {records} given, found "
                               f"row {int(rows)}", str(path))
    return value, IndexHeader(*L.INDEX_HEADER.unpack_from(file, 0))


def _key(parts: list, k: int) -> tuple:
    """(hash, row or None, records of its part) of key number ``k`` of ``parts``."""
    for hashes, rows, phy, _ in parts:
        if k < len(hashes):
            return hashes[k], (None if rows is None else rows[k]), len(phy)
        k -= len(hashes)
    raise IndexError(k)


def index_key(topic: str, key: str) -> str:
    """``IndexService.buildKey``: what is hashed for a key of a topic."""
    return f"{topic}#{key}"


class IndexFile:
    """One index file, memory-mapped read-only."""

    def __init__(self, path: Path, slots: int, max_entries: int):
        self.path = as_path(path)
        self.slots = slots
        self.max_entries = max_entries
        self._map = None
        self.slot_table = np.zeros(0, dtype=">i4")
        self.entries = np.zeros(0, dtype=L.INDEX_ENTRY_DTYPE)
        self.header = read_index_header(self.path)
        if self.header.index_count <= 1:
            return  # holds no keys (IndexFile.selectPhyOffset skips it): its sizes do not matter
        expected = index_file_size(slots, max_entries)
        length = self.path.stat().st_size
        if length != expected:
            raise StoreConfigError(
                f"index file {self.path} is {length} bytes; {slots} hash slots and {max_entries} entries "
                f"make {expected} bytes (pass index_hash_slots / index_max_entries matching the broker)")
        if self.header.index_count > max_entries + 1:
            raise StoreFormatError(
                f"index header indexCount {self.header.index_count} is outside 0..{max_entries + 1}", self.path, 36)
        self._map = map_file(self.path, length)
        buf = self._map.array
        slot_end = L.INDEX_HEADER_SIZE + slots * L.INDEX_SLOT_SIZE
        self.slot_table = np.frombuffer(buf[L.INDEX_HEADER_SIZE:slot_end].data, dtype=">i4")
        self.entries = np.frombuffer(buf[slot_end:].data, dtype=L.INDEX_ENTRY_DTYPE)

    @property
    def name(self) -> str:
        return self.path.name

    def used_entries(self) -> np.ndarray:
        """Entries ``1 .. indexCount - 1`` (the broker never uses entry 0), read now (fetched, when remote)."""
        count = self.header.index_count
        if count <= 1 or self._map is None:
            return self.entries[:0]
        first = L.INDEX_HEADER_SIZE + self.slots * L.INDEX_SLOT_SIZE + L.INDEX_ENTRY_SIZE
        self._map.ensure(first, first + (count - 1) * L.INDEX_ENTRY_SIZE)
        return self.entries[1:count]

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``IndexFile.isTimeMatched``: does [begin, end] overlap the file's time range?"""
        b, e = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        """``IndexFile.selectPhyOffset``: walk the key's bucket chain newest first, appending to ``out`` the
        offsets whose key hash matches and whose time lies in [begin, end] (hash collisions included)."""
        count = self.header.index_count
        if count <= 1:
            return
        key_hash = index_key_hash(key)
        slot_at = L.INDEX_HEADER_SIZE + (key_hash % self.slots) * L.INDEX_SLOT_SIZE
        self._map.ensure(slot_at, slot_at + L.INDEX_SLOT_SIZE)  # a remote file: one small ranged read
        slot_value = int(self.slot_table[key_hash % self.slots])
        if slot_value <= L.INDEX_INVALID or slot_value > count:
            return
        current = slot_value
        steps = 0
        while len(out) < max_num:
            if current >= len(self.entries):
                raise StoreFormatError(f"index chain points at entry {current} past the file's "
                                       f"{len(self.entries)} entries", self.path)
            entry_at = L.INDEX_HEADER_SIZE + self.slots * L.INDEX_SLOT_SIZE + current * L.INDEX_ENTRY_SIZE
            self._map.ensure(entry_at, entry_at + L.INDEX_ENTRY_SIZE)
            entry = self.entries[current]
            time_diff = int(entry["time_diff"])
            if time_diff < 0:
                break
            time_read = self.header.begin_timestamp + time_diff * 1000
            if int(entry["key_hash"]) == key_hash and begin <= time_read <= end:
                out.append(int(entry["phy_offset"]))
            prev = int(entry["prev"])
            if prev <= L.INDEX_INVALID or prev > count or prev == current or time_read < begin:
                break
            current = prev
            steps += 1
            if steps > count:  # a cycle in a corrupt file must not hang the reader
                raise StoreFormatError(f"index chain for slot {key_hash % self.slots} loops", self.path)

    def close(self) -> None:
        self.slot_table = self.entries = None
        if self._map is not None:
            self._map.close()


def read_index_header(path: Path) -> IndexHeader:
    """The header of an index file; a file shorter than a header reads as an empty one (all zero)."""
    with as_path(path).open("rb") as fh:
        head = fh.read(L.INDEX_HEADER_SIZE)
    return IndexHeader(*L.INDEX_HEADER.unpack_from(head.ljust(L.INDEX_HEADER_SIZE, b"\0"), 0))


def list_index_files(directory: Path, strays: Optional[list] = None) -> list[Path]:
    """The index files of ``directory`` in name (= creation time) order. Entries that cannot be index files
    (hidden names, names that are not 17-digit times, sub-directories, files too short for a header) are
    skipped and appended to ``strays`` when given."""
    paths = []
    for entry in scandir(directory):
        reason = stray_reason(entry, INDEX_NAME_DIGITS)
        if reason is None and entry.stat().st_size < L.INDEX_HEADER_SIZE:
            reason = f"{entry.stat().st_size}-byte file, too short for an index header"
        if reason:
            note(strays, entry.path, reason)
        else:
            paths.append(as_path(entry.path))
    return sorted(paths)


def _candidate_slot_counts(length: int) -> np.ndarray:
    """Slot counts S with header + 4·S + 20·N == length for some N >= 1 (every fifth S at most)."""
    body = length - L.INDEX_HEADER_SIZE
    if body <= L.INDEX_ENTRY_SIZE or body % 4:
        return np.zeros(0, dtype=np.int64)
    first = next((s for s in range(1, 6) if (body - s * 4) % L.INDEX_ENTRY_SIZE == 0), None)
    if first is None:
        return np.zeros(0, dtype=np.int64)
    return np.arange(first, (body - L.INDEX_ENTRY_SIZE) // 4 + 1, 5, dtype=np.int64)


def _consistent(paths: list[Path], candidates: np.ndarray, length: int) -> np.ndarray:
    """The slot counts under which, in every non-empty file, the newest entry's bucket has that entry as its
    slot head — or an entry of the same bucket past it: a writer stopped between writing an entry and its slot
    and updating the header (the broker and rocketstore write entry, slot, header in that order), which a
    crashed store may show. Files are memory-mapped: only the header, a few slots and entries are touched."""
    buf = None
    for path in paths:
        mapped = map_file(path)
        try:
            # a file with no keys yet (zero-filled, or just rolled to) says nothing about the sizes
            mapped.ensure(0, L.INDEX_HEADER_SIZE)
            count = int(read_be(mapped.array, np.array([36]), 4)[0]) if mapped.size >= L.INDEX_HEADER_SIZE else 0
            if count <= 1:
                continue
            buf = mapped.array
            newest = count - 1
            entry_pos = L.INDEX_HEADER_SIZE + candidates * L.INDEX_SLOT_SIZE + newest * L.INDEX_ENTRY_SIZE
            fits = entry_pos + L.INDEX_ENTRY_SIZE <= length
            cands, entry_pos = candidates[fits], entry_pos[fits]
            mapped.ensure_ranges(entry_pos, entry_pos + L.INDEX_ENTRY_SIZE)
            key_hash = read_be(buf, entry_pos, 4)
            ok = key_hash >= 0
            bucket = np.where(ok, key_hash % np.maximum(cands, 1), 0)
            mapped.ensure_ranges(L.INDEX_HEADER_SIZE + bucket * L.INDEX_SLOT_SIZE,
                                 L.INDEX_HEADER_SIZE + bucket * L.INDEX_SLOT_SIZE + L.INDEX_SLOT_SIZE)
            head = read_be(buf, L.INDEX_HEADER_SIZE + bucket * L.INDEX_SLOT_SIZE, 4)
            head_pos = L.INDEX_HEADER_SIZE + cands * L.INDEX_SLOT_SIZE + head * L.INDEX_ENTRY_SIZE
            ahead = ok & (head > newest) & (head_pos + L.INDEX_ENTRY_SIZE <= length)
            mapped.ensure_ranges(head_pos[ahead], head_pos[ahead] + 4)
            head_hash = read_be(buf, np.where(ahead, head_pos, 0), 4)
            ok &= (head == newest) | (ahead & (head_hash >= 0) & (head_hash % np.maximum(cands, 1) == bucket))
            candidates = cands[ok]
        finally:
            buf = None  # the views must die before the map closes (an error's traceback may still hold some)
            mapped.close()
        if len(candidates) <= 1:
            break
    return candidates


def _fully_consistent(paths: list[Path], slots: int, length: int) -> bool:
    """Every used slot points at an entry of its own bucket and every entry links only backwards (entries
    a stopped writer wrote past the header's count included, see :func:`_consistent`)."""
    entries_count = (length - L.INDEX_HEADER_SIZE - slots * L.INDEX_SLOT_SIZE) // L.INDEX_ENTRY_SIZE
    for path in paths:
        with as_path(path).open("rb") as fh:
            head = fh.read(L.INDEX_HEADER_SIZE + slots * L.INDEX_SLOT_SIZE)
            count = int.from_bytes(head[36:40], "big", signed=True)
            if count <= 1:
                continue
            if count > entries_count + 1:
                return False
            table = np.frombuffer(head[L.INDEX_HEADER_SIZE:], dtype=">i4").astype(np.int64)
            used = np.flatnonzero(table > 0)
            written = max(count, int(table[used].max()) + 1 if len(used) else 0)
            if written > entries_count + 1:
                return False
            entries = np.frombuffer(fh.read(written * L.INDEX_ENTRY_SIZE), dtype=L.INDEX_ENTRY_DTYPE)
        if len(entries) < written:
            return False
        hashes = entries["key_hash"].astype(np.int64)
        if (hashes[1:] < 0).any() or (entries["prev"][1:].astype(np.int64) >= np.arange(1, written)).any():
            return False
        if ((hashes[table[used]] % slots) != used).any():
            return False
    return True


def detect_index_sizes(paths: list[Path], slots: Optional[int], max_entries: Optional[int]):
    """(slots, max_entries) for the index files, from options, file lengths and the slot/entry structure.

    For a candidate slot count S, the newest entry (indexCount - 1) must be what its own bucket's slot points
    at; only the true S passes that for every non-empty file. Returns (None, None) when there are no files.
    """
    if not paths:
        return slots, max_entries
    # files that hold no keys yet (zero-filled, or the one a broker has just rolled to) are read without sizes
    keyed = [p for p in paths if read_index_header(p).index_count > 1]
    lengths = Counter(p.stat().st_size for p in keyed or paths)
    if slots is not None and max_entries is not None:
        # sizes given: they must fit the files; one odd (truncated) file is named when a lookup reaches it
        expected = index_file_size(slots, max_entries)
        if expected not in lengths:
            odd = next(p for p in keyed or paths)
            raise StoreConfigError(
                f"index_hash_slots={slots} and index_max_entries={max_entries} make {expected}-byte index files, "
                f"but {odd} is {odd.stat().st_size} bytes")
        return slots, max_entries
    if len(lengths) != 1:
        usual = max(lengths, key=lambda n: (lengths[n], n))
        odd = next(p for p in keyed or paths if p.stat().st_size != usual)
        raise IndexSizesAmbiguousError(
            f"index files must all have the same length: expected {usual} bytes like "
            f"{next(p for p in keyed or paths if p.stat().st_size == usual)}, found {odd.stat().st_size} bytes "
            f"in {odd} (a truncated or half-copied file?); {PASS_SIZES}")
    length = next(iter(lengths))
    paths = keyed or paths
    default = int(L.DEFAULT_INDEX_HASH_SLOTS)
    default_entries = (length - L.INDEX_HEADER_SIZE - default * L.INDEX_SLOT_SIZE) // L.INDEX_ENTRY_SIZE
    if slots in (None, default) and max_entries in (None, default_entries) and default_entries >= 1 and \
            (length - L.INDEX_HEADER_SIZE - default * L.INDEX_SLOT_SIZE) % L.INDEX_ENTRY_SIZE == 0 and \
            _consistent(paths, np.array([default], dtype=np.int64), length).size:
        # the broker default fits every file: the answer the candidate search below prefers, found without
        # listing every slot count a 400 MB file admits (21M candidates, 170 MB)
        return default, default_entries
    candidates = _candidate_slot_counts(length)
    if slots is not None:
        candidates = candidates[candidates == slots]
    if max_entries is not None:
        candidates = candidates[(length - L.INDEX_HEADER_SIZE - candidates * 4) == max_entries * 20]
    if len(candidates) == 0:
        error = IndexSizesAmbiguousError if slots is None and max_entries is None else StoreConfigError
        raise error(
            f"no hash-slot count fits index file {paths[0]} of {length} bytes with the given options "
            f"(index_hash_slots={slots}, index_max_entries={max_entries})")
    preferred = candidates[candidates == L.DEFAULT_INDEX_HASH_SLOTS]
    if len(preferred) and _consistent(paths, preferred, length).size:
        candidates = preferred  # the broker default fits every file: no need to read more of them
    else:
        candidates = _consistent(paths, candidates, length)
    if len(candidates) > 1:
        candidates = np.array([c for c in candidates if _fully_consistent(paths, int(c), length)], dtype=np.int64)
    if len(candidates) == 1:
        s = int(candidates[0])
        return s, (length - L.INDEX_HEADER_SIZE - s * L.INDEX_SLOT_SIZE) // L.INDEX_ENTRY_SIZE
    if len(candidates) == 0:
        error = IndexSizesAmbiguousError if slots is None and max_entries is None else StoreConfigError
        raise error(f"index files such as {paths[0]} do not match any hash-slot count (a damaged index file?); "
                    + PASS_SIZES)
    default_ok = slots is None and int(L.DEFAULT_INDEX_HASH_SLOTS) in set(candidates.tolist()) and \
        index_file_size(L.DEFAULT_INDEX_HASH_SLOTS, L.DEFAULT_INDEX_MAX_ENTRIES) == length
    if default_ok:
        return L.DEFAULT_INDEX_HASH_SLOTS, L.DEFAULT_INDEX_MAX_ENTRIES
    raise IndexSizesAmbiguousError(
        f"cannot tell the index sizes from {len(paths)} index file(s) of {length} bytes such as {paths[0]}: "
        f"{len(candidates)} slot counts fit (e.g. {candidates[:3].tolist()}); {PASS_SIZES}")


# what every "cannot tell the index sizes" error ends with
PASS_SIZES = ("pass index_hash_slots and index_max_entries (Spark options indexHashSlots / indexMaxEntries, CLI "
              "--index-hash-slots / --index-max-entries; the broker's maxHashSlotNum / maxIndexNum). Reads that "
              "do not use the index work without them")
