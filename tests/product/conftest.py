"""Fixtures of the product tests: the default suite's local Spark session, for the tests that drive one."""

from tests.spark.conftest import spark  # noqa: F401 - the same local Spark session
