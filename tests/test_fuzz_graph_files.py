"""Fuzzing the graph readers: every graph file and zoo batch either loads as a valid graph or
fails with one line (Hypothesis).

A valid graph here: it round-trips through its document; its sizes and FLOPs are integers
(not bools) under the documented bound (2**62 in all, :data:`MAX_GRAPH_BYTES`); its live bytes
equal an exact computation in Python integers (no 64-bit wrap); the file said version 1 (the
integer, not ``true``); and a cost model on a preset gives finite kernel and move times.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_mutations import OK, Raw, dumps, mutated_bytes, outcome

from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.workload.files import graph_from_dict, graph_to_dict, load_graph
from tmsim.workload.graph import Graph
from tmsim.workload.layers import Network
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import training_graph_of

#: The documented bound on a graph's bytes in all and on its FLOPs in all.
MAX_GRAPH_BYTES = 2**62
MAX_GRAPH_FLOPS = 2**62
PLATFORM = load_preset("cascadelake-optane")


def small_graph() -> Graph:
    """A real training step small enough to fuzz fast: conv, batch norm, ReLU, pool, linear."""
    net = Network("tiny", batch=2, image_hw=(8, 8))
    x = net.conv_bn_relu(net.input, 4, 3, padding=1)
    x = net.linear(net.max_pool(x, 2, 2), 10)
    net.softmax_cross_entropy(x)
    return training_graph(net.build())


BASE = graph_to_dict(small_graph())


def exact_live_bytes(g: Graph) -> list[int]:
    """Live bytes at every kernel in Python integers (difference array, no wrap)."""
    delta = [0] * (len(g.kernels) + 1)
    for t, first, last in zip(g.tensors, g.live_first, g.live_last, strict=True):
        delta[int(first)] += t.size_bytes
        delta[int(last) + 1] -= t.size_bytes
    out, running = [], 0
    for d in delta[:-1]:
        running += d
        out.append(running)
    return out


def graph_problem(g: Graph) -> str:
    """Why ``g`` is not a valid graph ("" if it is)."""
    sizes = [t.size_bytes for t in g.tensors]
    flops = [k.flops for k in g.kernels]
    if any(type(v) is not int for v in [*sizes, *flops]):
        return "a size or FLOP count is not an int"
    if sum(sizes) >= MAX_GRAPH_BYTES or sum(flops) >= MAX_GRAPH_FLOPS:
        return f"{sum(sizes)} bytes / {sum(flops)} FLOPs accepted, over the bound"
    if [int(v) for v in g.live_bytes] != exact_live_bytes(g):
        return "live bytes wrapped around"
    if graph_from_dict(json.loads(json.dumps(graph_to_dict(g), allow_nan=False))) != g:
        return "does not round-trip"
    cost = CostModel(g, PLATFORM)
    times = cost.kernel_times_s(np.zeros(cost.op_tensor.size, dtype=np.int64))
    moves = cost.move_s(0, 1, MoveMode.SYNC)
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(moves))):
        return "a kernel or move time is not finite"
    return ""


def file_problem(data: bytes, g: Graph) -> str:
    version = json.loads(data.decode("utf-8"))["version"]
    if type(version) is not int:
        return f"version {version!r} accepted"
    return graph_problem(g)


@st.composite
def huge_numbers(draw: st.DrawFn) -> bytes:
    """A tensor without its shape and with a huge size, or a kernel with huge FLOPs."""
    doc: dict[str, Any] = copy.deepcopy(BASE)
    big = st.sampled_from(
        (2**40, 2**61, 2**61 + 8, 2**62, 2**63 - 8, 2**63, 2**64, 10**30, Raw("9" * 5000))
    )
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            t = draw(st.sampled_from(doc["tensors"]))
            t.pop("shape", None)
            t["dtype"] = "uint8"
            t["size_bytes"] = draw(big)
        else:
            draw(st.sampled_from(doc["kernels"]))["flops"] = draw(big)
    return dumps(doc, "json").encode()


graph_files = st.one_of(mutated_bytes(BASE, "json"), huge_numbers())


def check_graph_file(data: bytes, folder: Path) -> str:
    path = folder / "g.json"
    path.write_bytes(data)
    return outcome(lambda: load_graph(path), lambda g: file_problem(data, g), str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_graphs")


@settings(max_examples=150, deadline=None)
@given(data=graph_files)
def test_fuzzed_graph_files_load_valid_or_fail_in_one_line(data: bytes, folder: Path) -> None:
    verdict = check_graph_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict


batches = st.one_of(
    st.integers(-3, 64),
    st.sampled_from((True, 2**20, 2**31, 2**40, 10**12, 10**20, 10**400)),
    st.integers(2**20, 10**30),
)


def check_zoo(model: str, batch: Any) -> str:
    return outcome(lambda: training_graph_of(model, batch), graph_problem)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(("vgg19", "resnet50")), batch=batches)
def test_zoo_batches_build_valid_graphs_or_fail_in_one_line(model: str, batch: Any) -> None:
    verdict = check_zoo(model, batch)
    assert verdict.startswith(("clean", OK)), verdict
