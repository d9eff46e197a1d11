"""rocketstore-spark: Apache RocketMQ's on-disk store as a PySpark data source and sink.

Importing this package does not import pyspark; the store layer (:mod:`rocketstore_spark.store`) works
without Spark.
"""

__version__ = "0.1.0"


def register(spark) -> None:
    """Register the ``rocketstore`` format on ``spark`` (for sessions where Python data source lookup is off).

    Checks first that Spark's Python workers can import this package: they run ``PYSPARK_PYTHON`` (default
    ``python3`` on the PATH), not necessarily the interpreter of the driver script."""
    from .spark.source import register_source

    python = getattr(getattr(spark, "sparkContext", None), "pythonExec", None)
    problem = worker_python_problem(python) if python else None
    if problem:
        from .errors import StoreConfigError

        raise StoreConfigError(problem)
    register_source(spark)


def worker_python_problem(python: str):
    """What to do when the interpreter ``python`` (Spark's workers') cannot import this package; None when it
    can."""
    import os
    import shutil
    import subprocess
    import sys

    found = shutil.which(python) or python
    if os.path.realpath(found) == os.path.realpath(sys.executable):
        return None
    try:
        done = subprocess.run([found, "-c", "import rocketstore_spark"], cwd=os.path.sep, capture_output=True,
                              timeout=60)
        if done.returncode == 0:
            return None
    except OSError:
        pass
    return (f"Spark's Python workers run {python!r} ({found}), which cannot import rocketstore_spark, so Spark "
            f"will not find the rocketstore format; set PYSPARK_PYTHON={sys.executable} before the SparkSession "
            "starts (or .config('spark.pyspark.python', sys.executable)), or install the package for that "
            "interpreter")
