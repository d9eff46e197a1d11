"""``RocketStoreDataSource``: the ``rocketstore`` format for spark.read / readStream / write / writeStream.

Each method imports what it uses when it is called. Spark imports this module in every Python worker of a
query's planning (the data-source lookup, the one that creates the source, the planner) and most of them only
ask for :meth:`~RocketStoreDataSource.name` or pickle the instance: importing numpy, pyarrow and the store
there cost ~0.3 s per worker, on the path of every first plan.
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from .user_errors import message_first

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from pyspark.sql.types import StructType

    from .reader import RocketStoreReader
    from .writer import RocketStoreWriter

PUSHDOWN_WORKER = "data_source_pushdown_filters"  # pyspark.sql.worker.data_source_pushdown_filters


def called_from_pushdown_worker() -> bool:
    """Is Spark's filter-pushdown worker asking for the reader? Only then may the reader have ``pushFilters``.

    Why the caller is looked at: Spark (4.1+) asks ``DataSource.reader(schema)`` for the reader in two workers.
    The pushdown worker (run only when ``spark.sql.python.filterPushdown.enabled`` is on) calls its
    ``pushFilters``; the planning worker (``plan_data_source_read``, run when that setting is off) raises
    ``DATA_SOURCE_PUSHDOWN_DISABLED`` for any reader whose ``pushFilters`` is not ``DataSourceReader``'s own.
    ``reader()`` receives only the schema, and the options carry only the user's options, not the session's
    settings (a Python worker has no session to ask), so the setting cannot be read; what tells the two calls
    apart is which worker module is running the call. Spark 4.0 has no pushdown worker: its readers never have
    ``pushFilters``. Re-checked with Spark 4.3: both workers still call ``data_source.reader(schema=schema)``
    alike, and the planning worker reads the setting (``enable_pushdown``) from its input only to raise after
    the reader was made; nothing reaches the source or the reader. ``tests/spark/test_source.py`` reads with the
    setting on and off, and checks the installed Spark's workers still give no other way."""
    frame = inspect.currentframe()
    while frame is not None:
        if PUSHDOWN_WORKER in (frame.f_globals.get("__name__", "") + frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


class RocketStoreDataSource(DataSource):
    """Apache RocketMQ stores (commit log, consume queues, index) read and written directly, no broker."""

    def __init__(self, options):
        super().__init__(options)
        from .worker_gc import settle_in_worker

        settle_in_worker()  # Spark runs a full collection after every call into a worker: let it skip the modules

    @classmethod
    def name(cls) -> str:
        return "rocketstore"

    @message_first
    def schema(self):
        from .options import TABLE_CONSUMER_OFFSETS, TABLE_MESSAGES, parse_read_options
        from .schema import SCHEMA

        # called at load() when no schema is given: validate the options now so mistakes surface early
        opts = parse_read_options(self.options, stream=True)  # the superset: readStream options are valid here too
        if opts.table == TABLE_CONSUMER_OFFSETS:
            from .group_reader import CONSUMER_OFFSETS_SCHEMA

            return CONSUMER_OFFSETS_SCHEMA
        if opts.table != TABLE_MESSAGES:
            from .special_reader import SPECIAL_TABLES

            return SPECIAL_TABLES[opts.table].schema
        return SCHEMA

    @message_first
    def reader(self, schema: StructType) -> RocketStoreReader:
        from .options import TABLE_CONSUMER_OFFSETS, TABLE_MESSAGES, parse_read_options
        from .reader import RocketStorePushdownReader, RocketStoreReader
        from .schema import SPARK_COLUMNS, validate_user_schema

        opts = parse_read_options(self.options)
        if opts.table == TABLE_CONSUMER_OFFSETS:
            from .group_reader import ConsumerOffsetsReader

            return ConsumerOffsetsReader(opts)
        if opts.table != TABLE_MESSAGES:
            from .special_reader import SpecialTableReader

            return SpecialTableReader(opts)
        columns = validate_user_schema(schema) if schema is not None else SPARK_COLUMNS
        cls = RocketStorePushdownReader if called_from_pushdown_worker() else RocketStoreReader
        return cls(opts, columns)

    @message_first
    def writer(self, schema: StructType, overwrite: bool) -> RocketStoreWriter:
        from ..store import StoreLock, new_job_id, refuse_variant_writes
        from .write_options import existing_queue_counts, parse_write_options, validate_input_schema
        from .writer import RocketStoreWriter

        opts = parse_write_options(self.options, overwrite)
        validate_input_schema(schema, opts)
        refuse_variant_writes(opts.path)  # the default layout only, refused before any task stages a record
        os.makedirs(opts.path, exist_ok=True)
        StoreLock.acquire(opts.path).release()  # fail fast when a broker or another writer holds the store
        return RocketStoreWriter(opts, new_job_id(), {} if overwrite else existing_queue_counts(opts.path),
                                 overwrite)

    @message_first
    def streamReader(self, schema: StructType):
        from ..errors import InvalidArgumentError
        from .options import SIDE_TABLES, parse_read_options
        from .schema import SPARK_COLUMNS, validate_user_schema
        from .stream_reader import RocketStoreStreamReader

        opts = parse_read_options(self.options, stream=True)
        if opts.table in SIDE_TABLES:
            raise InvalidArgumentError(f"option table={opts.table} is a batch table: read it with spark.read, "
                                       "not spark.readStream")
        if opts.tiered_path is not None and not any(ref.path for ref in opts.stores):
            raise InvalidArgumentError("option tieredStorePath without a path: a stream follows a local store's "
                                       "queue tails; give the broker's store as the path (the tiered storage "
                                       "supplies the offsets before the local store's first)")
        columns = validate_user_schema(schema) if schema is not None else SPARK_COLUMNS
        return RocketStoreStreamReader(opts, columns)

    @message_first
    def streamWriter(self, schema: StructType, overwrite: bool):
        from ..store import StoreLock, refuse_variant_writes
        from .stream_writer import RocketStoreStreamWriter
        from .write_options import existing_queue_counts, parse_write_options, validate_input_schema

        opts = parse_write_options(self.options, False)
        validate_input_schema(schema, opts)
        refuse_variant_writes(opts.path)
        os.makedirs(opts.path, exist_ok=True)
        StoreLock.acquire(opts.path).release()
        return RocketStoreStreamWriter(opts, existing_queue_counts(opts.path), schema)


def register_source(spark) -> None:
    """``spark.dataSource.register`` of :class:`RocketStoreDataSource`; a no-op where Spark's automatic lookup
    already registered the ``rocketstore`` name (Spark 4.0 refuses to replace it)."""
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(RocketStoreDataSource)
    except AnalysisException as e:
        if getattr(e, "getCondition", e.getErrorClass)() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
