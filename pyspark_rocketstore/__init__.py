"""Entry point for Spark's automatic lookup of Python data sources.

Spark imports every installed top-level module whose name starts with ``pyspark_`` and registers its
``DefaultSource`` under ``DefaultSource.name()``, so after ``pip install rocketstore-spark`` the format
``rocketstore`` works with no register call.
"""

from rocketstore_spark.spark.source import RocketStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
