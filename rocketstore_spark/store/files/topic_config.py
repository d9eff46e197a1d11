"""The broker's topic table, ``<store root>/config/topics.json``: how many queues each topic has.

A broker started on a store (``storePathRootDir``) serves only the topics in this table
(``TopicConfigManager``; a pull for a topic missing from it answers TOPIC_NOT_EXIST), and queue directories
exist only for queues that received a message, so the table is also the only record of a topic's queues that
have none yet. rocketstore therefore

* reads it for the queue counts of existing topics (with the consume-queue directories), and
* adds the topics a write job wrote that the table lacks, right after the job's commit point (recovery adds
  them if a crash came in between; a rolled-back job never reached the table) — existing entries are never
  changed. System, retry and dead-letter topics are left to the broker, which creates and configures them
  itself.

The file is ``TopicConfigSerializeWrapper`` as JSON (RocketMQ writes it with fastjson)::

    {"dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 1717200000000},
     "topicConfigTable": {"orders": {"topicName": "orders", "readQueueNums": 8, "writeQueueNums": 8,
                                     "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                     "order": false, "attributes": {}}}}

Writes keep what ``MixAll.string2File`` keeps: the previous file as ``topics.json.bak`` (which
``ConfigManager.load`` falls back to when ``topics.json`` is missing or empty), and the new text written to
``topics.json.tmp`` first, then renamed over ``topics.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional

from ...errors import StoreFormatError
from ..format import layout as L
from .byte_source import as_path
from .config_file import BACKUP_SUFFIX, config_object
from .rocksdb_config import TOPICS_DB, config_database, read_config_rows
from .store_files import write_text_atomically

CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"  # BrokerPathConfigHelper.getTopicConfigPath
PERM_READ_WRITE = 0x6  # PermName.PERM_READ (0x4) | PermName.PERM_WRITE (0x2)
SINGLE_TAG = "SINGLE_TAG"  # TopicFilterType.SINGLE_TAG
QUEUE_TYPE_ATTRIBUTE = "queue.type"  # TopicAttributes.QUEUE_TYPE_ATTRIBUTE
BATCH_CQ_TYPE = "BatchCQ"  # CQType.BatchCQ
CLEANUP_POLICY_ATTRIBUTE = "cleanup.policy"  # TopicAttributes.CLEANUP_POLICY_ATTRIBUTE
COMPACTION_POLICY = "COMPACTION"  # CleanupPolicy.COMPACTION


def topics_path(root) -> Path:
    return as_path(root) / CONFIG_DIR / TOPICS_FILE


def _read_table(path: Path) -> Optional[dict]:
    """The parsed file, or None when it is missing or empty (``ConfigManager.load`` then tries the backup)."""
    return config_object(path, "the broker's topic table", "topicConfigTable")


def load_topic_table(root) -> dict:
    """The whole ``TopicConfigSerializeWrapper`` (an empty one when the store has no topic table); a broker with
    the RocksDB config store keeps it in the database ``config/topics/`` (:mod:`.rocksdb_config`)."""
    database = config_database(as_path(root) / CONFIG_DIR, TOPICS_DB)
    if database is not None:
        return {"topicConfigTable": read_config_rows(database)}
    path = topics_path(root)
    payload = _read_table(path)
    if payload is None:
        payload = _read_table(path.with_name(TOPICS_FILE + BACKUP_SUFFIX))
    return payload if payload is not None else {"topicConfigTable": {}}


def configured_queue_counts(root) -> dict[str, int]:
    """Topic → queues from the topic table: the larger of read and write queue numbers."""
    counts = {}
    for name, config in load_topic_table(root).get("topicConfigTable", {}).items():
        if isinstance(config, dict):
            try:
                counts[name] = max(int(config.get("readQueueNums") or 0), int(config.get("writeQueueNums") or 0))
            except (TypeError, ValueError) as e:
                raise StoreFormatError(f"topic {name!r}: expected integer readQueueNums/writeQueueNums, found "
                                       f"{config.get('readQueueNums')!r}/{config.get('writeQueueNums')!r}",
                                       topics_path(root)) from e
    return counts


def read_queue_nums(root) -> dict[str, int]:
    """Topic → ``readQueueNums`` from the topic table: the queues consumers are assigned (and the broker's
    ``ConsumeStats`` lists)."""
    out = {}
    for name, config in load_topic_table(root).get("topicConfigTable", {}).items():
        if isinstance(config, dict):
            try:
                out[name] = int(config.get("readQueueNums") or 0)
            except (TypeError, ValueError) as e:
                raise StoreFormatError(f"topic {name!r}: expected an integer readQueueNums, found "
                                       f"{config.get('readQueueNums')!r}", topics_path(root)) from e
    return out


def topics_with_attribute(root, attribute: str, value: str) -> frozenset:
    """Topics whose table entry has ``attribute=value``; attribute names are accepted with the ``+`` an update
    command gives them."""
    out = set()
    for name, config in load_topic_table(root).get("topicConfigTable", {}).items():
        attributes = config.get("attributes") if isinstance(config, dict) else None
        if isinstance(attributes, dict) and any(k.lstrip("+") == attribute and v == value
                                                for k, v in attributes.items()):
            out.add(name)
    return frozenset(out)


def batch_cq_topics(root) -> frozenset:
    """Topics whose table entry has ``queue.type=BatchCQ`` (``QueueTypeUtils.isBatchCq``: their queues are batch
    consume queues)."""
    return topics_with_attribute(root, QUEUE_TYPE_ATTRIBUTE, BATCH_CQ_TYPE)


def compaction_topics(root) -> frozenset:
    """Topics whose table entry has ``cleanup.policy=COMPACTION`` (``CleanupPolicyUtils.isCompaction``: the
    broker keeps the latest message per key of their queues and serves them from its compaction log)."""
    return topics_with_attribute(root, CLEANUP_POLICY_ATTRIBUTE, COMPACTION_POLICY)


def queue_dir_counts(root, topics: Optional[Iterable[str]] = None) -> dict[str, int]:
    """Topic → highest queue id + 1 among its consume-queue directories (of ``topics`` only, when given)."""
    base = as_path(root) / L.CONSUMEQUEUE_DIR
    if isinstance(base, Path):  # a local store: directory entries say what they are (no stat per queue)
        return _local_queue_dir_counts(str(base), topics)
    counts = {}
    for topic in base.iterdir() if base.is_dir() else ():
        if topics is not None and topic.name not in topics:
            continue
        ids = [int(q.name) for q in topic.iterdir() if q.is_dir() and q.name.isdigit()] if topic.is_dir() else []
        if ids:
            counts[topic.name] = max(ids) + 1
    return counts


def _local_queue_dir_counts(base: str, topics: Optional[Iterable[str]]) -> dict[str, int]:
    if topics is None:
        try:
            with os.scandir(base) as entries:
                topics = [e.name for e in entries if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return {}
    counts = {}
    for topic in topics:
        try:
            with os.scandir(os.path.join(base, topic)) as entries:
                ids = [int(e.name) for e in entries if e.name.isdigit() and e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        if ids:
            counts[topic] = max(ids) + 1
    return counts


def existing_queue_counts(root) -> dict[str, int]:
    """Topic → number of queues of a store: its queue directories, and the topic table's queue numbers
    (queues that never received a message have no directory)."""
    counts = queue_dir_counts(root)
    for topic, n in configured_queue_counts(root).items():
        counts[topic] = max(counts.get(topic, 0), n)
    return counts


def broker_managed(topic: str) -> bool:
    """System, retry and dead-letter topics: the broker creates their table entries itself."""
    return bool(L.SYSTEM_TOPIC_PATTERN.match(topic) or L.RETRY_TOPIC_PATTERN.match(topic))


def _missing(table: dict, queue_nums: Mapping[str, int]) -> dict[str, int]:
    return {t: int(n) for t, n in sorted(queue_nums.items()) if t not in table and not broker_managed(t)}


def topics_to_register(root, queue_nums: Mapping[str, int]) -> dict[str, int]:
    """The part of ``queue_nums`` (topic → queues) that :func:`register_topics` would add."""
    return _missing(load_topic_table(root).get("topicConfigTable", {}), queue_nums)


def register_topics(root, queue_nums: Mapping[str, int], now_ms: Optional[int] = None, sync: bool = True) -> list[str]:
    """Add the topics of ``queue_nums`` the table does not have (read = write = that many queues,
    read-write, SINGLE_TAG), except broker-managed ones; entries already there are left as they are.
    Returns the topics added. ``sync``: the new table is forced to disk (SYNC_FLUSH)."""
    payload = load_topic_table(root)
    table = payload.setdefault("topicConfigTable", {})
    add = _missing(table, queue_nums)
    if not add:
        return []
    for topic, n in add.items():
        table[topic] = {"topicName": topic, "readQueueNums": n, "writeQueueNums": n, "perm": PERM_READ_WRITE,
                        "topicFilterType": SINGLE_TAG, "topicSysFlag": 0, "order": False, "attributes": {}}
    _save(root, payload, now_ms, sync)
    return list(add)


def _save(root, payload: dict, now_ms: Optional[int], sync: bool = True) -> None:
    version = payload.get("dataVersion") if isinstance(payload.get("dataVersion"), dict) else {}
    payload["dataVersion"] = {  # DataVersion.nextVersion: a new timestamp, the counter one up
        "counter": int(version.get("counter", 0) or 0) + 1, "stateVersion": int(version.get("stateVersion", 0) or 0),
        "timestamp": int(time.time() * 1000) if now_ms is None else int(now_ms)}
    _write(topics_path(root), json.dumps(payload, indent="\t", ensure_ascii=False), sync)


def _write(path: Path, text: str, sync: bool = True) -> None:
    if path.exists() and path.stat().st_size:
        shutil.copyfile(path, path.with_name(path.name + BACKUP_SUFFIX))
    write_text_atomically(path, text, sync=sync)


__all__ = ["batch_cq_topics", "broker_managed", "configured_queue_counts", "existing_queue_counts", "load_topic_table",
           "queue_dir_counts", "read_queue_nums", "register_topics", "topics_path", "topics_to_register"]
