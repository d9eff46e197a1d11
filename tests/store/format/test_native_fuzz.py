"""The native decode under a coverage-guided fuzzer (atheris): arbitrary bytes never crash, hang or raise
anything but a RocketStoreError (see native_fuzz_target.py). ROCKETSTORE_FUZZ_SECONDS lengthens the run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).with_name("native_fuzz_target.py")


@pytest.mark.slow
def test_native_decode_survives_arbitrary_bytes(tmp_path):
    seconds = int(os.environ.get("ROCKETSTORE_FUZZ_SECONDS", "60"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    run = subprocess.run(
        [sys.executable, str(TARGET), f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=seconds + 300)
    report = run.stderr[-4000:]
    assert run.returncode == 0, f"the fuzzer found a failing input (artifacts in {tmp_path}):\n{report}"
    assert "Done" in run.stderr and "executed" in run.stderr.split("Done")[-1], report
    assert any(corpus.iterdir()), "the fuzzer kept no input: it did not run the target"
