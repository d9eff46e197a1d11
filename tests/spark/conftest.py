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


def production_shaped_store(tmp_path_factory, name: str, messages: int, topics: int, retry_groups: int,
                            mean: int, sigma: float):
    """A generated production-shaped store (8 queues a topic, retry queues, lognormal sizes, no keys) in 4 MiB
    commit-log files and consume-queue files of 2,000 units."""
    from rocketstore_spark.samples import ProductionSpec, SizeSpec, generate_production_store

    root = tmp_path_factory.mktemp(name) / "store"
    spec = ProductionSpec(messages=messages, topics=topics, queues_per_topic=8, retry_groups=retry_groups,
                          sizes=SizeSpec("lognormal", mean, sigma), keys=False)
    generate_production_store(root, spec, commit_log_file_size=4 << 20, consume_queue_file_size=20 * 2000)
    return root
