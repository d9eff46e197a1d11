"""Every example runs, as a user would run it, on a small generated store."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = [pytest.mark.product, pytest.mark.spark]


def run_example(name, *args):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, str(EXAMPLES / name)] + [str(a) for a in args], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_quickstart(sample_store, tmp_path):
    out = run_example("etl_quickstart.py", sample_store, tmp_path / "hourly")
    assert "3,000 messages aggregated" in out and "orders" in out
    assert list((tmp_path / "hourly").glob("*.parquet"))


def test_quickstart_on_a_store_without_the_demo_tags(sample_store, tmp_path):
    """Any store: a tag expression that matches nothing gives an empty summary, not a failure."""
    out = run_example("etl_quickstart.py", sample_store, tmp_path / "none", "no-such-tag")
    assert "0 messages aggregated" in out
    tagged = run_example("etl_quickstart.py", sample_store, tmp_path / "paid", "paid")
    assert "messages aggregated" in tagged and "paid" in tagged


def test_stream_to_parquet(sample_store, tmp_path):
    out = run_example("stream_to_parquet.py", sample_store, tmp_path / "out", tmp_path / "ckpt", "--available-now")
    assert "3,000 messages" in out


def test_migrate_topic(sample_store, tmp_path):
    target = tmp_path / "target"
    out = run_example("migrate_topic.py", sample_store, target, "orders", "paid || shipped")
    migrated = int(out.split("migrated ")[1].split(" ")[0].replace(",", ""))
    assert migrated > 0 and f"holds {migrated:,}" in out


def test_point_lookups(sample_store):
    from rocketstore_spark.store import RocketStore

    with RocketStore.open(sample_store) as s:
        key = next(s.read_queue("orders", 0, 0, 1)).column("keys")[0][0].as_py()
    out = run_example("point_lookups.py", sample_store, "orders", key)
    assert "1 message(s)" in out or "message(s)" in out
    assert "uniqKey pushdown: [{" in out
    assert json and shutil
