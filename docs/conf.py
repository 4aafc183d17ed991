"""Sphinx configuration of the documentation site: the guides, the tutorial and the API
reference (``make docs`` builds it into ``out/docs``, warnings as errors)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # tmsim and hwmodels, for the API reference
sys.path.insert(0, str(HERE))  # notebook_page: the tutorial notebook as a page

project = "tmsim"
author = "the tmsim developers"
release = "0.1.0"
extensions = ["sphinx.ext.autodoc", "notebook_page"]
root_doc = "index"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False}
default_role = "any"
html_theme = "alabaster"
html_title = "tmsim"
html_static_path: list[str] = []
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "execute.py", "notebook_page.py"]
