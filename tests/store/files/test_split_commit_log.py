"""A commit log split across paths (``storePathCommitLog`` listing several directories): the golden store's
commit-log files moved to two directories the way a broker's ``MultiPathMappedFileQueue`` places them (file i in
the i-th, modulo, of the sorted paths) read exactly as the store itself. A real broker writing such a layout is
checked in tests/e2e/test_broker_split_commitlog.py."""

import shutil

import pytest

from rocketstore_spark.errors import InvalidArgumentError, StoreFormatError, StoreNotFoundError
from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.store import RocketStore


@pytest.fixture(scope="module")
def split_store(golden_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("split")
    root = base / "store"
    shutil.copytree(golden_dir / "store", root)
    paths = sorted([base / "disk-a" / "commitlog", base / "disk-b" / "commitlog"], key=str)
    for p in paths:
        p.mkdir(parents=True)
    files = sorted((root / "commitlog").iterdir())
    size = files[0].stat().st_size
    for f in files:
        shutil.move(f, paths[(int(f.name) // size) % len(paths)] / f.name)
    (root / "commitlog").rmdir()
    return root, paths


def test_reads_lookups_and_recovery_across_paths(golden_dir, split_store):
    root, paths = split_store
    joined = ",".join(map(str, paths))
    with RocketStore.open(golden_dir / "store") as whole, RocketStore.open(root, commit_log_path=joined) as split:
        assert (split.recovery.mode, split.max_phy_offset()) == (whole.recovery.mode, whole.max_phy_offset())
        assert split.commit_log_file_starts() == whole.commit_log_file_starts()
        assert {f.path.parent for f in split.commitlog.queue.files} == set(paths)
        for topic in whole.topics()[:4]:
            for qid in whole.queue_ids(topic):
                a = [r for b in whole.read_queue(topic, qid) for r in b.to_pylist()]
                assert a == [r for b in split.read_queue(topic, qid) for r in b.to_pylist()], (topic, qid)
        # a record in every file (lookups by commit-log offset cross the paths)
        starts = whole.commit_log_file_starts()
        assert whole.read_records_at(starts).to_pylist() == split.read_records_at(starts).to_pylist()
    # a list works as well as the comma-separated text
    with RocketStore.open(root, commit_log_path=[str(p) for p in paths]) as split:
        assert split.max_phy_offset() > 0


def test_errors_say_what_to_give(split_store, tmp_path):
    root, paths = split_store
    with pytest.raises(StoreNotFoundError, match="commit_log_path"):
        RocketStore.open(root)
    with pytest.raises(InvalidArgumentError, match="not an existing directory"):
        RocketStore.open(root, commit_log_path=f"{paths[0]},{tmp_path / 'nope'}")
    with pytest.raises(InvalidArgumentError, match="not an existing directory"):
        parse_read_options({"path": str(root), "commitLogPath": str(tmp_path / "nope")})
    with pytest.raises(InvalidArgumentError, match="at least one directory"):
        parse_read_options({"path": str(root), "commitLogPath": " , "})
    # one file in two paths: which copy is meant is unknown
    twin = tmp_path / "twin"
    twin.mkdir()
    first = sorted(paths[0].iterdir())[0]
    shutil.copyfile(first, twin / first.name)
    with pytest.raises(StoreFormatError, match="in two of the commit-log paths"):
        RocketStore.open(root, commit_log_path=[*map(str, paths), str(twin)])
