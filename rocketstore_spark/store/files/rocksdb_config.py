"""The broker's configuration tables kept in RocksDB (``storeType=defaultRocksDB``: the broker's RocksDB config
managers, as 5.3.3 writes them): ``config/consumerOffsets/`` (``RocksDBConsumerOffsetManager``) and ``config/topics/``
(``RocksDBTopicConfigManager``) are RocksDB databases instead of ``consumerOffset.json`` and ``topics.json``.

Both keep one entry per table row in the ``default`` column family (``kvDataVersion`` holds the data version,
``forbidden`` the forbidden-topic table), key and value UTF-8 text, the value JSON:

======================  ==========================  ===================================================
database                key                         value
======================  ==========================  ===================================================
``consumerOffsets``     ``topic@group``             ``{"offsetTable":{"0":8,"1":0}}`` (queue id → offset)
``topics``              the topic name              the ``TopicConfig`` as in ``topics.json``
======================  ==========================  ===================================================

The database is opened read-only through a private directory of links (:func:`.rocksdb_database.link_database`),
so reading never changes a file of the store; a database a running broker holds is refused.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from ...errors import StoreFormatError
from .byte_source import as_path
from .rocksdb_database import check_not_locked, link_database

CONSUMER_OFFSETS_DB = "consumerOffsets"  # consumerOffset.json's RocksDB counterpart, as 5.3.3 names it
TOPICS_DB = "topics"
ROCKSDB_CURRENT = "CURRENT"  # every RocksDB database directory holds it
DEFAULT_CF = "default"


def config_database(config_dir, name: str) -> Optional[Path]:
    """``config/<name>`` when it is a RocksDB database, else None."""
    path = as_path(config_dir) / name
    return path if (path / ROCKSDB_CURRENT).is_file() else None


def read_config_rows(directory) -> dict[str, object]:
    """The ``default`` column family of a config database: key text → parsed JSON value."""
    directory = as_path(directory)
    check_not_locked(directory)
    from rocksdict import AccessType, Options, Rdict

    shadow = Path(tempfile.mkdtemp(prefix="rocketstore-rocksdb-config-"))
    try:
        link_database(directory, shadow)
        try:
            families = Rdict.list_cf(str(shadow), Options(raw_mode=True))
            db = Rdict(str(shadow), Options(raw_mode=True),
                       column_families={cf: Options(raw_mode=True) for cf in families if cf != DEFAULT_CF},
                       access_type=AccessType.read_only())
            try:
                items = [(bytes(k), bytes(v)) for k, v in db.items()]
            finally:
                db.close()
        except Exception as e:  # rocksdict raises plain exceptions carrying RocksDB's status text
            raise StoreFormatError(f"expected the broker's RocksDB config table {directory} to open read-only, "
                                   f"found: {str(e).replace(str(shadow), str(directory))}", directory) from e
    finally:
        shutil.rmtree(shadow, ignore_errors=True)
    out = {}
    for key, value in items:
        try:
            out[key.decode("utf-8")] = json.loads(value.decode("utf-8"))
        except ValueError as e:
            raise StoreFormatError(f"RocksDB config table {directory}: expected a JSON value for key {key!r}, found "
                                   f"{value[:80]!r} ({e})", directory) from e
    return out


__all__ = ["CONSUMER_OFFSETS_DB", "TOPICS_DB", "config_database", "read_config_rows"]
