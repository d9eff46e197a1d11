"""RocksDB consume queues (``storeType=defaultRocksDB``): ``consumequeue/`` as a RocksDB database
(:mod:`..format.rocksdb_cq`), read through the rocksdict binding (RocksDB's C++ library in PyPI wheels).

The database is opened READ-ONLY and never modified: RocksDB's read-only mode writes nothing, but the binding
leaves a small config file in the directory it opens, so it opens a private directory of links to the
database's files instead. A directory locked by a running broker, written by a newer RocksDB, or damaged is a
clear error naming it.

:class:`RocksDBConsumeQueue` answers the same questions as :class:`~.consume_queue.ConsumeQueue` (units of queue
offset ranges, first/max offsets, tag-hash matches) from the ``default`` and ``offset`` column families.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

from ...errors import StoreFormatError, StoreLockedError
from ..format import layout as L
from ..format.rocksdb_cq import (
    CHECKPOINT_TOPIC,
    CHECKPOINT_VALUE,
    DEFAULT_CF,
    MAX_BYTES,
    MIN_BYTES,
    OFFSET_CF,
    ROCKSDB_CQ_VALUE_DTYPE,
    ROCKSDB_CQ_VALUE_SIZE,
    ROCKSDB_OFFSET_VALUE,
    cq_key,
    parse_cq_offset,
    parse_offset_key,
    queue_prefix,
)
from .byte_source import as_path, is_remote, scandir

LOCK_FILE = "LOCK"  # RocksDB's lock file: a running broker holds an fcntl write lock on it
OPTIONS_PREFIX = "OPTIONS-"
SCAN_UNITS = 4096  # units fetched per multi-get
#: RocksDB's words for files of a format it does not know (a newer release wrote them)
NEWER_FORMAT_MESSAGES = ("unsupported format_version", "newer version", "unknown footer version")


def _rocksdb_version(directory: Path) -> str:
    """``rocksdb_version`` of the newest OPTIONS file of a database directory ('' when none says)."""
    files = sorted(directory.glob(OPTIONS_PREFIX + "*"), key=lambda p: int(p.name[len(OPTIONS_PREFIX):] or 0)
                   if p.name[len(OPTIONS_PREFIX):].isdigit() else -1)
    for line in (files[-1].read_text(errors="replace").splitlines() if files else []):
        if line.strip().startswith("rocksdb_version="):
            return line.split("=", 1)[1].strip()
    return ""


def _binding_version() -> str:
    """The RocksDB version the binding bundles (what it writes into a scratch database's OPTIONS file)."""
    from rocksdict import Options, Rdict

    scratch = Path(tempfile.mkdtemp(prefix="rocketstore-rocksdb-version-"))
    try:
        Rdict(str(scratch / "db"), Options(raw_mode=True)).close()
        return _rocksdb_version(scratch / "db")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _newer(written: str, reader: str) -> bool:
    def parts(v):
        return tuple(int(p) for p in v.split(".") if p.isdigit())
    return bool(written and reader) and parts(written) > parts(reader)


def check_not_locked(directory: Path) -> None:
    """A broker that has the database open holds a write lock on ``LOCK``: reading it then is refused."""
    lock = directory / LOCK_FILE
    if is_remote(lock) or not lock.is_file():
        return  # an object store has no locks: a copy there is never open in a broker
    with open(lock, "rb") as fh:
        try:
            fcntl.lockf(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)  # a read lock on a read-only descriptor
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise StoreLockedError(
                    f"RocksDB consume queue {directory} is locked (expected no process holding {lock}, found "
                    "a lock held, e.g. by a running broker); stop the broker or read a copy of the store") from e
            raise
        fcntl.lockf(fh.fileno(), fcntl.LOCK_UN)


class RocksDBConsumeQueueStore:
    """The ``consumequeue/`` database, opened read-only through a directory of links to its files."""

    def __init__(self, directory: Path):
        self.directory = as_path(directory)
        check_not_locked(self.directory)
        try:
            from rocksdict import AccessType, Options, Rdict
        except ImportError as e:  # pragma: no cover - a dependency of the package
            raise StoreFormatError(f"reading the RocksDB consume queue {self.directory} needs the rocksdict "
                                   f"package ({e})", self.directory) from e
        self._shadow = Path(tempfile.mkdtemp(prefix="rocketstore-rocksdb-"))
        # removed on close, or when the reader is collected or the process exits (executors cache open stores)
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._shadow), True)
        for entry in scandir(self.directory):
            if entry.is_file() and entry.name != LOCK_FILE:
                if is_remote(self.directory):  # RocksDB reads local files: the database is copied (read-only)
                    with (self.directory / entry.name).open("rb") as src, open(self._shadow / entry.name, "wb") as out:
                        shutil.copyfileobj(src, out, 8 << 20)
                else:
                    os.symlink(entry.path, self._shadow / entry.name)
        try:
            families = Rdict.list_cf(str(self._shadow), Options(raw_mode=True))
            self.db = Rdict(str(self._shadow), Options(raw_mode=True),
                            column_families={cf: Options(raw_mode=True) for cf in families if cf != DEFAULT_CF},
                            access_type=AccessType.read_only())
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            self._cleanup()
            said = str(e).replace(str(self._shadow), str(self.directory)).strip()
            written, reader = _rocksdb_version(self.directory), _binding_version()
            if _newer(written, reader) or any(m in said.lower() for m in NEWER_FORMAT_MESSAGES):
                raise StoreFormatError(
                    f"RocksDB consume queue {self.directory} was written by a newer RocksDB (expected files this "
                    f"reader's RocksDB {reader or '?'} can read, found RocksDB {written or '?'} files: {said}); read "
                    "it with a rocksdict release bundling that RocksDB version", self.directory) from e
            raise StoreFormatError(f"RocksDB consume queue {self.directory} is damaged (expected a RocksDB database "
                                   f"RocksDB {reader or '?'} opens read-only, found: {said})", self.directory) from e
        if OFFSET_CF not in families:
            self.close()
            raise StoreFormatError(f"RocksDB consume queue {self.directory}: expected column families "
                                   f"'{DEFAULT_CF}' and '{OFFSET_CF}', found {families}", self.directory)
        self.cq = self.db.get_column_family(DEFAULT_CF)
        self._offsets = self.db.get_column_family(OFFSET_CF)
        self.max_entries, self.min_entries, self.dispatched = self._read_offset_table()

    def _read_offset_table(self):
        """(topic, qid) → (phy, cq offset) of its ``max`` and ``min`` keys; the dispatch checkpoint."""
        maxes, mins, dispatched = {}, {}, None
        for key, value in self._offsets.items():
            parsed = parse_offset_key(bytes(key))
            if parsed is None:
                raise StoreFormatError(f"RocksDB consume queue {self.directory}: unexpected key {bytes(key)!r} in "
                                       f"column family '{OFFSET_CF}' (expected topicLen 0x01 topic 0x01 max|min 0x01 "
                                       "queueId)", self.directory)
            topic, which, qid = parsed
            if topic == CHECKPOINT_TOPIC:
                dispatched = CHECKPOINT_VALUE.unpack_from(bytes(value))[0]
                continue
            if len(value) != ROCKSDB_OFFSET_VALUE.size:
                raise StoreFormatError(f"RocksDB consume queue {self.directory}: {topic}/{qid} {which.decode()} value "
                                       f"of {len(value)} bytes (expected {ROCKSDB_OFFSET_VALUE.size})", self.directory)
            entry = ROCKSDB_OFFSET_VALUE.unpack(bytes(value))
            (maxes if which == MAX_BYTES else mins if which == MIN_BYTES else {})[(topic, qid)] = entry
        return maxes, mins, dispatched

    def values(self, topic: str, queue_id: int, start: int, end: int) -> list:
        """The ``default`` values of queue offsets ``[start, end)`` (None where a key is missing)."""
        keys = [cq_key(topic, queue_id, o) for o in range(start, end)]
        return self.cq.get(keys) if keys else []

    def first_offset(self, topic: str, queue_id: int, default: int) -> int:
        """The queue offset of the first ``default`` key of (topic, queue_id) (``default`` when none)."""
        prefix = queue_prefix(topic, queue_id)
        it = self.cq.iter()
        try:
            it.seek(prefix)
            offset = parse_cq_offset(bytes(it.key()), prefix) if it.valid() else None
        finally:
            del it
        return default if offset is None else offset

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()
            self.db = None
        self._cleanup()


