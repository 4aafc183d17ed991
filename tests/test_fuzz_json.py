"""The shared JSON reader and writer: every file fails with one line naming it or reads as
finite JSON; nothing that is not JSON (NaN, Infinity) is ever written (Hypothesis)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_mutations import DEEP, DIGITS, OK, mutated_bytes, outcome

from tmsim.errors import TmsimError
from tmsim.jsonio import read_json, write_json_atomic


class BadFile(TmsimError):
    """The error the tests ask the reader and writer to raise."""


def finite(node: Any) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(finite(v) for v in node.values())
    if isinstance(node, list):
        return all(finite(v) for v in node)
    return True


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"name": "\xff\xfe"}', "not UTF-8"),
        (b"[" * DEEP + b"]" * DEEP, "nested too deeply"),
        (b'{"a": ' + b"9" * DIGITS + b"}", "too many digits"),
        (b'{"flops": 1e400}', "out of range"),
        (b"[-1e400]", "out of range"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_read_json_refuses_in_one_line_naming_the_file(
    tmp_path: Path, data: bytes, message: str
) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(data)
    with pytest.raises(BadFile) as info:
        read_json(path, BadFile)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_read_json_reads_big_but_finite_numbers(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text('{"a": 1e308, "b": 123456789012345678901234567890, "c": -0.0}')
    assert read_json(path, BadFile) == {"a": 1e308, "b": 123456789012345678901234567890, "c": 0.0}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"x": [1, math.nan]}])
def test_write_json_atomic_never_writes_nan_or_infinity(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "out.json"
    path.write_text('{"old": 1}')
    with pytest.raises(BadFile) as info:
        write_json_atomic({"value": bad}, path, BadFile)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    assert json.loads(path.read_text()) == {"old": 1}  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary left


def test_write_json_atomic_writes_finite_documents(tmp_path: Path) -> None:
    doc = {"a": [1, 2.5, "x", None, True], "b": {"c": 1e308}}
    write_json_atomic(doc, tmp_path / "out.json")
    assert read_json(tmp_path / "out.json", BadFile) == doc


BASE = {"format": "x", "version": 1, "items": [{"name": "a", "size": 3, "w": 0.5}], "n": None}


@settings(max_examples=100, deadline=None)
@given(data=mutated_bytes(BASE, "json"))
def test_fuzzed_json_reads_finite_or_fails_in_one_line(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("json") / "f.json"
    path.write_bytes(data)
    verdict = outcome(
        lambda: read_json(path, BadFile), lambda d: "" if finite(d) else "non-finite", str(path)
    )
    assert verdict.startswith(("clean", OK)), verdict


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(doc=json_values)
def test_fuzzed_writes_are_strict_json_or_fail_in_one_line(tmp_path_factory: Any, doc: Any) -> None:
    path = tmp_path_factory.mktemp("json") / "out.json"

    def written(_: None) -> str:
        def refuse(name: str) -> None:
            raise ValueError(name)

        try:
            back = json.loads(path.read_text("utf-8"), parse_constant=refuse)
        except ValueError as exc:
            return f"wrote {exc}, which is not JSON"
        return "" if finite(back) else "non-finite"

    verdict = outcome(lambda: write_json_atomic(doc, path, BadFile), written, str(path))
    assert verdict.startswith(("clean", OK)), verdict
