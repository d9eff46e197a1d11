"""One local Spark session for every Spark test (marked ``spark``)."""

import os
import sys

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "/tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    # executors' Python workers must run this interpreter (the project's venv), not whatever python3 is first
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("rocketstore-tests")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def pushdown(spark):
    """Filter pushdown on for one test (Spark >= 4.1), restored afterwards."""
    key = "spark.sql.python.filterPushdown.enabled"
    old = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    yield spark
    spark.conf.set(key, old)
