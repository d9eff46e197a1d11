"""Where each consumer group stands: the broker's committed offsets, ``<store root>/config/consumerOffset.json``
(``ConsumerOffsetManager``) and ``config/lmqConsumerOffset.json`` (``LmqConsumerOffsetManager``, the offsets of
light message queues).

A committed offset is the queue offset of the next message the group will consume. The broker keeps them in
memory, keyed by ``topic@group`` (``TOPIC_GROUP_SEPARATOR``), and persists the table every
``flushConsumerOffsetInterval`` (5 s) and when it shuts down. The file is the manager serialized by fastjson,
which writes the integer keys of the per-queue maps without quotes (so it is not strict JSON)::

    {
        "offsetTable":{
            "%RETRY%orders-audit@orders-audit":{0:0
            },
            "orders@orders-audit":{0:12,1:10,2:11,3:9
            }
        },
        "dataVersion":{"counter":7,"stateVersion":0,"timestamp":1717200000000}
    }

Like the topic table, a missing or empty file falls back to ``<name>.bak`` (``ConfigManager.load``). A broker
with the RocksDB config store keeps the table in the database ``config/consumerOffsets/`` instead
(:mod:`.rocksdb_config`), which is then read in place of ``consumerOffset.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .byte_source import as_path
from .config_file import BACKUP_SUFFIX, config_text
from .rocksdb_config import CONSUMER_OFFSETS_DB, config_database, read_config_rows
from .topic_config import CONFIG_DIR

CONSUMER_OFFSET_FILE = "consumerOffset.json"  # BrokerPathConfigHelper.getConsumerOffsetPath
LMQ_CONSUMER_OFFSET_FILE = "lmqConsumerOffset.json"  # BrokerPathConfigHelper.getLmqConsumerOffsetPath
TOPIC_GROUP_SEPARATOR = "@"  # ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR
OFFSET_TABLE = "offsetTable"

# fastjson's unquoted integer map keys: `{0:12,` or `,1:10` (topic and group names cannot hold `{`, `,` or `:`)
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


@dataclass(frozen=True)
class CommittedOffset:
    """One queue's committed offset of one group: the next queue offset the group consumes."""

    group: str
    topic: str
    queue_id: int
    offset: int
    source: Optional[str]  # the file it came from (consumerOffset.json, lmqConsumerOffset.json, consumerOffsets);
    # None for a queue of a topic the group consumes that it has committed nothing for (the broker reports 0)


def consumer_offset_paths(root) -> list[Path]:
    base = as_path(root) / CONFIG_DIR
    return [base / CONSUMER_OFFSET_FILE, base / LMQ_CONSUMER_OFFSET_FILE]


def parse_offset_table(text: str, path) -> list[CommittedOffset]:
    """The committed offsets of one file's text (``path`` names it in errors)."""
    try:
        payload = json.loads(_BARE_KEY.sub(r'\1"\2"\3', text))
    except ValueError as e:
        raise StoreFormatError(f"expected the broker's consumer offsets (fastjson text), found unparsable text "
                               f"({e}); the file may be cut short: a broker rewrites it from memory on its next "
                               "persist, or its .bak copy holds the previous table", path) from e
    table = payload.get(OFFSET_TABLE, {}) if isinstance(payload, dict) else None
    if not isinstance(table, dict):
        raise StoreFormatError(f"expected a JSON object with an '{OFFSET_TABLE}' object, found "
                               f"{type(payload).__name__ if not isinstance(payload, dict) else repr(table)[:80]}",
                               path)
    out = []
    name = Path(str(path)).name
    for key, queues in table.items():
        topic, sep, group = str(key).partition(TOPIC_GROUP_SEPARATOR)
        if not sep or not topic or not group or TOPIC_GROUP_SEPARATOR in group:
            raise StoreFormatError(f"expected offset table keys 'topic@group', found {key!r}", path)
        if not isinstance(queues, dict):
            raise StoreFormatError(f"{key}: expected an object of queue id → offset, found {queues!r}", path)
        for qid, offset in queues.items():
            if not str(qid).lstrip("-").isdigit() or not isinstance(offset, int) or isinstance(offset, bool):
                raise StoreFormatError(f"{key}: expected integer queue ids and offsets, found {qid!r}: {offset!r}",
                                       path)
            out.append(CommittedOffset(group, topic, int(qid), int(offset), name))
    return out


def rocksdb_offsets(directory) -> list[CommittedOffset]:
    """The committed offsets of a RocksDB config store's ``consumerOffsets`` database."""
    rows = read_config_rows(directory)
    table = {key: value.get(OFFSET_TABLE) if isinstance(value, dict) else value for key, value in rows.items()}
    return parse_offset_table(json.dumps({OFFSET_TABLE: table}), Path(str(directory)))


def load_consumer_offsets(root) -> list[CommittedOffset]:
    """Every committed offset of the store's broker (both files; each missing or empty one falls back to its
    backup; the RocksDB database in place of ``consumerOffset.json`` when there is one), sorted by group, topic
    and queue."""
    out = []
    paths = consumer_offset_paths(root)
    database = config_database(as_path(root) / CONFIG_DIR, CONSUMER_OFFSETS_DB)
    if database is not None:
        out.extend(rocksdb_offsets(database))
        paths = paths[1:]
    for path in paths:
        text = config_text(path)
        where = path
        if text is None:
            where = path.with_name(path.name + BACKUP_SUFFIX)
            text = config_text(where)
        if text is not None:
            out.extend(parse_offset_table(text, where))
    return sorted(out, key=lambda c: (c.group, c.topic, c.queue_id))


__all__ = ["CONSUMER_OFFSET_FILE", "LMQ_CONSUMER_OFFSET_FILE", "CommittedOffset", "consumer_offset_paths",
           "load_consumer_offsets", "parse_offset_table"]
