"""The format layer must work where pyspark is not installed."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark"
STORE = PACKAGE / "store"

# Runs in a fresh interpreter: any import of pyspark / py4j (even lazily, inside a function) fails.
BLOCKED_READ = r"""
import importlib.abc, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pyspark', 'py4j'):
            raise ImportError('pyspark is blocked for this test: ' + name)

sys.meta_path.insert(0, Block())
import rocketstore_spark.store as store

with store.RocketStore.open(sys.argv[1]) as s:
    rows = sum(b.num_rows for b in s.scan_raw())           # every column, compressed bodies included
    queued = sum(b.num_rows for t in s.topics() for q in s.queue_ids(t)
                 for b in s.read_queue(t, q, tags='TagA || TagB', columns=['tags']))
    found = s.query_by_key('TopicTest', 'order-42').num_rows
    status = s.get_message('TopicTest', 0, 0).status
    lower = s.offset_by_time('TopicTest', 0, 0, 'lower')
    print(json.dumps({'max': s.max_phy_offset(), 'mode': s.recovery.mode, 'rows': rows, 'queued': queued,
                      'found': found, 'status': status, 'lower': lower,
                      'loaded': sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))}))
"""


def test_store_imports_and_reads_with_pyspark_blocked(golden_store_path, golden_view, manifest):
    out = subprocess.run([sys.executable, "-c", BLOCKED_READ, str(golden_store_path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    expected_queued = sum(1 for m in manifest if m["inConsumeQueue"] and m["tags"] in ("TagA", "TagB"))
    assert got == {"max": golden_view["summary"]["afterLoadMaxPhyOffset"], "mode": "normal", "rows": 20003,
                   "queued": expected_queued, "found": 64, "status": "FOUND", "lower": 0, "loaded": []}


def test_the_blocker_really_blocks():
    """Guard against a vacuous pass: the same blocker makes ``import pyspark`` fail."""
    code = BLOCKED_READ.split("import rocketstore_spark.store")[0] + "import pyspark\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "pyspark is blocked" in out.stderr


def imported_roots(path: Path) -> set:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_store_module_imports_pyspark():
    modules = sorted(STORE.rglob("*.py")) + [PACKAGE / "errors.py", PACKAGE / "__init__.py"]
    assert len(modules) > 10
    statement = re.compile(r"^\s*(import|from)\s+(pyspark|py4j)\b", re.M)  # also inside functions
    offenders = [str(p) for p in modules if statement.search(p.read_text(encoding="utf-8"))
                 or imported_roots(p) & {"pyspark", "py4j"}]
    assert offenders == []
