"""Shared fixtures: the golden store written by Apache RocketMQ 5.3.3 (public-a), unpacked once per session.

``make test`` unpacks ``../shared/golden/public-a.tar.xz`` into a temp dir and passes it as
``ROCKETSTORE_GOLDEN_DIR`` (the store is then ``$ROCKETSTORE_GOLDEN_DIR/public-a``); without it the archive is
unpacked here into pytest's temp dir. Nothing here knows about Spark.
"""

import json
import os
import shutil
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO.parent / "shared" / "golden" / "public-a.tar.xz"
# What ``sizes.args`` says (kept as a constant for the writer and Spark tests that import it).
GOLDEN_SIZES = dict(commit_log_file_size=1048576, consume_queue_file_size=6000, index_hash_slots=5000,
                    index_max_entries=20000)
SIZES_ARGS = {"--commitlog-size": "commit_log_file_size", "--cq-size": "consume_queue_file_size",
              "--index-slots": "index_hash_slots", "--index-num": "index_max_entries"}


def copy_sparse(src, dst) -> None:
    """Copy the file ``src`` to ``dst`` keeping its holes: a store's full-size files (a 1 GiB commit-log file
    holding one message) take on disk only the blocks their data needs, as the original does. ``shutil``'s copy
    reads holes as zeros and writes them out (``shutil.copytree(src, dst, copy_function=copy_sparse)``)."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fin.fileno(), pos, os.SEEK_DATA)
            except OSError:  # nothing but a hole up to the end
                break
            end = os.lseek(fin.fileno(), start, os.SEEK_HOLE)
            while start < end:
                done = os.copy_file_range(fin.fileno(), fout.fileno(), end - start, start, start)
                if done <= 0:
                    raise OSError(f"{src}: expected data up to byte {end}, found its end at {start}")
                start += done
            pos = end
        os.ftruncate(fout.fileno(), size)
    shutil.copystat(src, dst)


def _extract(archive: Path, target: Path) -> None:
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(target, filter="data")
        except TypeError:  # Python without extraction filters
            tar.extractall(target)


@pytest.fixture(scope="session")
def golden_dir(tmp_path_factory) -> Path:
    """``public-a/``: ``store/``, ``manifest.jsonl``, ``rocketmq-view/``, ``sizes.args``."""
    given = os.environ.get("ROCKETSTORE_GOLDEN_DIR")
    if given:
        for path in (Path(given) / "public-a", Path(given)):  # the unpack dir, or public-a itself
            if (path / "store").is_dir() and (path / "manifest.jsonl").is_file():
                return path
        pytest.fail(f"ROCKETSTORE_GOLDEN_DIR={given} holds no public-a/store (unpack {ARCHIVE} there)")
    if not ARCHIVE.is_file():
        pytest.fail(f"golden archive {ARCHIVE} is missing and ROCKETSTORE_GOLDEN_DIR is not set")
    target = tmp_path_factory.mktemp("golden")
    _extract(ARCHIVE, target)
    return target / "public-a"


VARIANTS_DIR = REPO.parent / "shared" / "golden" / "variants"


@pytest.fixture(scope="session")
def variant_golden(tmp_path_factory):
    """``variant_golden("lmq")`` → the unpacked ``lmq/`` of a storage-variant archive (``store/``,
    ``manifest.jsonl``, ``rocketmq-view/``, ``sizes.args``, ``store.args``), unpacked once per session.

    ``ROCKETSTORE_GOLDEN_VARIANTS_DIR`` names a directory holding the unpacked ``<variant>/`` directories or the
    ``<variant>.tar.xz`` archives; without it the archives come from ``../shared/golden/variants``. Tests must
    not modify what it returns (copy the store first)."""
    given = os.environ.get("ROCKETSTORE_GOLDEN_VARIANTS_DIR")
    source = Path(given) if given else VARIANTS_DIR
    unpacked: dict = {}

    def get(name: str) -> Path:
        if name in unpacked:
            return unpacked[name]
        if (source / name / "store").is_dir():
            unpacked[name] = source / name
            return unpacked[name]
        archive = source / f"{name}.tar.xz"
        if not archive.is_file():
            pytest.fail(f"variant golden store {name!r}: neither {source / name}/store nor {archive} exists "
                        "(set ROCKETSTORE_GOLDEN_VARIANTS_DIR)")
        target = tmp_path_factory.mktemp(f"variant-{name}")
        _extract(archive, target)
        unpacked[name] = target / name
        return unpacked[name]

    return get


def sizes_from_args(path: Path) -> dict:
    """A ``sizes.args`` file as RocketStore.open keyword arguments (flags rocketstore has no use for dropped)."""
    words = path.read_text().split()
    return {SIZES_ARGS[flag]: int(value) for flag, value in zip(words[::2], words[1::2]) if flag in SIZES_ARGS}


@pytest.fixture(scope="session")
def golden_store_path(golden_dir) -> Path:
    return golden_dir / "store"


@pytest.fixture(scope="session")
def golden_sizes(golden_dir) -> dict:
    """``sizes.args`` as RocketStore.open keyword arguments."""
    words = (golden_dir / "sizes.args").read_text().split()
    sizes = {SIZES_ARGS[flag]: int(value) for flag, value in zip(words[::2], words[1::2])}
    assert sorted(sizes) == sorted(SIZES_ARGS.values()), words
    return sizes


@pytest.fixture(scope="session")
def manifest(golden_dir) -> list:
    """Every commit-log record, in write (= commit-log) order."""
    with open(golden_dir / "manifest.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def manifest_by_offset(manifest) -> dict:
    return {m["commitLogOffset"]: m for m in manifest}


@pytest.fixture(scope="session")
def dispatched(manifest) -> dict:
    """(topic, queueId) -> the manifest records in that consume queue, in queue-offset order."""
    by_queue = defaultdict(list)
    for m in manifest:
        if m["inConsumeQueue"]:
            by_queue[(m["topic"], m["queueId"])].append(m)
    for rows in by_queue.values():
        rows.sort(key=lambda m: m["cqOffset"])
    return dict(by_queue)


@pytest.fixture(scope="session")
def golden_view(golden_dir) -> dict:
    """What the real store answered (``rocketmq-view/``)."""
    view = golden_dir / "rocketmq-view"

    def load(name):
        with open(view / name, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]

    return {"queues": load("queues.jsonl"), "queries": load("queries.jsonl"),
            "time_queries": load("time_queries.jsonl"),
            "summary": json.loads((view / "summary.json").read_text(encoding="utf-8"))}


@pytest.fixture(scope="session")
def golden_store(golden_store_path):
    """The golden store opened read-only (shared: tests must not mutate it)."""
    from rocketstore_spark.store import RocketStore

    with RocketStore.open(golden_store_path) as store:
        yield store


@pytest.fixture
def golden_copy(golden_store_path, tmp_path) -> Path:
    """A private copy of the golden store's ``store/`` dir for tests that modify it."""
    target = tmp_path / "store"
    shutil.copytree(golden_store_path, target)
    return target


