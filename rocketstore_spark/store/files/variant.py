"""Which storage layout a broker wrote a store with: the default one or the variants a 4.x/5.x broker can be
configured for, told from the files and, where the files leave it open, from the caller.

======================  ================================================  ===========================================
feature                 broker setting                                    what the files show
======================  ================================================  ===========================================
``dledger``             ``enableDLegerCommitLog=true``                    ``dledger-<selfId>/data/`` (no ``commitlog/``
                                                                          records): entries with a 48-byte header
``rocksdb-cq``          ``storeType=defaultRocksDB`` (5.2+)               ``consumequeue/`` is a RocksDB database
                                                                          (``CURRENT``, ``MANIFEST-*``)
``batch-cq``            topic attribute ``queue.type=BatchCQ``            ``batchconsumequeue/<topic>/<queueId>/``
``lmq``                 ``enableLmq`` + ``enableMultiDispatch``           ``consumequeue/%LMQ%<name>/0/``
``prop-crc``            ``enabledAppendPropCRC=true`` (5.2+)              records end their properties with
                                                                          ``__CRC32#``
======================  ================================================  ===========================================

Features combine (a DLedger broker can serve LMQ). A store that has not yet written the files a feature shows
(no LMQ queue yet, no record yet) is detected without it; the caller names such features explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import InvalidArgumentError, StoreConfigError, UnsupportedVariantError
from ..format import layout as L
from ..format.codec import parse_records
from ..format.inner_batch import BATCH_CONSUMEQUEUE_DIR, BCQ_STORE_UNIT_SIZE
from ..format.prop_crc import has_prop_crc
from .byte_source import as_path
from .mapped_file_queue import list_offset_files

DLEDGER = "dledger"
ROCKSDB_CQ = "rocksdb-cq"
BATCH_CQ = "batch-cq"
LMQ = "lmq"
PROP_CRC = "prop-crc"
#: Every feature, in the order names are written.
FEATURES = (DLEDGER, ROCKSDB_CQ, BATCH_CQ, LMQ, PROP_CRC)
DEFAULT = "default"
#: Features whose files either exist or not: an explicit variant must agree with them.
STRUCTURAL = (DLEDGER, ROCKSDB_CQ, BATCH_CQ)

LMQ_PREFIX = L.LMQ_PREFIX
DLEDGER_DIR_PREFIX = "dledger-"  # DLedgerConfig.getDefaultPath: <storeBaseDir>/dledger-<selfId>
DLEDGER_DATA_DIR = "data"  # DLedgerConfig.getDataStorePath
DLEDGER_ENTRY_HEADER_SIZE = 48  # DLedgerEntry.BODY_OFFSET: magic, size, index, term, pos, channel, crcs, length
ROCKSDB_MARKERS = ("CURRENT", "IDENTITY")  # files every RocksDB database directory holds


MULTI_PATH_SPLITTER = ","  # MixAll.MULTI_PATH_SPLITTER: storePathCommitLog lists several paths with it


def parse_commit_log_paths(value) -> tuple:
    """``storePathCommitLog``'s paths (a comma-separated text or a list) as a tuple of path texts; each must be an
    existing directory."""
    if value is None:
        return ()
    parts = value.split(MULTI_PATH_SPLITTER) if isinstance(value, str) else list(value)
    paths = tuple(dict.fromkeys(str(p).strip() for p in parts if str(p).strip()))
    if not paths:
        raise InvalidArgumentError(f"commit-log path must name at least one directory (storePathCommitLog, several "
                                   f"separated by '{MULTI_PATH_SPLITTER}'), found {value!r}")
    for path in paths:
        if not as_path(path).is_dir():
            raise InvalidArgumentError(f"commit-log path {path!r} is not an existing directory; give the broker's "
                                       f"storePathCommitLog directories (separated by '{MULTI_PATH_SPLITTER}'), "
                                       "each holding commit-log files named by their offsets")
    return paths


@dataclass(frozen=True)
class BrokerSettings:
    """The broker settings that change how a store is read where its files leave them open (the variant
    harness's ``store.args`` flags): ``None`` / empty means "as the files say" (or the broker's default).

    * ``batch_topics`` (``--batch-topics``): topics with ``queue.type=BatchCQ`` besides those that have a
      ``batchconsumequeue/`` directory or say so in ``config/topics.json``; re-dispatch after a crash writes
      their records into batch consume queues.
    * ``batch_consume_queue_file_size`` (``--bcq-size``, ``mapperFileSizeBatchConsumeQueue``): for batch queues
      without files.
    * ``force_verify_prop_crc`` (``--force-verify-prop-crc``, ``forceVerifyPropCRC``): True checks the
      ``__CRC32#`` property (required) instead of the body CRC, False the body CRC only, as
      ``checkMessageAndReturnSize`` does; None checks both (the property required in a prop-crc store).
    * ``dledger_self_id`` (``--dledger-self``, ``dLegerSelfId``): which ``dledger-<selfId>`` log to read.
    * ``dledger_peers`` (``--dledger-peers``, ``dLegerPeers``): with several peers only the entries the group
      committed (the checkpoint's ``committedIndex``) are served, as such a broker serves them; one peer (or
      none given) serves every entry, as a one-node group's leader commits them all.
    * ``commit_log_paths`` (``--commitlog-path``, ``storePathCommitLog`` with its ``readOnlyCommitLogStorePaths``):
      the directories of the commit-log files when they are not ``<root>/commitlog``. A broker given several
      (comma-separated, ``MixAll.MULTI_PATH_SPLITTER``) uses a ``MultiPathMappedFileQueue``: each new file goes to
      one of the writable paths (the file's index modulo their number, over the sorted paths, skipping full
      disks), and loading lists the files of every path, read-only ones included, in offset order. Readers do
      the same: the commit log is the files of all the paths.
    """

    batch_topics: frozenset = frozenset()
    batch_consume_queue_file_size: Optional[int] = None
    force_verify_prop_crc: Optional[bool] = None
    dledger_self_id: Optional[str] = None
    dledger_peers: Optional[str] = None
    commit_log_paths: tuple = ()

    @staticmethod
    def of(batch_topics=None, batch_consume_queue_file_size=None, force_verify_prop_crc=None,
           dledger_self_id=None, dledger_peers=None, commit_log_path=None) -> "BrokerSettings":
        """Checked values: topics as a comma-separated text or a list, a positive multiple of 46 bytes."""
        if isinstance(batch_topics, str):
            batch_topics = batch_topics.split(",")
        topics = frozenset(str(t).strip() for t in batch_topics or () if str(t).strip())
        size = batch_consume_queue_file_size
        if size is not None and (int(size) <= 0 or int(size) % BCQ_STORE_UNIT_SIZE):
            raise InvalidArgumentError(f"batch consume-queue file size must be a positive multiple of "
                                       f"{BCQ_STORE_UNIT_SIZE} (mapperFileSizeBatchConsumeQueue), found {size}")
        if force_verify_prop_crc is not None and not isinstance(force_verify_prop_crc, bool):
            raise InvalidArgumentError(f"force_verify_prop_crc must be True, False or None, found "
                                       f"{force_verify_prop_crc!r}")
        if dledger_self_id is not None and (not str(dledger_self_id).strip() or "/" in str(dledger_self_id)):
            raise InvalidArgumentError(f"dledger self id must be a non-empty name (the n0 of dledger-n0), found "
                                       f"{dledger_self_id!r}")
        if dledger_peers is not None and not str(dledger_peers).strip():
            raise InvalidArgumentError("dledger peers must name at least one peer (n0-host:port;n1-host:port), "
                                       "found an empty text")
        return BrokerSettings(topics, None if size is None else int(size), force_verify_prop_crc,
                              None if dledger_self_id is None else str(dledger_self_id).strip(),
                              None if dledger_peers is None else str(dledger_peers).strip(),
                              parse_commit_log_paths(commit_log_path))

    def as_options(self) -> dict:
        """The settings given, as keyword arguments of ``RocketStore.open``."""
        out = {"batch_topics": ",".join(sorted(self.batch_topics)) or None,
               "batch_consume_queue_file_size": self.batch_consume_queue_file_size,
               "force_verify_prop_crc": self.force_verify_prop_crc, "dledger_self_id": self.dledger_self_id,
               "dledger_peers": self.dledger_peers,
               "commit_log_path": MULTI_PATH_SPLITTER.join(self.commit_log_paths) or None}
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class StoreVariant:
    """The layout of one store: a set of :data:`FEATURES` (empty for the default layout)."""

    features: frozenset = frozenset()
    dledger_data: Optional[Path] = None  # the DLedger log directory, with ``dledger``
    evidence: tuple = field(default=(), compare=False)  # what in the files (or the caller) said so

    @property
    def name(self) -> str:
        """``default`` or the features joined with ``+`` (``dledger+lmq``)."""
        return "+".join(f for f in FEATURES if f in self.features) or DEFAULT

    @property
    def is_default(self) -> bool:
        return not self.features

    def has(self, feature: str) -> bool:
        return feature in self.features

    def as_dict(self) -> dict:
        return {"name": self.name, "features": [f for f in FEATURES if f in self.features],
                "dledgerData": None if self.dledger_data is None else str(self.dledger_data),
                "evidence": list(self.evidence)}

    def refuse_writes(self, root) -> None:
        """Writers keep to the default layout: appending to any other would leave records or queues its
        broker cannot use (no DLedger entries, no property CRC, no RocksDB or LMQ units)."""
        if not self.is_default:
            raise UnsupportedVariantError(
                f"store {root} is a {self.name} store ({'; '.join(self.evidence)}); rocketstore writes only the "
                "default layout (commitlog/ and file consume queues), so it does not append to it — write to a "
                "new store directory instead", variant=self.name)


def parse_variant(text) -> Optional[tuple]:
    """``"dledger,lmq"`` / ``"dledger+lmq"`` / ``"default"`` / a list of names → sorted features (None: detect)."""
    if text is None:
        return None
    if isinstance(text, StoreVariant):
        return tuple(f for f in FEATURES if f in text.features)
    words = text.replace("+", ",").split(",") if isinstance(text, str) else list(text)
    words = [str(w).strip().lower() for w in words if str(w).strip()]
    unknown = [w for w in words if w not in FEATURES + (DEFAULT,)]
    if unknown or not words or (DEFAULT in words and len(words) > 1):
        raise InvalidArgumentError(f"variant must be {DEFAULT!r} or some of {list(FEATURES)} joined by ',' or "
                                   f"'+', found {text!r}")
    return tuple(f for f in FEATURES if f in words)


def dledger_logs(root: Path) -> list[Path]:
    """Every ``dledger-<selfId>/data`` directory of the store."""
    return sorted(p / DLEDGER_DATA_DIR for p in as_path(root).glob(DLEDGER_DIR_PREFIX + "*")
                  if (p / DLEDGER_DATA_DIR).is_dir())


def is_rocksdb_dir(directory: Path) -> bool:
    directory = as_path(directory)
    return any((directory / m).is_file() for m in ROCKSDB_MARKERS) or any(directory.glob("MANIFEST-*"))


def lmq_queue_names(root: Path) -> list[str]:
    """The ``%LMQ%`` topics that have a consume-queue directory."""
    base = as_path(root) / L.CONSUMEQUEUE_DIR
    if not base.is_dir() or is_rocksdb_dir(base):
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and p.name.startswith(LMQ_PREFIX))


def _first_record_has_prop_crc(path: Path, dledger: bool) -> Optional[bool]:
    """Whether the first record of a log file ends with the ``__CRC32#`` property (None: no record there)."""
    start = DLEDGER_ENTRY_HEADER_SIZE if dledger else 0
    with as_path(path).open("rb") as fh:
        fh.seek(start)
        total = int.from_bytes(fh.read(4), "big", signed=True)
        if total <= 0 or start + total > path.stat().st_size:  # no record (zeros) or a garbled length
            return None
        fh.seek(start)
        record = np.frombuffer(fh.read(total), dtype=np.uint8)
    fields = parse_records(record, np.array([0]))
    return bool(has_prop_crc(record, fields)[0]) if fields.valid[0] else None


