"""The format layer must work where pyspark is not installed."""

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark" / "store"

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pyspark', 'py4j'):
            raise ImportError('pyspark is blocked for this test: ' + name)
sys.meta_path.insert(0, Block())
import rocketstore_spark.store as store
s = store.RocketStore.open(sys.argv[1])
print('OK', s.max_phy_offset(), 'pyspark' in sys.modules)
"""


def test_store_imports_and_reads_without_pyspark(golden_store_path):
    out = subprocess.run([sys.executable, "-c", BLOCKER, str(golden_store_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["OK", "29133002", "False"]


def test_no_store_module_mentions_pyspark():
    import re
    pattern = re.compile(r"^\s*(import pyspark|from pyspark)", re.M)
    offenders = [p.name for p in PACKAGE.glob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
