"""Mutations of valid input documents for the fuzzers of the file readers (Hypothesis).

``test_fuzz_graph_files``, ``test_fuzz_platform_files`` and ``test_fuzz_sweep_specs`` start
from a real document (a graph, a preset, the example sweep), apply a few mutations drawn here,
write it as JSON or TOML and feed it to the reader. A mutation replaces a field with a hostile
value (wrong type, bool, negative, zero, huge or 5000-digit integer, NaN or infinite float),
deletes a field, adds an unknown one, scales a number by a huge or tiny factor, nudges an
integer, sets a number to an extreme of its own type, nests arrays deeply, or corrupts the
bytes of the file. :func:`outcome` classifies
what the reader did, so the fuzzers and a counting script share one verdict.

The tests at the end check that the mutations produce what they claim.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from hwmodels.errors import HardwareModelError
from tmsim.errors import TmsimError

Path_ = tuple[str | int, ...]

#: Depth of the deeply nested arrays (deeper than any recursion limit).
DEEP = 100_000
#: Digits of the huge integer literals (past Python's 4300-digit conversion limit).
DIGITS = 5000


@dataclass(frozen=True)
class Raw:
    """A value written into the document text as it is (a literal no serializer writes)."""

    text: str


#: Raw literals that both JSON and TOML readers must survive.
RAW_COMMON = (
    Raw("9" * DIGITS),
    Raw("-" + "9" * DIGITS),
    Raw("1e400"),
    Raw("-1e400"),
    Raw("[" * DEEP + "]" * DEEP),
)
RAW_JSON = (*RAW_COMMON, Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("{" + '"a":{' * DEEP))
RAW_TOML = (*RAW_COMMON, Raw("nan"), Raw("inf"), Raw("-inf"))

_INTS = (0, -1, 1, 3, 48, 2**31, 2**53 + 1, 2**61, 2**62, 2**63 - 1, 2**63, 2**64, 10**30, 10**400)
_FLOATS = (
    0.0,
    -0.0,
    -1.0,
    0.5,
    5e-324,
    1e-300,
    1e300,
    1.7e308,
    math.nan,
    math.inf,
    -math.inf,
)
_OTHER = ("", "x", "a\nb", "fp32", [], [1, 2], ["x"], {}, {"a": 1})


def hostile(dialect: str) -> st.SearchStrategy[Any]:
    """Values of the wrong type or out of range; ``dialect`` is ``json`` or ``toml``."""
    raws = RAW_JSON if dialect == "json" else RAW_TOML
    extra: tuple[Any, ...] = (None,) if dialect == "json" else ()
    return st.one_of(
        st.sampled_from((True, False)),
        st.sampled_from(_INTS),
        st.sampled_from(_FLOATS),
        st.sampled_from((*_OTHER, *extra)),
        st.sampled_from(raws),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
    )


def paths(doc: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every node of ``doc`` below the root, parents before children."""
    out: list[Path_] = []
    if isinstance(doc, dict):
        items: list[tuple[str | int, Any]] = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    else:
        return out
    for key, value in items:
        out.append((*prefix, key))
        out.extend(paths(value, (*prefix, key)))
    return out


