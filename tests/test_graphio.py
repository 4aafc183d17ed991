"""Graph files: exact round trip of zoo graphs and one-line errors for every kind of bad file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tmsim.errors import GraphFileError
from tmsim.workload.files import graph_to_dict, load_graph, save_graph
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of


def test_zoo_graph_round_trip(tmp_path: Path) -> None:
    g = training_graph_of("inception_v4", 4)
    save_graph(g, tmp_path / "g.json")
    back = load_graph(tmp_path / "g.json")
    assert back == g
    assert back.peak_live_bytes == g.peak_live_bytes
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed away


def _write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _doc(diamond: Graph) -> dict[str, Any]:
    return graph_to_dict(diamond)


def _set(doc: dict[str, Any], where: str, index: int, key: str, value: Any) -> dict[str, Any]:
    doc[where][index][key] = value
    return doc


def _drop(doc: dict[str, Any], where: str, index: int, key: str) -> dict[str, Any]:
    del doc[where][index][key]
    return doc


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: "{not json", "not valid JSON"),
        (lambda d: [1, 2], "top level must be a JSON object"),
        (lambda d: {**d, "format": "onnx"}, "field 'format' must be 'tmsim-graph'"),
        (lambda d: {**d, "version": 7}, "field 'version' is 7"),
        (lambda d: {**d, "extra": 1}, "unknown field 'extra'"),
        (lambda d: {**d, "tensors": {}}, "field 'tensors' must be a list"),
        (
            lambda d: _drop(d, "tensors", 1, "size_bytes"),
            "tensors[1] ('b'): missing field 'size_bytes'",
        ),
        (
            lambda d: _set(d, "tensors", 1, "size_bytes", "16"),
            "tensors[1] ('b'): field 'size_bytes' must be int, got str",
        ),
        (
            lambda d: _set(d, "tensors", 1, "size_bytes", True),
            "field 'size_bytes' must be int, got bool",
        ),
        (
            lambda d: _set(d, "tensors", 1, "size_bytes", -3),
            "tensor 'b': size_bytes must be a positive integer",
        ),
        (
            lambda d: _set(d, "tensors", 2, "role", "activations"),
            "tensors[2] ('c'): unknown role 'activations'",
        ),
        (
            lambda d: _set(d, "tensors", 2, "colour", "red"),
            "tensors[2] ('c'): unknown field 'colour'",
        ),
        (lambda d: _set(d, "tensors", 2, "shape", [2, "x"]), "field 'shape' must list integers"),
        (
            lambda d: _set(d, "kernels", 0, "phase", "fwd"),
            "kernels[0] ('split'): unknown phase 'fwd'",
        ),
        (
            lambda d: _set(d, "kernels", 3, "inputs", ["c", 4]),
            "kernels[3] ('join'): field 'inputs' must list strings",
        ),
        (
            lambda d: _set(d, "kernels", 1, "inputs", ["e"]),
            "kernel 'left': reads tensor 'e' before any kernel produces it",
        ),
        (
            lambda d: _set(d, "kernels", 1, "inputs", ["zz"]),
            "kernel 'left': operand 'zz' is not a tensor",
        ),
        # true and 1.0 equal 1 in Python, not in the schema
        (lambda d: {**d, "version": True}, "field 'version' is True; this tmsim reads version 1"),
        (lambda d: {**d, "version": 1.0}, "field 'version' is 1.0"),
        # numbers past the bound of 2**62, and literals strict JSON has not
        (
            lambda d: _set(d, "kernels", 0, "flops", 10**400),
            "kernel 'split': flops about 2**1328 is not below the bound of 2**62 FLOPs",
        ),
        (
            lambda d: _set(d, "tensors", 1, "size_bytes", 2**64),
            "tensor 'b': size_bytes 18446744073709551616 is not below the bound of 2**62",
        ),
        (
            lambda d: json.dumps(d).replace('"size_bytes": 16', '"size_bytes": ' + "9" * 5000),
            "not valid JSON: an integer with too many digits (5000; at most 4300)",
        ),
        (
            lambda d: json.dumps(d).replace('"size_bytes": 16', '"size_bytes": 1e400'),
            "not valid JSON: number 1e400 is out of range",
        ),
        (
            lambda d: json.dumps(d).replace('"size_bytes": 16', '"size_bytes": NaN'),
            "not valid JSON: NaN is not JSON",
        ),
        (lambda d: "[" * 100_000 + "]" * 100_000, "not valid JSON: arrays or objects nested"),
    ],
)
def test_bad_files_get_one_line_errors(
    tmp_path: Path, diamond: Graph, mutate: Any, message: str
) -> None:
    path = _write(tmp_path, mutate(_doc(diamond)))
    with pytest.raises(GraphFileError) as info:
        load_graph(path)
    text = str(info.value)
    assert text.startswith(str(path))
    assert message in text
    assert "\n" not in text


def test_a_file_that_is_not_utf8_fails_in_one_line(tmp_path: Path, diamond: Graph) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(
        json.dumps(_doc(diamond))
        .replace("split", "spl\udcffit")
        .encode("utf-8", errors="surrogateescape")
    )
    with pytest.raises(GraphFileError, match=r"g.json: not UTF-8 text \(byte 0xff at offset"):
        load_graph(path)
