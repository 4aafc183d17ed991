"""Run a notebook from top to bottom in a fresh kernel and keep its outputs.

``python docs/execute.py docs/tutorial.ipynb`` (``make notebook``) runs the tutorial in its
own folder and writes it back with the outputs of this run; a cell that raises stops the run
with the cell's error, and the file is left as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

#: Seconds one cell may run before the run is stopped.
CELL_TIMEOUT_S = 600


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` with the outputs of a fresh run in ``path``'s folder."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return notebook


def main() -> None:
    for name in sys.argv[1:]:
        path = Path(name)
        notebook = execute(path)
        tmp = path.with_name(f".{path.name}.tmp")
        nbformat.write(notebook, tmp)
        tmp.replace(path)
        print(f"ran {path}")


if __name__ == "__main__":
    main()