def get(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@st.composite
def mutate_once(draw: st.DrawFn, doc: Any, dialect: str) -> None:
    """Apply one mutation to ``doc`` in place."""
    nodes = paths(doc)
    if not nodes:
        return
    op = draw(st.sampled_from(("replace", "replace", "delete", "add", "scale", "nudge", "extreme")))
    if op in ("scale", "nudge", "extreme"):
        numbers = [p for p in nodes if _number(get(doc, p))]
        if numbers:
            path = draw(st.sampled_from(numbers))
            old = get(doc, path)
            if op == "extreme":  # same type, edge of the range: reaches checks past the types
                pool = _INTS if isinstance(old, int) else (*_FLOATS, 1e-12, 1e21, 1e22, 3600.0)
                new = draw(st.sampled_from(pool))
            elif op == "scale":
                factor = draw(st.sampled_from((-1, 0, 2**10, 2**32, 2**62, 10**30, 1e-300, 1e300)))
                new = old * factor
            elif isinstance(old, int):
                new = old + draw(st.sampled_from((-1, 1, old // 2, -old, old * 2**40)))
            else:
                new = draw(st.sampled_from((-old, old * 1e-320, old * 1e308, old / 3)))
            get(doc, path[:-1])[path[-1]] = new
            return
        op = "replace"
    path = draw(st.sampled_from(nodes))
    parent = get(doc, path[:-1])
    if op == "replace":  # a copy: a later mutation must not change the strategy's constants
        parent[path[-1]] = copy.deepcopy(draw(hostile(dialect)))
    elif op == "delete":
        del parent[path[-1]]
    else:
        tables = [p for p in [(), *nodes] if isinstance(get(doc, p), dict)]
        table = get(doc, draw(st.sampled_from(tables)))
        key = draw(st.sampled_from(("extra", "name_", "size_byte", "_", "x" * 40)))
        table[key] = copy.deepcopy(draw(hostile(dialect)))


def dumps(doc: Any, dialect: str) -> str:
    """``doc`` as JSON or TOML text, with every :class:`Raw` written as its text."""
    raws: list[str] = []

    def swap(node: Any) -> Any:
        if isinstance(node, Raw):
            raws.append(node.text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    plain = swap(doc)
    if dialect == "json":
        text = json.dumps(plain)
    else:
        if not isinstance(plain, dict):
            plain = {"value": plain}
        text = tomli_w.dumps(plain)
    for i, raw in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', raw)
    return text


@st.composite
def mutated_bytes(draw: st.DrawFn, base: Any, dialect: str, max_mutations: int = 3) -> bytes:
    """The bytes of a file: ``base`` with one to ``max_mutations`` mutations, sometimes also
    corrupted at the byte level, or (rarely) random bytes."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=300))
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        draw(mutate_once(doc, dialect))
    data = dumps(doc, dialect).encode("utf-8", errors="surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from((b"\xff", b"\xc3\x28", b"\x00", b"\xed\xa0\x80")))
        data = data[:at] + junk + data[at:]
    return data


# ---------------------------------------------------------------------------- verdicts
CLEAN = "clean error"
OK = "valid result"
ALLOWED: tuple[type[BaseException], ...] = (TmsimError, HardwareModelError)


def outcome(run: Callable[[], Any], check: Callable[[Any], str], names: str | None = None) -> str:
    """What ``run()`` did: :data:`CLEAN` (a project error with a one-line message, naming
    ``names`` if given), :data:`OK` (``check(result)`` returned ``""``), ``silent: <why>``
    (``check`` found the result wrong) or ``traceback: <type>`` (anything else raised, or a
    project error whose message is not one line or does not name the input). ``check`` may
    use the result (build a cost model from a loaded graph, say): a project error it raises
    is a clean refusal too (one line, naming nothing in particular)."""
    try:
        result = run()
    except Exception as exc:
        return _verdict(exc, names)
    try:
        why = check(result)
    except Exception as exc:
        return _verdict(exc, None)
    return f"silent: {why}" if why else OK


def _verdict(exc: Exception, names: str | None) -> str:
    if not isinstance(exc, ALLOWED):  # every other type is what the fuzzers hunt
        return f"traceback: {type(exc).__name__}: {str(exc)[:80]}"
    message = str(exc)
    if not message or "\n" in message or "\r" in message:
        return f"traceback: {type(exc).__name__} with a message of several lines"
    if names is not None and names not in message:
        return f"traceback: {type(exc).__name__} not naming {names}: {message[:80]}"
    return CLEAN


# ---------------------------------------------------------------------------- self-tests
def test_raw_literals_land_in_the_text() -> None:
    doc = {"a": Raw("9" * DIGITS), "b": [Raw("NaN")]}
    text = dumps(doc, "json")
    assert text == '{"a": ' + "9" * DIGITS + ', "b": [NaN]}'
    assert ("9" * DIGITS) in dumps({"a": Raw("9" * DIGITS)}, "toml")


def test_paths_cover_every_node() -> None:
    doc = {"a": [1, {"b": 2}], "c": 3}
    assert paths(doc) == [("a",), ("a", 0), ("a", 1), ("a", 1, "b"), ("c",)]


@given(mutated_bytes({"x": [1, 2.5, "s"], "y": {"z": 64}}, "toml"))
def test_mutated_documents_are_bytes(data: bytes) -> None:
    assert isinstance(data, bytes)


def test_outcome_tells_the_kinds_apart() -> None:
    def boom() -> None:
        raise KeyError("k")

    def clean() -> None:
        raise TmsimError("f.json: bad")

    def two_lines() -> None:
        raise TmsimError("a\nb")

    assert outcome(clean, lambda r: "", "f.json") == CLEAN
    assert outcome(clean, lambda r: "", "g.json").startswith("traceback")
    assert outcome(two_lines, lambda r: "").startswith("traceback")
    assert outcome(boom, lambda r: "").startswith("traceback: KeyError")
    assert outcome(lambda: 1, lambda r: "") == OK
    assert outcome(lambda: 1, lambda r: "wrong") == "silent: wrong"
