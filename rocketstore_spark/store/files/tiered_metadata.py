"""``config/tieredStoreMetadata.json``: the tiered-storage plugin's metadata (``DefaultMetadataStore``), kept in
the broker's store directory (``storePathRootDir/config``).

The broker writes it with fastjson, whose maps with integer keys (queue ids, base offsets) come out with bare
numbers as keys (``{0:{...}}``), which strict JSON refuses; :func:`parse_fastjson` reads that spelling.
The tables (``TieredMetadataSerializeWrapper``): ``topicSerialNumber``; ``topicMetadataTable`` (topic →
``topicId``, ``topic``, ``status``, ``reserveTime``, ``updateTimestamp``); ``queueMetadataTable`` (topic → queue
id → ``queue`` {``brokerName``, ``queueId``, ``topic``}, ``minOffset``, ``maxOffset``, ``updateTimestamp``);
``commitLogFileSegmentTable``, ``consumeQueueFileSegmentTable``, ``indexFileSegmentTable`` (``<broker>/<topic>/
<queueId>`` → base offset → ``path``, ``type``, ``baseOffset``, ``status``, ``size``, ``createTimestamp``,
``beginTimestamp``, ``endTimestamp``, ``sealTimestamp``). See ``docs/tiered.md``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .topic_config import CONFIG_DIR

TIERED_METADATA_FILE = "tieredStoreMetadata.json"  # DefaultMetadataStore.DEFAULT_FILE_NAME
_TABLES = {"commitLogFileSegmentTable": "COMMIT_LOG", "consumeQueueFileSegmentTable": "CONSUME_QUEUE",
           "indexFileSegmentTable": "INDEX"}
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


def parse_fastjson(text: str, where=None):
    """JSON as fastjson writes maps with integer keys: bare numeric keys are quoted, strings left untouched."""
    quoted = _TOKEN.sub(lambda m: m.group(0) if m.group(2) is None else f'{m.group(1)}"{m.group(2)}"{m.group(3)}',
                        text)
    try:
        return json.loads(quoted)
    except json.JSONDecodeError as e:
        raise StoreFormatError(f"tiered metadata: expected the JSON DefaultMetadataStore writes, found a syntax "
                               f"error ({e.msg} at line {e.lineno}, column {e.colno}); the file is damaged: use its "
                               f".bak copy or read the segments without it", where, e.pos) from e


@dataclass(frozen=True)
class SegmentMetadata:
    """One ``FileSegmentMetadata``: a segment as the broker recorded it."""

    path: str  # <broker>/<topic>/<queueId>
    file_type: str
    base_offset: int
    size: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(frozen=True)
class TieredMetadata:
    topics: dict  # topic -> topicId
    queues: dict  # (topic, queueId) -> (minOffset, maxOffset) as recorded (-1 until the broker records them)
    segments: tuple  # SegmentMetadata, by (path, type, base offset)

    def segments_of(self, path: str, file_type: str) -> list[SegmentMetadata]:
        return [s for s in self.segments if s.path == path and s.file_type == file_type]


def metadata_path(store_root) -> Path:
    return Path(store_root) / CONFIG_DIR / TIERED_METADATA_FILE


def load_tiered_metadata(path) -> Optional[TieredMetadata]:
    """The metadata at ``path`` (a ``tieredStoreMetadata.json``); None when there is none."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = parse_fastjson(text, path) if text.strip() else {}
    try:
        topics = {t: int(m["topicId"]) for t, m in (data.get("topicMetadataTable") or {}).items()}
        queues = {(topic, int(q)): (int(m["minOffset"]), int(m["maxOffset"]))
                  for topic, table in (data.get("queueMetadataTable") or {}).items() for q, m in table.items()}
        segments = tuple(sorted(
            (SegmentMetadata(m["path"], file_type, int(m["baseOffset"]), int(m["size"]), int(m["beginTimestamp"]),
                             int(m["endTimestamp"]))
             for table, file_type in _TABLES.items() for by_offset in (data.get(table) or {}).values()
             for m in by_offset.values()),
            key=lambda s: (s.path, s.file_type, s.base_offset)))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise StoreFormatError(f"tiered metadata: expected DefaultMetadataStore's tables (topicMetadataTable, "
                               f"queueMetadataTable, *FileSegmentTable) with their fields, found {e!r}; is this "
                               f"a {TIERED_METADATA_FILE} of RocketMQ 5.1 or later?", path) from e
    return TieredMetadata(topics, queues, segments)


__all__ = ["TIERED_METADATA_FILE", "TieredMetadata", "SegmentMetadata", "load_tiered_metadata", "metadata_path",
           "parse_fastjson"]
