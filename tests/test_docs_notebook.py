"""The site's notebook reader (``docs/notebook_page.py``) turns a notebook into a page: the
markdown a notebook of ours uses, code cells and their outputs; what it does not convert
fails a build with ``-W`` instead of vanishing."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sphinx")

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: A 1x1 PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4"
        "c00000000049454e44ae426082"
    )
).decode()


def markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text: str, *outputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "metadata": {},
        "execution_count": 1,
        "source": text,
        "outputs": list(outputs),
    }


def build(tmp_path: Path, cells: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """Build a site of one notebook page with the site's reader, warnings as errors."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS)!r})\n"
        "extensions = ['notebook_page']\nroot_doc = 'page'\n",
        encoding="utf-8",
    )
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    (src / "page.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    cmd = [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-E", "-b", "html"]
    return subprocess.run([*cmd, str(src), str(tmp_path / "out")], capture_output=True, text=True)


def test_markdown_code_and_outputs_become_a_page(tmp_path: Path) -> None:
    cells = [
        markdown("# A title\n\nA paragraph with `inline code`, a [link](https://example.org),\n"),
        markdown(
            "**bold**, *italic*, _also italic_ and snake_case_words kept.\n\n"
            "## A section\n\n- one item\n- two `items`\n  continued\n\n1. first\n2. second\n\n"
            "```python\nx = 1\n```"
        ),
        markdown("A line before a list\n- straight after it\n\n### C# notes ##"),
        code(
            "print('hello')\nvalue",
            {"output_type": "stream", "name": "stdout", "text": ["hello\n"]},
            {"output_type": "execute_result", "data": {"text/plain": "42", "text/html": "<b>"}},
            {"output_type": "display_data", "data": {"image/png": PIXEL, "text/plain": "<Fig>"}},
        ),
    ]
    out = build(tmp_path, cells)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "out" / "page.html").read_text(encoding="utf-8")
    assert "<h1>A title" in page and 'id="a-section"' in page
    assert '<span class="pre">inline</span>' in page
    assert '<a class="reference external" href="https://example.org">link</a>' in page
    assert "<strong>bold</strong>" in page and "<em>italic</em>" in page
    assert "<em>also italic</em>" in page and "snake_case_words" in page
    assert page.count("<li><p>") == 5 and "<ol" in page and "continued" in page
    assert "<li><p>straight after it</p></li>" in page and "<h3>C# notes" in page
    assert "hello" in page and "42" in page and "&lt;b&gt;" not in page
    assert '<span class="nb">print</span>' in page  # the code cell, highlighted as Python
    image = tmp_path / "out" / "_images" / "page-cell3-3.png"
    assert image.read_bytes() == base64.b64decode(PIXEL)


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        (markdown("| a | b |\n|---|---|\n| 1 | 2 |"), "a table"),
        (markdown("> quoted"), "a block quote"),
        (markdown("<div>raw</div>"), "raw HTML"),
        (markdown("- a\n  - nested"), "a nested list"),
        (markdown("Text with ![a picture](x.png)."), "an inline image"),
        (
            code("1", {"output_type": "error", "ename": "E", "evalue": "v", "traceback": []}),
            "error",
        ),
        (code("1", {"output_type": "display_data", "data": {"text/html": "<b>"}}), "neither"),
    ],
)
def test_what_is_not_converted_fails_the_build(
    tmp_path: Path, cell: dict[str, Any], says: str
) -> None:
    out = build(tmp_path, [markdown("# Title"), cell])
    assert out.returncode != 0
    assert says in out.stderr
