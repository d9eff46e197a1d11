"""The fuzz campaign over damaged copies of a real store, N cases of a seeded campaign (not a test).

    python bench/fuzz.py --cases N --seed S [--store DIR] [--workdir DIR] [--timeout S] [--memory-mb M]
    python bench/fuzz.py --case-seed SEED [--store DIR]     # rerun one case, as a failing case prints it

``--store`` defaults to ``$ROCKETSTORE_GOLDEN_DIR/public-a/store`` (any unpacked store works: the variants'
stores too). Each case runs in a child process capped in wall-clock time and address space. Prints one JSON
line per case (seed, kind of damage, seconds, outcome counts), the report of every failing case, and finally
``cases=N failed=F seconds=T``; exits 1 when a case failed.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.store.fuzz_cases import DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT_S, case_seeds, run_case  # noqa: E402


def default_store() -> str:
    given = os.environ.get("ROCKETSTORE_GOLDEN_DIR")
    if not given:
        sys.exit("pass --store DIR or set ROCKETSTORE_GOLDEN_DIR to an unpacked golden archive")
    for path in (Path(given) / "public-a" / "store", Path(given) / "store"):
        if path.is_dir():
            return str(path)
    sys.exit(f"no public-a/store under ROCKETSTORE_GOLDEN_DIR={given}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=22, help="campaign seed: the same seed gives the same cases")
    ap.add_argument("--case-seed", type=int, action="append", help="run this case only (repeatable)")
    ap.add_argument("--store", help="pristine store to damage copies of")
    ap.add_argument("--workdir", help="where the damaged copies go (a temp dir by default)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per case")
    ap.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_BYTES >> 20, help="address-space cap")
    args = ap.parse_args()
    store = Path(args.store or default_store())
    seeds = args.case_seed or case_seeds(args.seed, args.cases)
    failed, started = 0, time.time()
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        for seed in seeds:
            t = time.time()
            result = run_case(seed, store, Path(work), args.timeout, args.memory_mb << 20)
            counts = Counter(kind for _op, kind, _detail in result.outcomes)
            print(json.dumps({"seed": seed, "kind": result.mutation.get("kind"), "seconds": round(time.time() - t, 2),
                              "outcomes": dict(counts), "failed": bool(result.failures)}), flush=True)
            if result.failures:
                failed += 1
                print(result.report(), file=sys.stderr, flush=True)
    print(f"cases={len(seeds)} failed={failed} seconds={time.time() - started:.0f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
