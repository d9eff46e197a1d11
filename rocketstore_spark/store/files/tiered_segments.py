"""The segment files of a broker's tiered storage (the ``tieredstore`` plugin's POSIX file backend,
``PosixFileSegment``): where they lie under ``tieredStoreFilePath`` and which offsets each holds.

Every file segment lies at::

    <tieredStoreFilePath>/<md5(cluster)[:8]>_<cluster>/<broker>/<topic>/<queueId>/<FileSegmentType>/<name>

``FileSegmentType`` is ``COMMIT_LOG``, ``CONSUME_QUEUE`` or ``INDEX`` (the index lies under the topic
``rmq_sys_INDEX``, queue 0). A segment's ``name`` is ``MessageStoreUtil.offset2FileName``: the first 8 hex digits
of the MD5 of the decimal base offset, then the base offset in 20 digits. The segments of one (queue, type) are
one append-only file cut in pieces: segment ``k + 1`` starts where segment ``k`` ends, its size is what the
broker committed (the file's length; ``recoverFileSize`` trusts the file). See ``docs/tiered.md``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidArgumentError, StoreFormatError
from .byte_source import is_remote

COMMIT_LOG = "COMMIT_LOG"  # FileSegmentType.COMMIT_LOG (code 0)
CONSUME_QUEUE = "CONSUME_QUEUE"  # FileSegmentType.CONSUME_QUEUE (code 1)
INDEX = "INDEX"  # FileSegmentType.INDEX (code 2)
FILE_SEGMENT_TYPES = {0: COMMIT_LOG, 1: CONSUME_QUEUE, 2: INDEX}
RMQ_SYS_TIERED_STORE_INDEX_TOPIC = "rmq_sys_INDEX"  # MessageStoreUtil.RMQ_SYS_TIERED_STORE_INDEX_TOPIC
_NAME_DIGITS = 20


def short_hash(text: str) -> str:
    """``MessageStoreUtil.getHash``: the first 8 hex digits of the MD5 of ``text``'s UTF-8 bytes."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:8]


def offset_to_file_name(offset: int) -> str:
    """``MessageStoreUtil.offset2FileName``: ``short_hash(str(offset))`` then the offset in 20 digits."""
    return short_hash(str(offset)) + f"{offset:0{_NAME_DIGITS}d}"


def file_name_to_offset(name: str) -> int:
    """``MessageStoreUtil.fileName2Offset``: the base offset of a segment file's name (its last 20 digits)."""
    digits = name[-_NAME_DIGITS:]
    if len(name) != _NAME_DIGITS + 8 or not digits.isdigit() or offset_to_file_name(int(digits)) != name:
        raise StoreFormatError(f"tiered segment file name: expected 8 hex digits of MD5 then a 20-digit base offset "
                               f"(MessageStoreUtil.offset2FileName), found {name!r}; is this a tiered store "
                               f"directory (tieredStoreFilePath)?", name)
    return int(digits)


def cluster_dir_name(cluster: str) -> str:
    """The directory of a broker cluster's segments: ``<md5(cluster)[:8]>_<cluster>``."""
    return f"{short_hash(cluster)}_{cluster}"


@dataclass(frozen=True)
class Segment:
    """One segment file: its base offset (in the bytes of the whole per-queue file) and committed size."""

    path: Path
    base_offset: int
    size: int

    @property
    def end(self) -> int:
        return self.base_offset + self.size


@dataclass(frozen=True)
class QueueDir:
    """The directory of one queue's segments: ``<cluster dir>/<broker>/<topic>/<queueId>``."""

    path: Path
    cluster: str
    broker: str
    topic: str
    queue_id: int

    def segments(self, file_type: str) -> list[Segment]:
        """The segments of ``file_type`` in base-offset order, each following the one before without a gap."""
        where = self.path / file_type
        try:
            names = sorted(os.listdir(where))
        except FileNotFoundError:
            return []
        segments = sorted((Segment(where / n, file_name_to_offset(n), (where / n).stat().st_size) for n in names),
                          key=lambda s: s.base_offset)
        for before, after in zip(segments, segments[1:]):
            if before.end != after.base_offset:
                raise StoreFormatError(
                    f"tiered {file_type} segments do not follow each other: expected the segment after "
                    f"{before.path.name} (base offset {before.base_offset}, {before.size} bytes) to start at "
                    f"{before.end}, found one starting at {after.base_offset}; a segment is missing or was "
                    f"truncated (copy the whole tiered directory again)", after.path)
        return segments


def cluster_dirs(root: Path) -> dict[str, Path]:
    """The clusters whose segments lie under ``root`` (``tieredStoreFilePath``): name → directory."""
    out = {}
    for entry in sorted(os.listdir(root)):
        cluster = entry.partition("_")[2]
        if cluster and (root / entry).is_dir() and cluster_dir_name(cluster) == entry:
            out[cluster] = root / entry
    return out


def queue_dirs(root, cluster: str | None = None, broker: str | None = None) -> list[QueueDir]:
    """Every queue directory holding message segments under ``root``, for one cluster and broker (needed only
    when several share the directory); the index's pseudo-topic is left out."""
    if is_remote(str(root)):
        raise InvalidArgumentError(f"tiered store directory (tieredStoreFilePath): expected a local directory (or "
                                   f"one mounted), found the URI {root}; RocketMQ 5.3.3's tiered storage writes its "
                                   f"segments to a file system (PosixFileSegment, its one backend): copy or mount "
                                   f"them and give that path")
    root = Path(root)
    if not root.is_dir():
        raise StoreFormatError(f"tiered store directory (tieredStoreFilePath): expected a directory, found "
                               f"{'nothing' if not root.exists() else 'a file'}; give the directory the broker's "
                               f"tieredStoreFilePath names", root)
    clusters = cluster_dirs(root)
    if cluster is not None:
        clusters = {k: v for k, v in clusters.items() if k == cluster}
    if len(clusters) != 1:
        raise StoreFormatError(f"tiered store directory: expected one cluster directory "
                               f"(<md5(cluster)[:8]>_<cluster>){' named ' + cluster if cluster else ''}, found "
                               f"{sorted(clusters) or 'none'}; name the broker cluster when there are several",
                               root)
    (cluster_name, cluster_path), = clusters.items()
    brokers = sorted(b for b in os.listdir(cluster_path) if (cluster_path / b).is_dir())
    if broker is not None:
        brokers = [b for b in brokers if b == broker]
    if len(brokers) != 1:
        raise StoreFormatError(f"tiered store directory: expected one broker directory"
                               f"{' named ' + broker if broker else ''} under {cluster_path.name}, found "
                               f"{brokers or 'none'}; name the broker when there are several", cluster_path)
    broker_path = cluster_path / brokers[0]
    out = []
    for topic in sorted(os.listdir(broker_path)):
        if topic == RMQ_SYS_TIERED_STORE_INDEX_TOPIC or not (broker_path / topic).is_dir():
            continue
        for queue in sorted(os.listdir(broker_path / topic)):
            if queue.isdigit():
                out.append(QueueDir(broker_path / topic / queue, cluster_name, brokers[0], topic, int(queue)))
    return out


__all__ = ["COMMIT_LOG", "CONSUME_QUEUE", "INDEX", "FILE_SEGMENT_TYPES", "Segment", "QueueDir", "queue_dirs",
           "offset_to_file_name", "file_name_to_offset", "cluster_dir_name", "short_hash"]