def records_have_prop_crc(log_dir: Path, dledger: bool) -> bool:
    """Whether the first record of the oldest or of the newest log file carries the ``__CRC32#`` property (a
    broker switched to ``enabledAppendPropCRC`` later still shows it in its newest file)."""
    files = list_offset_files(log_dir) if log_dir.is_dir() else []
    return any(_first_record_has_prop_crc(f.path, dledger) for f in {f.path: f for f in (files[:1] + files[-1:])}
               .values() if f.length >= DLEDGER_ENTRY_HEADER_SIZE + 8)


def detect_variant(root, explicit=None, dledger_self_id: Optional[str] = None, batch_topics=()) -> StoreVariant:
    """The variant of the store at ``root`` from its files, or ``explicit`` (a :func:`parse_variant` value),
    which must agree with the files on the :data:`STRUCTURAL` features and may add the others.
    ``dledger_self_id`` picks the DLedger log ``dledger-<selfId>/data`` (needed when there are several);
    ``batch_topics`` (BatchCQ topics the caller names) make it a batch-cq store like a ``batchconsumequeue/``."""
    root = as_path(root)
    found, evidence = set(), []
    logs = dledger_logs(root)
    dledger_data = None
    if dledger_self_id is not None:
        chosen = root / f"{DLEDGER_DIR_PREFIX}{dledger_self_id}" / DLEDGER_DATA_DIR
        if chosen not in logs:
            raise StoreConfigError(f"no DLedger log for self id {dledger_self_id!r}: expected {chosen}, found "
                                   f"{', '.join(str(p) for p in logs) or 'no dledger-<selfId>/data directory'}")
        logs = [chosen]
    if len(logs) > 1:
        raise StoreConfigError(f"{root} holds several DLedger logs ({', '.join(str(p) for p in logs)}); "
                               "expected one (dledger-<selfId>/data): name the one to read (dledgerSelfId, "
                               "--dledger-self)")
    if logs:
        found.add(DLEDGER)
        dledger_data = logs[0]
        evidence.append(f"DLedger log {logs[0].relative_to(root)}")
    if (root / L.CONSUMEQUEUE_DIR).is_dir() and is_rocksdb_dir(root / L.CONSUMEQUEUE_DIR):
        found.add(ROCKSDB_CQ)
        evidence.append(f"{L.CONSUMEQUEUE_DIR}/ is a RocksDB database")
    bcq = root / BATCH_CONSUMEQUEUE_DIR
    if bcq.is_dir() and any(p.is_dir() for p in bcq.iterdir()):
        found.add(BATCH_CQ)
        evidence.append(f"{BATCH_CONSUMEQUEUE_DIR}/ holds queues")
    elif batch_topics:
        batch_topics = batch_topics.split(",") if isinstance(batch_topics, str) else batch_topics
        found.add(BATCH_CQ)
        evidence.append(f"batch topics given: {', '.join(sorted(batch_topics))}")
    lmqs = lmq_queue_names(root)
    if lmqs:
        found.add(LMQ)
        evidence.append(f"{len(lmqs)} {LMQ_PREFIX} consume queue(s)")
    log_dir = dledger_data if dledger_data is not None else root / L.COMMITLOG_DIR
    if records_have_prop_crc(log_dir, dledger_data is not None):
        found.add(PROP_CRC)
        evidence.append("records end with the __CRC32# property")
    wanted = parse_variant(explicit)
    if wanted is None:
        return StoreVariant(frozenset(found), dledger_data, tuple(evidence))
    for feature in STRUCTURAL:
        if (feature in found) != (feature in wanted):
            said = "shows" if feature in found else "does not show"
            raise StoreConfigError(f"variant {'+'.join(wanted) or DEFAULT!r} contradicts the files: {root} {said} "
                                   f"the {feature} layout ({'; '.join(evidence) or 'default layout'})")
    given = [f"{f} (given)" for f in wanted if f not in found]
    return StoreVariant(frozenset(wanted), dledger_data, tuple(evidence + given))


def refuse_variant_writes(path, variant=None) -> None:
    """Raise :class:`~...errors.UnsupportedVariantError` unless the store at ``path`` (absent or empty: a new
    store) has the default layout and ``variant`` names no other; writers call it before touching anything."""
    root = Path(path).expanduser()
    given = parse_variant(variant) or ()
    # what the files show counts even when ``variant`` leaves it out: an override never lets a writer mix layouts
    found = detect_variant(root) if root.is_dir() else StoreVariant()
    StoreVariant(found.features | frozenset(given), found.dledger_data,
                 found.evidence + tuple(f"{f} (given)" for f in given if f not in found.features)).refuse_writes(root)


__all__ = ["BrokerSettings", "StoreVariant", "detect_variant", "parse_variant", "FEATURES", "DEFAULT", "LMQ_PREFIX",
           "DLEDGER", "ROCKSDB_CQ", "BATCH_CQ", "LMQ", "PROP_CRC", "dledger_logs", "MULTI_PATH_SPLITTER",
           "parse_commit_log_paths", "refuse_variant_writes"]
