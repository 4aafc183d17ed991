"""JSON files written atomically and read with one-line errors (graphs, plans, traces)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(doc: Any, path: str | os.PathLike[str]) -> None:
    """Write ``doc`` as compact JSON to ``path`` through a temporary file and a rename, so an
    interrupted write never leaves a half-written file under the final name."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    tmp.replace(target)


def read_json(path: str | os.PathLike[str], error: type[Exception]) -> Any:
    """The parsed contents of ``path``.

    Raises ``error`` with a one-line message naming the file when it is not valid JSON, and
    ``OSError`` when it cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
