"""The native decode under a coverage-guided fuzzer (atheris): arbitrary bytes never crash, hang or raise
anything but a RocketStoreError (see native_fuzz_target.py). ROCKETSTORE_FUZZ_SECONDS lengthens the run."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).with_name("native_fuzz_target.py")
SEED_BYTES = (512, 2048, 8192)  # commit-log prefixes: a few whole records and a torn one


@pytest.mark.slow
def test_native_decode_survives_arbitrary_bytes(tmp_path, golden_dir):
    seconds = int(os.environ.get("ROCKETSTORE_FUZZ_SECONDS", "60"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    first_file = sorted((Path(golden_dir) / "store" / "commitlog").iterdir())[0].read_bytes()
    for size in SEED_BYTES:
        (corpus / f"seed-{size}").write_bytes(bytes(4) + first_file[:size])
    run = subprocess.run(
        [sys.executable, str(TARGET), f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=seconds + 300)
    report = run.stderr[-4000:]
    assert run.returncode == 0, f"the fuzzer found a failing input (artifacts in {tmp_path}):\n{report}"
    runs = re.search(r"Done (\d+) runs", run.stderr)
    assert runs and int(runs.group(1)) > len(SEED_BYTES), report
    assert len(list(corpus.iterdir())) >= len(SEED_BYTES), report
