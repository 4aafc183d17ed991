"""Sphinx configuration of the API reference (``make docs`` builds it into ``out/docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

project = "tmsim"
author = "the tmsim developers"
release = "0.1.0"
extensions = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False}
default_role = "any"
html_theme = "alabaster"
html_static_path: list[str] = []
exclude_patterns: list[str] = []
