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