# property tests run on a loaded 2-core CI machine: time is not what they test
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("rocketstore", deadline=None)
_hypothesis_settings.load_profile("rocketstore")


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory):
    """A small generated store shared by the CLI and product tests (examples, notebook, cluster)."""
    from rocketstore_spark.samples import SampleSpec, generate_store

    path = tmp_path_factory.mktemp("sample") / "store"
    generate_store(path, SampleSpec(messages=3000, days=0.5, seed=3), commit_log_file_size=1 << 20,
                   consume_queue_file_size=6000, index_hash_slots=4000, index_max_entries=16000)
    return path


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS S3 server on free loopback ports for the whole session (see ``tests/s3_server.py``)."""
    from tests.s3_server import start_s3_server

    server = start_s3_server(tmp_path_factory.mktemp("s3") / "weed")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """gcp-storage-emulator on a free loopback port for the whole session (see ``tests/gcs_server.py``)."""
    from tests.gcs_server import start_gcs_server

    server = start_gcs_server(tmp_path_factory.mktemp("gcs"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    """Azurite's blob service on a free loopback port for the whole session (see ``tests/azure_server.py``);
    installed from npm by ``make azurite`` when missing."""
    from tests.azure_server import start_azure_server

    try:
        server = start_azure_server(tmp_path_factory.mktemp("azure") / "azurite")
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()
