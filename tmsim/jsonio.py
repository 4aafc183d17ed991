"""JSON files written atomically and read with one-line errors (graphs, plans, traces).

Both directions keep to strict JSON (RFC 8259), which Python's :mod:`json` does not by
default: the reader refuses the ``NaN``, ``Infinity`` and ``-Infinity`` literals, numbers
beyond the range of a float (``1e400``), integers of more than :data:`MAX_INT_DIGITS` digits,
nesting deeper than the parser can follow, and bytes that are not UTF-8; the writer refuses
NaN and infinities instead of writing them. Every refusal is the caller's error type with a
one-line message naming the file. What the numbers may be beyond that (sizes under a bound,
say) is the business of each file's schema.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

#: Most digits of an integer literal the reader accepts (Python's default conversion limit).
MAX_INT_DIGITS = 4300


class _Refused(Exception):
    """A literal strict JSON does not allow; the message says which."""


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer with too many digits ({digits}; at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:20]}..."
        raise _Refused(f"number {shown} is out of range (beyond a 64-bit float)")
    return value


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (numbers must be finite)")


def write_json_atomic(
    doc: Any, path: str | os.PathLike[str], error: type[Exception] = ValueError
) -> None:
    """Write ``doc`` as compact, strict JSON to ``path`` through a temporary file and a rename,
    so an interrupted write never leaves a half-written file under the final name.

    Raises ``error`` with a one-line message naming ``path`` if ``doc`` holds NaN, an infinity
    or an integer too long to print (nothing is written then, and an existing file keeps its
    contents); ``TypeError`` if it holds a value JSON has no type for; ``OSError`` if the file
    cannot be written.
    """
    target = Path(path)
    try:
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise error(f"{target}: cannot be written as JSON ({exc})") from None
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)


def read_json(path: str | os.PathLike[str], error: type[Exception]) -> Any:
    """The parsed contents of ``path``, strict JSON (see the module documentation).

    Raises ``error`` with a one-line message naming the file when it is not UTF-8, not valid
    JSON, nested too deeply, or holds a literal strict JSON refuses; ``OSError`` when it
    cannot be read.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except _Refused as exc:
        raise error(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise error(f"{path}: not valid JSON: arrays or objects nested too deeply") from None
