"""The tutorial notebook runs from top to bottom in a fresh kernel, as a reader would run it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
from execute import execute  # noqa: E402


@pytest.mark.slow
def test_the_tutorial_runs_and_shows_what_it_says(tmp_path: Path) -> None:
    path = tmp_path / "tutorial.ipynb"
    shutil.copy(ROOT / "docs" / "tutorial.ipynb", path)
    notebook = execute(path)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert not errors, errors
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    for title in ("Platform cascadelake-optane", "Plan milp-sync", "Run of plan milp-sync"):
        assert f"<caption>{title}</caption>" in html
    text = "".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "async-aware" in text and "2lm" in text  # the comparison of every strategy
    pictures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pictures) == 2  # the timeline and the paper figure
    assert (tmp_path / "ratio-sweep.pdf").stat().st_size > 0
