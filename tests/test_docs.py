"""The API reference builds from the docstrings with no warning (what ``make docs`` runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")

ROOT = Path(__file__).resolve().parent.parent


def test_the_reference_builds_without_warnings(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-E", "-b", "html"]
    out = subprocess.run(
        [*cmd, str(ROOT / "docs" / "api"), str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "runs.html").read_text(encoding="utf-8")
    # every public function of the module is documented, its example shown as code
    for name in ("tmsim.api.runs.plan", "tmsim.api.runs.simulate", "tmsim.api.runs.Run"):
        assert f'id="{name}"' in page
    assert "doctest" in page
