"""Run the exploration notebook on a store and save it with its plots, without Jupyter installed.

    python notebooks/run_notebook.py STORE_DIR [OUTPUT.ipynb]

Uses nbclient and ipykernel (the project's `test` extra, installed by `make venv`); open the output with any
notebook viewer, or run the notebook interactively with `pip install jupyterlab && jupyter lab notebooks/`.
"""

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent / "explore_store.ipynb"


def main(store: str, output: str) -> None:
    os.environ["ROCKETSTORE_STORE"] = str(Path(store).resolve())
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    nbformat.write(nb, output)
    print(f"executed {NOTEBOOK.name} on {store}: {output}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "explore_store.out.ipynb")
