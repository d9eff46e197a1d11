"""rocketstore-spark: Apache RocketMQ's on-disk store as a PySpark data source and sink.

Importing this package does not import pyspark; the store layer (:mod:`rocketstore_spark.store`) works
without Spark.
"""

__version__ = "0.1.0"


def register(spark) -> None:
    """Register the ``rocketstore`` format on ``spark`` (for sessions where Python data source lookup is off)."""
    from .spark.source import register_source

    register_source(spark)
