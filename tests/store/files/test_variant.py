"""Storage variants are told from the files (each golden variant store, the default golden store, new stores),
explicit variants are checked against the files, writers refuse every variant but the default layout, and
``rocketstore inspect`` reports the variant."""

import json
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

from rocketstore_spark.errors import InvalidArgumentError, StoreConfigError, UnsupportedVariantError
from rocketstore_spark.store import RocketStore, detect_variant, parse_variant, refuse_variant_writes

EXPECTED = {"lmq": "lmq", "prop-crc": "prop-crc", "batch-cq": "batch-cq", "rocksdb-cq": "rocksdb-cq",
            "dledger": "dledger"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_golden_variant_is_detected_from_its_files(variant_golden, name):
    found = detect_variant(variant_golden(name) / "store")
    assert found.name == EXPECTED[name] and found.evidence
    assert (found.dledger_data is not None) == (name == "dledger")
    if name == "dledger":
        assert found.dledger_data.name == "data" and found.dledger_data.parent.name == "dledger-n0"


def test_the_default_golden_store_and_new_stores_are_default(golden_store_path, golden_store, tmp_path):
    assert detect_variant(golden_store_path).name == "default" and golden_store.variant.is_default
    assert detect_variant(tmp_path).is_default  # an empty directory: a new store
    with RocketStore.open_writer(tmp_path / "new") as writer:
        writer.append(pa.table({"topic": ["T"], "body": [b"x"]}))
    assert detect_variant(tmp_path / "new").is_default


@pytest.mark.parametrize("text,features", [
    ("default", ()), ("lmq", ("lmq",)), ("prop-crc,lmq", ("lmq", "prop-crc")), ("LMQ + prop-crc", ("lmq", "prop-crc")),
    (["dledger", "lmq"], ("dledger", "lmq")), (None, None)])
def test_parse_variant(text, features):
    assert parse_variant(text) == features


@pytest.mark.parametrize("text", ["", "raft", "default,lmq", "lmq,,nope", ","])
def test_bad_variant_names_are_errors_listing_the_valid_ones(text):
    with pytest.raises(InvalidArgumentError, match="prop-crc"):
        parse_variant(text)


def test_an_explicit_variant_adds_what_the_files_leave_open(golden_store_path):
    """A default store written by a prop-crc or LMQ broker before its first such record looks default."""
    with RocketStore.open(golden_store_path, variant="prop-crc,lmq") as s:
        assert s.variant.name == "lmq+prop-crc" and "prop-crc (given)" in s.variant.evidence
        assert s.commitlog.prop_crc_required
    with RocketStore.open(golden_store_path, variant="default") as s:
        assert s.variant.is_default and not s.commitlog.prop_crc_required


@pytest.mark.parametrize("name,given", [("batch-cq", "default"), ("rocksdb-cq", "lmq"), ("dledger", "prop-crc")])
def test_an_explicit_variant_contradicting_the_layout_is_an_error(variant_golden, name, given):
    with pytest.raises(StoreConfigError, match=f"contradicts the files.*{name}"):
        detect_variant(variant_golden(name) / "store", given)


def test_an_explicit_structural_variant_the_files_do_not_show_is_an_error(golden_store_path):
    with pytest.raises(StoreConfigError, match="does not show the dledger layout"):
        RocketStore.open(golden_store_path, variant="dledger")


def test_several_dledger_logs_are_an_error(tmp_path):
    for node in ("n0", "n1"):
        (tmp_path / f"dledger-{node}" / "data").mkdir(parents=True)
    with pytest.raises(StoreConfigError, match="several DLedger logs"):
        detect_variant(tmp_path)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_writes_into_every_variant_store_are_refused_and_change_nothing(variant_golden, tmp_path, name):
    store = tmp_path / "store"
    shutil.copytree(variant_golden(name) / "store", store)
    before = sorted((str(p.relative_to(store)), p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*"))
    with pytest.raises(UnsupportedVariantError, match=f"is a {name} store.*writes only the default layout"):
        RocketStore.open_writer(store)
    with pytest.raises(UnsupportedVariantError):
        refuse_variant_writes(store)  # what the Spark sink checks on the driver before any task stages
    after = sorted((str(p.relative_to(store)), p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*"))
    assert after == before


def test_a_new_store_named_as_a_variant_is_refused(tmp_path):
    with pytest.raises(UnsupportedVariantError, match="lmq"):
        RocketStore.open_writer(tmp_path / "new", variant="lmq")
    assert not (tmp_path / "new").exists()
    refuse_variant_writes(tmp_path / "new")  # the default layout: nothing to refuse


def _inspect(*args):
    return subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", "inspect", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_inspect_reports_the_variant(variant_golden):
    out = _inspect(variant_golden("lmq") / "store", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["variant"]["name"] == "lmq" and info["variant"]["features"] == ["lmq"]
    assert "variant: prop-crc" in _inspect(variant_golden("prop-crc") / "store").stdout
    dledger = json.loads(_inspect(variant_golden("dledger") / "store", "--json").stdout)
    assert dledger["variant"]["name"] == "dledger" and dledger["variant"]["dledgerData"].endswith("dledger-n0/data")
    assert sum(t["messages"] for t in dledger["topics"]) == 4468 and dledger["recovery"]["valid_end"] == 14851785
    forced = json.loads(_inspect(variant_golden("lmq") / "store", "--json", "--variant", "lmq,prop-crc").stdout)
    assert forced["variant"]["name"] == "lmq+prop-crc"


def test_inspect_reads_a_rocksdb_cq_store_and_leaves_the_database_alone(variant_golden):
    golden = variant_golden("rocksdb-cq")
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in (golden / "store/consumequeue").iterdir())
    out = _inspect(golden / "store", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["variant"]["name"] == "rocksdb-cq" and sum(t["messages"] for t in info["topics"]) == 4493
    assert sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                  for p in (golden / "store/consumequeue").iterdir()) == before


def test_prop_crc_is_detected_from_the_newest_file_too(variant_golden, tmp_path):
    """A broker that switched enabledAppendPropCRC on later: only its newer files' records carry the property."""
    store = tmp_path / "store"
    shutil.copytree(variant_golden("prop-crc") / "store", store)
    first = sorted((store / "commitlog").iterdir())[0]
    with open(first, "r+b") as fh:  # the oldest file's first record loses its property (renamed, same length)
        total = int.from_bytes(fh.read(4), "big")
        fh.seek(total - 20)
        fh.write(b"__CRC33#")
    assert detect_variant(store).name == "prop-crc"
    for path in sorted((store / "commitlog").iterdir())[1:]:
        path.unlink()
    assert detect_variant(store).is_default


def test_the_cli_reads_a_batch_cq_store_in_messages(variant_golden):
    """inspect counts messages (not units) in batch consume queues; dump cuts inside an inner batch; query --time
    answers as the real store."""
    golden = variant_golden("batch-cq")
    sizes = (golden / "sizes.args").read_text().split()[:8]  # the four sizes (the rest are broker-only flags)
    info = json.loads(_inspect(golden / "store", "--json", *sizes).stdout)
    assert info["variant"]["name"] == "batch-cq"
    assert {t["topic"]: t["messages"] for t in info["topics"]}["BatchTopic"] == 5541
    run = lambda *a: subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    out = run("dump", golden / "store", *sizes, "--topic", "BatchTopic", "--queue", 0, "--from", 2, "--to", 4,
              "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["queueOffset"], r["commitLogOffset"]) for r in rows] == [(2, 99859), (3, 99859)]
    assert rows[1]["tags"] == "TagB" and rows[1]["uniqKey"].endswith("C782C8003E")
    # the real store's answer (rocketmq-view/time_queries.jsonl)
    out = run("query", golden / "store", *sizes, "--topic", "BatchTopic", "--queue", 0, "--time", 1795500764029)
    assert out.returncode == 0 and (json.loads(out.stdout)["lower"], json.loads(out.stdout)["upper"]) == (81, 0)


def test_the_cli_dumps_and_queries_a_rocksdb_cq_store(variant_golden):
    golden = variant_golden("rocksdb-cq")
    sizes = (golden / "sizes.args").read_text().split()
    run = lambda *a: subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    out = run("dump", golden / "store", *sizes, "--topic", "rocks_topic", "--queue", 1, "--from", 2, "--to", 4,
              "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["commitLogOffset"] for line in out.stdout.splitlines()] == [6222, 57051]
    # the real store's answer (rocketmq-view/time_queries.jsonl)
    out = run("query", golden / "store", *sizes, "--topic", "rocks_topic", "--queue", 1, "--time", 1795500828158)
    assert out.returncode == 0 and (json.loads(out.stdout)["lower"], json.loads(out.stdout)["upper"]) == (1, 0)
    out = run("verify", golden / "store", *sizes)
    assert out.returncode == 0 and "consistent" in out.stdout, out.stderr
