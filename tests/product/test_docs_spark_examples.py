"""The Spark code of the README's quick start and of the recipes runs as written, on a sample store (paths
replaced by temporary ones)."""

import os
import re
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.product, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def python_blocks(page: Path, after: str = "", before: str = "") -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = text[text.index(after) if after else 0:text.index(before) if before else None]
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_block(source: str, replacements: dict, spark) -> dict:
    for old, new in replacements.items():
        source = source.replace(old, str(new))
    # the examples build their own session; the test's session is the one getOrCreate() returns
    from pyspark.sql import functions as F

    namespace = {"spark": spark, "F": F}
    exec(compile(source, "example", "exec"), namespace)
    return namespace


def test_the_readme_spark_quick_start(spark, sample_store, tmp_path):
    (source,) = python_blocks(ROOT / "README.md", "## Quick start: Spark", "## Quick start: Python")
    ns = run_block(source, {"/data/broker-a/store": sample_store, "/data/migrated/store": tmp_path / "migrated"},
                   spark)
    assert ns["df"].count() > 0
    assert (tmp_path / "migrated" / "commitlog").is_dir()
    assert ns["stream"].isStreaming


def test_the_recipes(spark, sample_store, tmp_path):
    sources = python_blocks(ROOT / "docs" / "recipes.md")
    assert len(sources) == 4
    paths = {"/data/broker-a/store": sample_store, "/backup/broker-a/store": sample_store,
             "/data/broker-b/store": tmp_path / "b", "/lake/orders_backfill": tmp_path / "backfill",
             "/lake/_checkpoints/orders": tmp_path / "ckpt", "/lake/orders": tmp_path / "lake"}
    try:
        for source in sources:
            run_block(source, paths, spark)
        query = spark.streams.active[0]
        query.processAllAvailable()
        assert spark.read.parquet(str(tmp_path / "lake")).count() > 0
    finally:
        for q in spark.streams.active:
            q.stop()
    assert (tmp_path / "b" / "config" / "topics.json").exists()
