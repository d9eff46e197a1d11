"""The exploration notebook executes top to bottom and renders its plots."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.product

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "explore_store.ipynb"


def test_notebook_runs_and_plots(sample_store, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["ROCKETSTORE_STORE"] = str(sample_store)
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 4
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "3,000 messages" in text and "total lag:" in text


def test_the_documented_command_runs_the_notebook_on_a_bursty_store(tmp_path):
    """notebooks/README.md's command; a store whose traffic comes in two bursts hours apart, one topic active in a
    single minute: every minute between them is plotted (as zeros), so the one-minute topic is drawn too."""
    import subprocess
    import sys

    import pyarrow as pa

    from rocketstore_spark.store import RocketStore

    store = tmp_path / "bursty"
    t0 = 1_717_200_000_000
    times = [t0 + i * 1000 for i in range(50)] + [t0 + 5 * 3_600_000 + i * 1000 for i in range(50)]
    topics = ["steady"] * 99 + ["once"]
    with RocketStore.open_writer(store, commit_log_file_size=1 << 20, consume_queue_file_size=6000,
                          index_hash_slots=4000, index_max_entries=16000) as w:
        w.append(pa.table({"topic": topics, "body": [b"x"] * 100, "tags": ["a"] * 100,
                           "storeTimestamp": pa.array(times, pa.timestamp("ms"))}))
    readme = (NOTEBOOK.parent / "README.md").read_text()
    assert "notebooks/run_notebook.py" in readme
    out = tmp_path / "out.ipynb"
    done = subprocess.run([sys.executable, str(NOTEBOOK.parent / "run_notebook.py"), str(store), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    nb = nbformat.read(out, as_version=4)
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 4
