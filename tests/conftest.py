"""Shared fixtures: the golden store written by Apache RocketMQ 5.3.3 (public-a), unpacked once per session.

``make test`` unpacks ``../shared/golden/public-a.tar.xz`` into a temp dir and passes it as
``ROCKETSTORE_GOLDEN_DIR``; without it the archive is unpacked here into pytest's temp dir.
"""

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO.parent / "shared" / "golden" / "public-a.tar.xz"
GOLDEN_SIZES = dict(commit_log_file_size=1048576, consume_queue_file_size=6000, index_hash_slots=5000,
                    index_max_entries=20000)


@pytest.fixture(scope="session")
def golden_dir(tmp_path_factory) -> Path:
    given = os.environ.get("ROCKETSTORE_GOLDEN_DIR")
    if given and (Path(given) / "public-a").is_dir():
        return Path(given) / "public-a"
    target = tmp_path_factory.mktemp("golden")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(target)
    return target / "public-a"


@pytest.fixture(scope="session")
def golden_store_path(golden_dir) -> Path:
    return golden_dir / "store"


@pytest.fixture(scope="session")
def manifest(golden_dir) -> list:
    with open(golden_dir / "manifest.jsonl") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def golden_view(golden_dir) -> dict:
    view = golden_dir / "rocketmq-view"
    load = lambda name: [json.loads(line) for line in open(view / name)]  # noqa: E731
    return {"queues": load("queues.jsonl"), "queries": load("queries.jsonl"),
            "time_queries": load("time_queries.jsonl"), "summary": json.loads((view / "summary.json").read_text())}


@pytest.fixture(scope="session")
def golden_store(golden_store_path):
    from rocketstore_spark.store import RocketStore

    with RocketStore.open(golden_store_path) as store:
        yield store


@pytest.fixture
def golden_copy(golden_store_path, tmp_path) -> Path:
    """A private copy of the golden store for tests that modify it."""
    target = tmp_path / "store"
    shutil.copytree(golden_store_path, target)
    return target
