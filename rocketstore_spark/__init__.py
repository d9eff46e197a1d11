"""rocketstore-spark: Apache RocketMQ's on-disk store as a PySpark data source and sink.

Importing this package does not import pyspark; the store layer (:mod:`rocketstore_spark.store`) works
without Spark.
"""

__version__ = "0.1.0"


def register(spark) -> None:
    """Register the ``rocketstore`` format on ``spark`` (for sessions where Python data source lookup is off)."""
    from pyspark.errors import AnalysisException

    from .spark.source import RocketStoreDataSource

    try:
        spark.dataSource.register(RocketStoreDataSource)
    except AnalysisException as e:
        # Spark 4.0 refuses to replace a source its automatic lookup already found (pyspark_rocketstore)
        if getattr(e, "getCondition", e.getErrorClass)() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