class RocksDBConsumeQueue:
    """Read-only RocksDB consume queue of one (topic, queueId)."""

    def __init__(self, store: RocksDBConsumeQueueStore, topic: str, queue_id: int):
        self.store, self.topic, self.queue_id = store, topic, queue_id
        last = store.max_entries.get((topic, queue_id))
        self.max_offset = self.disk_max_offset = (last[1] + 1) if last is not None else 0
        first = store.min_entries.get((topic, queue_id))
        self.first_offset = first[1] if first is not None else self._first_key_offset()
        self.units_per_file = L.DEFAULT_CONSUME_QUEUE_FILE_SIZE // L.CQ_STORE_UNIT_SIZE  # ranges for min_offset
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        self.files = self  # close() of the reader's queues

    def _first_key_offset(self) -> int:
        """The smallest queue offset with a unit (the first key of the queue's prefix; expired units are gone
        from the front), the max offset when the queue has none."""
        return self.store.first_offset(self.topic, self.queue_id, self.max_offset)

    def close(self) -> None:
        """The database is shared by the store's queues: the reader closes it once."""

    def _values(self, start: int, end: int) -> np.ndarray:
        raw = self.store.values(self.topic, self.queue_id, start, end)
        missing = [i for i, v in enumerate(raw) if v is None or len(v) != ROCKSDB_CQ_VALUE_SIZE]
        if missing:
            i = missing[0]
            found = "no entry" if raw[i] is None else f"a value of {len(raw[i])} bytes"
            raise StoreFormatError(
                f"RocksDB consume queue {self.topic}/{self.queue_id}: expected a {ROCKSDB_CQ_VALUE_SIZE}-byte unit "
                f"for queue offset {start + i} (the queue spans {self.first_offset}..{self.max_offset}), found "
                f"{found}", self.store.directory)
        return np.frombuffer(b"".join(bytes(v) for v in raw), dtype=ROCKSDB_CQ_VALUE_DTYPE)

    def store_times(self, start: int, end: int) -> np.ndarray:
        return self._values(start, end)["store_time"].astype(np.int64)

    def units(self, start: int, end: int) -> np.ndarray:
        """Units of queue offsets ``[start, end)`` (clamped), as 20-byte consume-queue units."""
        start, end = max(int(start), self.first_offset), min(int(end), self.max_offset)
        disk_end = min(end, self.disk_max_offset)
        parts = []
        for lo in range(start, disk_end, SCAN_UNITS):
            values = self._values(lo, min(disk_end, lo + SCAN_UNITS))
            out = np.empty(len(values), dtype=L.CQ_UNIT_DTYPE)
            for name in ("phy_offset", "size", "tags_code"):
                out[name] = values[name]
            parts.append(out)
        if end > self.disk_max_offset:
            parts.append(self.virtual[max(start - self.disk_max_offset, 0):end - self.disk_max_offset])
        if not parts:
            return np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, dtype=L.CQ_UNIT_DTYPE)

    def file_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        per = self.units_per_file
        out = []
        while start < end:
            stop = min(end, (start // per + 1) * per)
            out.append((start, stop))
            start = stop
        return out

    def hash_matches(self, sub, start: int, end: int):
        for lo, hi in self.file_ranges(max(start, self.first_offset), min(end, self.max_offset)):
            units = self.units(lo, hi)
            keep = np.flatnonzero(sub.matches_units(units, self.topic))
            if len(keep):
                yield lo + keep, units[keep]

    def append_virtual(self, phy_offset: int, size: int, tags_code: int) -> None:
        unit = np.array([(phy_offset, size, tags_code)], dtype=L.CQ_UNIT_DTYPE)
        self.virtual = np.concatenate([self.virtual, unit], dtype=L.CQ_UNIT_DTYPE)
        self.max_offset += 1

    def unit_location(self, queue_offset: int) -> tuple[Path, int]:
        """Where a unit is, for error messages: the database directory (the offset is the queue offset)."""
        return self.store.directory, int(queue_offset)

    def last_unit_end(self) -> int:
        if self.max_offset <= self.first_offset:
            return 0
        unit = self.units(self.max_offset - 1, self.max_offset)[0]
        return int(unit["phy_offset"]) + int(unit["size"])

    def truncate_at_phy(self, valid_end: int) -> int:
        """Drop the tail of units at or past ``valid_end`` (bisection: units point forward in the log)."""
        lo, hi = self.first_offset, self.max_offset
        if hi <= lo or int(self.units(hi - 1, hi)["phy_offset"][0]) < valid_end:
            return self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.units(mid, mid + 1)["phy_offset"][0]) >= valid_end:
                hi = mid
            else:
                lo = mid + 1
        self.virtual = np.zeros(0, dtype=L.CQ_UNIT_DTYPE)
        self.max_offset = self.disk_max_offset = max(lo, self.first_offset)
        return self.max_offset

    # --- RocksDBConsumeQueueOffsetTable.getMinCqOffset, RocksDBConsumeQueueTable.binarySearchInCQByTime ------

    def _at(self, offset: int):
        """(phy offset, store time) of the unit at ``offset`` (None when it has no entry: ``getCQInKV``)."""
        value = self.store.values(self.topic, self.queue_id, offset, offset + 1)[0]
        if value is None or len(value) != ROCKSDB_CQ_VALUE_SIZE:
            return None
        unit = np.frombuffer(bytes(value), dtype=ROCKSDB_CQ_VALUE_DTYPE)[0]
        return int(unit["phy_offset"]), int(unit["store_time"])

    def min_live_offset(self, min_phy_offset: int) -> int:
        """``getMinCqOffset``: the ``min`` key while its record is still in the commit log, else the first unit
        at or after ``min_phy_offset`` (what ``correctMinCqOffset`` finds and would store)."""
        first = self.store.min_entries.get((self.topic, self.queue_id))
        if first is not None and first[0] >= min_phy_offset:
            return first[1]
        last = self.store.max_entries.get((self.topic, self.queue_id))
        if last is None:
            return 0
        if last[0] < min_phy_offset:
            return last[1] + 1
        lo, hi = (first[1] if first is not None else 0), last[1]
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self._at(mid)
            if unit is None or unit[0] < min_phy_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_by_time(self, timestamp: int, lower: bool, min_phy_offset: int) -> int:
        """``RocksDBConsumeQueueStore.getOffsetInQueueByTime`` (unit store times; not clamped, as there)."""
        last = self.store.max_entries.get((self.topic, self.queue_id))
        if last is None or last[1] == -1:
            return 0
        low, high = self.min_live_offset(min_phy_offset), last[1]
        ceiling, floor = high, low
        edge = self._at(ceiling)
        if edge is not None and edge[1] < timestamp:
            return ceiling + 1 if lower else ceiling
        edge = self._at(floor)
        if edge is not None and edge[1] > timestamp:
            return floor if lower else 0
        target = left = right = -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            unit = self._at(mid)
            if unit is None:
                low = mid + 1
                continue
            if unit[0] < min_phy_offset:
                low, left = mid + 1, mid
                continue
            if unit[1] < 0:
                return 0
            if unit[1] == timestamp:
                target = mid
                break
            if unit[1] > timestamp:
                high, right = mid - 1, mid
            else:
                low, left = mid + 1, mid
        if target == -1:
            return right if lower else left
        step, bound = (-1, floor) if lower else (1, ceiling)
        while (target + step >= bound) if lower else (target + step <= bound):
            unit = self._at(target + step)
            if unit is None or unit[1] != timestamp:
                break
            target += step
        return target

    def phy_offsets_between(self, lo: int, hi: int) -> np.ndarray:
        """Hints only (record starts for the commit-log walk): none, the walk finds every record itself."""
        return np.zeros(0, dtype=np.int64)

    def phy_offsets_from(self, phy_start: int) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)


__all__ = ["RocksDBConsumeQueueStore", "RocksDBConsumeQueue", "check_not_locked"]
