"""The fuzz campaign over damaged copies of the golden store (engine in :mod:`tests.store.fuzz_cases`).

The default suite runs a small fixed sample, one case per kind of damage that costs most to get wrong; the long
campaign (``-m slow``, or ``python bench/fuzz.py --cases N --seed S``) runs N cases of a seeded campaign. Every
case runs in a child process capped in time and address space; a failing case prints its seed.
"""

import hashlib
import os
import random
from pathlib import Path

import pytest

from tests.conftest import ARCHIVE, _extract
from tests.store.fuzz_cases import case_kind, case_seeds, make_case, run_case

CAMPAIGN_SEED = int(os.environ.get("ROCKETSTORE_FUZZ_SEED", "22"))
CAMPAIGN_CASES = int(os.environ.get("ROCKETSTORE_FUZZ_CASES", "300"))
# the storage-variant golden stores next to public-a's archive
VARIANTS_DIR = Path(os.environ.get("ROCKETSTORE_VARIANTS_DIR", ARCHIVE.parent / "variants"))
# one case each of: a single-bit body flip, a commit-log header field, a consume-queue unit, a stray file
FAST_SAMPLE = ("body_bit_flip", "record_field", "cq_unit", "stray_file")


def fast_seeds() -> list:
    """The first case of each FAST_SAMPLE kind in campaign 22 (cheap: a case's kind is its seed's first draw)."""
    found = {}
    for seed in case_seeds(22, 400):
        found.setdefault(case_kind(random.Random(seed)), seed)
    return [found[k] for k in FAST_SAMPLE]


def digest(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", fast_seeds())
def test_a_damaged_store_reads_or_fails_cleanly(seed, golden_store_path, tmp_path):
    result = run_case(seed, golden_store_path, tmp_path)
    assert result.outcomes, result.report()
    assert not result.failures, result.report()


def _dledger_seeds(store, tmp_path) -> list:
    """From campaign 21: a case damaging a DLedger entry header, one damaging a record inside an entry, and the
    first stray-file and torn-tail cases (found by making cases, which only hard-links the store)."""
    wanted = {"entry header": None, "record": None, "stray_file": None, "torn_tail": None}
    for seed in case_seeds(21, 400):
        _, mutation = make_case(seed, store, tmp_path / "pick")
        kind = mutation["kind"]
        if kind == "record_field":
            kind = "entry header" if mutation["field"].startswith("dledger ") else "record"
        if kind in wanted and wanted[kind] is None:
            wanted[kind] = seed
        if None not in wanted.values():
            break
    assert None not in wanted.values(), wanted
    return list(wanted.values())


@pytest.mark.timeout(600)
def test_a_damaged_dledger_log_reads_or_fails_cleanly(variant_golden, tmp_path):
    store = variant_golden("dledger") / "store"
    failed = []
    for seed in _dledger_seeds(store, tmp_path):
        result = run_case(seed, store, tmp_path / str(seed))
        assert result.outcomes, result.report()
        if result.failures:
            failed.append(result.report())
    assert not failed, "\n".join(failed)


def test_the_fast_sample_covers_its_kinds(golden_store_path, tmp_path):
    kinds = []
    for seed in fast_seeds():
        copy, mutation = make_case(seed, golden_store_path, tmp_path / str(seed))
        kinds.append(mutation["kind"])
    assert kinds == list(FAST_SAMPLE)


def test_a_case_is_the_same_for_the_same_seed(golden_store_path, tmp_path):
    seed = case_seeds(CAMPAIGN_SEED, 1)[0]
    first, mutation = make_case(seed, golden_store_path, tmp_path / "a")
    second, again = make_case(seed, golden_store_path, tmp_path / "b")
    assert {k: v for k, v in mutation.items() if k != "file"} == {k: v for k, v in again.items() if k != "file"}
    assert digest(first) == digest(second) != digest(golden_store_path)


def test_cases_leave_the_pristine_store_alone(golden_store_path, tmp_path):
    before = digest(golden_store_path)
    for seed in case_seeds(CAMPAIGN_SEED + 1, 12):  # every kind edits a private copy of the file it damages
        make_case(seed, golden_store_path, tmp_path / str(seed))
    assert digest(golden_store_path) == before


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_fuzz_campaign(golden_store_path, tmp_path):
    failed = []
    for seed in case_seeds(CAMPAIGN_SEED, CAMPAIGN_CASES):
        result = run_case(seed, golden_store_path, tmp_path)
        if result.failures:
            failed.append(result.report())
    assert not failed, f"{len(failed)} of {CAMPAIGN_CASES} cases failed (campaign seed {CAMPAIGN_SEED}):\n" + \
        "\n".join(failed)


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_fuzz_campaign_on_the_variant_stores(tmp_path):
    archives = sorted(VARIANTS_DIR.glob("*.tar.xz"))
    assert archives, f"no variant archives in {VARIANTS_DIR} (set ROCKETSTORE_VARIANTS_DIR)"
    failed = []
    for archive in archives:
        name = archive.name.split(".")[0]
        _extract(archive, tmp_path / "unpacked")
        for seed in case_seeds(CAMPAIGN_SEED, max(CAMPAIGN_CASES // 10, 5)):
            result = run_case(seed, tmp_path / "unpacked" / name / "store", tmp_path / "work")
            if result.failures:
                failed.append(f"[{name}] " + result.report())
    assert not failed, "\n".join(failed)


def test_the_caps_turn_a_hang_or_a_runaway_allocation_into_a_failing_case(golden_store_path, tmp_path):
    """Guard against a vacuous campaign: a child out of time or address space fails its case, seed printed."""
    seed = fast_seeds()[0]
    hung = run_case(seed, golden_store_path, tmp_path, timeout_s=0.05)
    assert hung.failures and "hung" in hung.failures[0] and f"--case-seed {seed}" in hung.report()
    starved = run_case(seed, golden_store_path, tmp_path, memory_bytes=64 << 20)
    assert starved.failures and "child died" in starved.failures[0]
