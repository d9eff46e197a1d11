"""Spark finds the ``rocketstore`` format by its automatic lookup of Python data sources from any working directory,
with the package installed the way ``make demo`` installs it (a path-based editable install) and as a wheel.

Spark's lookup runs in a Python worker that scans ``sys.path`` for ``pyspark_*`` modules (``pkgutil.iter_modules``);
an editable install that provides the package through an import hook is invisible to that scan, so with
setuptools' default editable mode the format was found only when the working directory was the repository.
Each case makes a fresh virtualenv whose only rocketstore is the one installed there, and runs Spark from an
empty temporary directory, without calling ``register``.
"""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.product, pytest.mark.spark, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
# what the Makefile's venv target passes to pip (checked against the Makefile below): maturin's editable install
# is a .pth naming the repository root
EDITABLE_INSTALL = ["-e"]

LOOKUP = r"""
import sys
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
count = spark.read.format("rocketstore").load(sys.argv[1]).count()
import pyspark_rocketstore
print("FOUND", count, pyspark_rocketstore.__file__)
spark.stop()
"""


def fresh_venv(where: Path) -> Path:
    """A virtualenv that sees this interpreter's third-party packages (pyspark, numpy, pyarrow, ...) through a
    plain path entry, which does not run their ``.pth`` files: the project's own editable install stays out."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def pip(python: Path, *args: str) -> None:
    out = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def lookup_from(python: Path, workdir: Path, store: Path) -> tuple[int, Path]:
    workdir.mkdir()
    out = subprocess.run([str(python), "-c", LOOKUP, str(store)], cwd=workdir, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYSPARK_PYTHON": str(python), "PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr[-4000:]
    _, count, module_file = out.stdout.strip().splitlines()[-1].split(" ", 2)
    return int(count), Path(module_file)


def test_the_makefile_installs_the_editable_package_path_based():
    assert f"pip install --quiet {' '.join(EDITABLE_INSTALL)} '.[spark,test,docs]'" in (REPO / "Makefile").read_text()


def test_lookup_finds_the_format_with_an_editable_install_from_any_directory(tmp_path, sample_store):
    python = fresh_venv(tmp_path / "venv")
    pip(python, "install", "--no-deps", *EDITABLE_INSTALL, str(REPO))
    count, module = lookup_from(python, tmp_path / "elsewhere", sample_store)
    assert count == 3000
    assert module.resolve() == (REPO / "pyspark_rocketstore" / "__init__.py").resolve()


def test_lookup_finds_the_format_with_a_wheel_install_from_any_directory(tmp_path, sample_store):
    python = fresh_venv(tmp_path / "venv")
    pip(python, "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(REPO))
    wheel = next((tmp_path / "dist").glob("rocketstore_spark-*.whl"))
    pip(python, "install", "--no-deps", str(wheel))
    count, module = lookup_from(python, tmp_path / "elsewhere", sample_store)
    assert count == 3000
    assert (tmp_path / "venv") in module.parents  # the installed copy, not the repository's
