"""Spark reads of a sample of the fuzz campaign's damaged stores (the store-level campaign is
``tests/store/test_fuzz.py``): each read succeeds or fails with a rocketstore error that names a file or offset."""

import os
import warnings

import pytest

import rocketstore_spark.errors as errors
from tests.store.fuzz_cases import case_seeds, make_case

ERROR_NAMES = tuple(name for name, cls in vars(errors).items()
                    if isinstance(cls, type) and issubclass(cls, errors.RocketStoreError))
CASES = int(os.environ.get("ROCKETSTORE_FUZZ_SPARK_CASES", "12"))


def _read(spark, path, **options):
    r = spark.read.format("rocketstore").option("includeSystemTopics", "true")
    for key, value in options.items():
        r = r.option(key, value)
    df = r.load(str(path))
    return df.limit(20).collect(), df.count()


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_spark_reads_of_damaged_stores_succeed_or_name_the_damage(spark, golden_store_path, tmp_path):
    bad = []
    for seed in case_seeds(22, CASES):
        copy, mutation = make_case(seed, golden_store_path, tmp_path / str(seed))
        for options in ({}, {"scanMode": "commitlog"}, {"scanMode": "raw"}):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", errors.StrayFileWarning)
                    _read(spark, copy, **options)
            except Exception as e:  # noqa: BLE001 - what Spark hands back wraps the Python error as text
                text = str(e)
                if not any(name in text for name in ERROR_NAMES) or not (str(copy) in text or "offset" in text):
                    bad.append(f"seed={seed} {options} {mutation}: {text[:1500]}")
    assert not bad, "\n".join(bad)
