"""The one exception hierarchy of rocketstore-spark.

Every error says what was expected, what was found and, where a file is involved, the file and the byte
offset, so that a data engineer can find the broken bytes with ``xxd -s OFFSET FILE``.
This module is imported by the store layer and must stay free of pyspark.
"""

from __future__ import annotations

import os
from typing import Optional


class RocketStoreError(Exception):
    """Base class of every error this package raises on purpose."""


class StoreNotFoundError(RocketStoreError):
    """The given path is not a RocketMQ store directory (or does not exist)."""


class StoreConfigError(RocketStoreError):
    """File sizes (commit log, consume queue, index) are missing, ambiguous or contradict the files."""


class IndexSizesAmbiguousError(StoreConfigError):
    """The index files do not tell their (hash slots, max entries): several pairs fit, or none fits a damaged
    file. Only reads that use the index (and writers) need them; the store opens without."""


class UnsupportedVariantError(StoreConfigError):
    """The store uses a storage variant (DLedger, RocksDB consume queues, LMQ...) the operation does not support;
    ``variant`` names it."""

    def __init__(self, message: str, variant: str = ""):
        self.variant = variant
        super().__init__(message)


class LocatedError(RocketStoreError):
    """An error at a place in a file or object: ``path`` and ``offset`` (a byte position inside ``path``)."""

    def __init__(self, message: str, path: Optional[os.PathLike | str] = None, offset: Optional[int] = None):
        self.path = None if path is None else os.fspath(path)
        self.offset = offset
        where = ""
        if self.path is not None:
            where = f" [file {self.path}" + (f", byte offset {offset}" if offset is not None else "") + "]"
        super().__init__(message + where)


class DiskFullError(LocatedError):
    """The filesystem had no room left (``ENOSPC``) or the quota was used up (``EDQUOT``) while writing
    ``path``; the message says what was being written and what to do (free space, then, for a job interrupted
    past its journal, ``rocketstore recover STORE``). Chained from the ``OSError``."""


class StoreFormatError(LocatedError):
    """Bytes on disk do not follow the RocketMQ format; ``path`` and ``offset`` locate the problem."""


class RemoteReadError(LocatedError):
    """Reading a remote store's object failed after the retries (server unreachable, access denied, an object
    that vanished or shrank under the read); ``path`` is the object's URI, ``offset`` where the read started."""


class CorruptRecordError(StoreFormatError):
    """A commit-log record fails RocketMQ's own checks (magic, length arithmetic, body CRC)."""


class DataLossError(RocketStoreError):
    """Requested messages are gone: commit-log files expired, or the range lies past the valid end."""


class MessageValidationError(RocketStoreError):
    """A message handed to the writer breaks RocketMQ's rules (topic name, body or properties size...)."""


class StoreLockedError(RocketStoreError):
    """Another writer or a running broker holds the store's ``lock`` file."""


class JobClosedError(RocketStoreError):
    """A Spark task attempt tried to stage records for a write job that was already committed or aborted."""


class StoreClosedError(RocketStoreError):
    """An operation was attempted on a store that was closed or opened read-only."""


class InvalidArgumentError(RocketStoreError, ValueError):
    """A caller passed an argument the API cannot accept (bad boundary, bad subscription expression...)."""


class UnsupportedLocationError(InvalidArgumentError):
    """A store location this version cannot use: a remote URI (object storage, HDFS) or a malformed file URI."""


class StrayFileWarning(UserWarning):
    """A file or directory in the store that is no part of it (an editor's backup, a ``.nfs…`` file, a name that
    is not an offset, a zero-length file a broker would delete) was skipped; ``rocketstore inspect`` lists them."""
