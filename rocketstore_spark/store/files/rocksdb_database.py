"""The RocksDB database of a rocksdb-cq store's ``consumequeue/`` (``storeType=defaultRocksDB``), opened through
the rocksdict binding (RocksDB's C++ library in PyPI wheels).

The database is opened READ-ONLY and never modified: RocksDB's read-only mode writes nothing, but the binding
leaves a small config file in the directory it opens, so it opens a private directory of links to the
database's files instead. A directory locked by a running broker, written by a newer RocksDB, or damaged is a
clear error naming it. Key and value layouts: :mod:`..format.rocksdb_cq`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import tempfile
import weakref
from pathlib import Path

from ...errors import StoreFormatError, StoreLockedError
from ..format.rocksdb_cq import (
    CHECKPOINT_TOPIC,
    CHECKPOINT_VALUE,
    DEFAULT_CF,
    MAX_BYTES,
    MIN_BYTES,
    OFFSET_CF,
    ROCKSDB_OFFSET_VALUE,
    cq_key,
    parse_cq_offset,
    parse_offset_key,
    queue_prefix,
)
from .byte_source import as_path, is_remote, scandir

LOCK_FILE = "LOCK"  # RocksDB's lock file: a running broker holds an fcntl write lock on it
OPTIONS_PREFIX = "OPTIONS-"
#: RocksDB's words for files of a format it does not know (a newer release wrote them)
NEWER_FORMAT_MESSAGES = ("unsupported format_version", "newer version", "unknown footer version")
#: where RocksDB's status text places damage: ``... in <file> offset <n> size <m>``
DAMAGE_AT = re.compile(r" in (\S+) offset (\d+)")


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
    parts = lambda v: tuple(int(p) for p in v.split(".") if p.isdigit())  # noqa: E731
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


def link_database(directory: Path, shadow: Path) -> None:
    """Fill the empty directory ``shadow`` with links to the files of the database ``directory`` (copies for a
    remote one: RocksDB reads local files), its lock file left out, so that opening ``shadow`` touches nothing of
    the store."""
    for entry in scandir(directory):
        if entry.is_file() and entry.name != LOCK_FILE:
            if is_remote(directory):
                with (directory / entry.name).open("rb") as src, open(shadow / entry.name, "wb") as out:
                    shutil.copyfileobj(src, out, 8 << 20)
            else:
                os.symlink(os.path.abspath(entry.path), shadow / entry.name)  # a relative store path too


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
        link_database(self.directory, self._shadow)
        try:
            families = Rdict.list_cf(str(self._shadow), Options(raw_mode=True))
            self.db = Rdict(str(self._shadow), Options(raw_mode=True),
                            column_families={cf: Options(raw_mode=True) for cf in families if cf != DEFAULT_CF},
                            access_type=AccessType.read_only())
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            self._cleanup()
            said = self._said(e)
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

    def _said(self, e: Exception) -> str:
        """RocksDB's status text, naming the store's directory where it names the private one of links."""
        return str(e).replace(str(self._shadow), str(self.directory)).strip()

    def _damaged(self, e: Exception, reading: str) -> StoreFormatError:
        """A read that RocksDB refused (a block whose checksum fails, a truncated table file): the store's file and
        the offset when RocksDB names them."""
        said = self._said(e)
        path, offset = self.directory, None
        found = DAMAGE_AT.search(said)
        if found:
            path, offset = self.directory / os.path.basename(found.group(1)), int(found.group(2))
        return StoreFormatError(f"RocksDB consume queue {self.directory} is damaged (expected {reading} to read, "
                                f"found: {said})", path, offset)

    def _read_offset_table(self):
        """(topic, qid) → (phy, cq offset) of its ``max`` and ``min`` keys; the dispatch checkpoint."""
        try:
            items = list(self._offsets.items())
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            raise self._damaged(e, f"column family '{OFFSET_CF}'") from e
        maxes, mins, dispatched = {}, {}, None
        for key, value in items:
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
        try:
            return self.cq.get(keys) if keys else []
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            raise self._damaged(e, f"the units of {topic}/{queue_id} at queue offsets {start}..{end}") from e

    def first_offset(self, topic: str, queue_id: int, default: int) -> int:
        """The queue offset of the first ``default`` key of (topic, queue_id) (``default`` when none)."""
        prefix = queue_prefix(topic, queue_id)
        it = self.cq.iter()
        try:
            it.seek(prefix)
            offset = parse_cq_offset(bytes(it.key()), prefix) if it.valid() else None
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            raise self._damaged(e, f"the first unit of {topic}/{queue_id}") from e
        finally:
            del it
        return default if offset is None else offset

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()
            self.db = None
        self._cleanup()


__all__ = ["RocksDBConsumeQueueStore", "check_not_locked", "link_database"]
