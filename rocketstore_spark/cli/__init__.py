"""The ``rocketstore`` command line: store reports, lookups, verification, recovery and the sample generator.

It reaches the store only through the facade (:mod:`rocketstore_spark.store`), like the Spark layer.
"""

from .app import app, main

__all__ = ["app", "main"]
