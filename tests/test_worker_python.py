"""register(spark) checks that Spark's Python workers can import the package before anything fails in a worker."""

import sys
import types

import pytest

import rocketstore_spark
from rocketstore_spark.errors import StoreConfigError


def test_a_worker_python_without_the_package_is_an_error_saying_what_to_set(tmp_path):
    bare = tmp_path / "python"
    bare.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that cannot import anything
    bare.chmod(0o755)
    spark = types.SimpleNamespace(sparkContext=types.SimpleNamespace(pythonExec=str(bare)))
    with pytest.raises(StoreConfigError, match="PYSPARK_PYTHON=") as caught:
        rocketstore_spark.register(spark)
    assert sys.executable in str(caught.value)


def test_the_driver_interpreter_is_fine():
    assert rocketstore_spark.worker_python_problem(sys.executable) is None
