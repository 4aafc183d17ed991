"""Tiny training steps for the planners' tests, hand-checkable and free of any planner code
(the exhaustive-search oracle's tests use them too)."""

from __future__ import annotations

from hypothesis import strategies as st

from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

MB = 1_000_000
F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE


def tiny_step(scale: int = 1) -> Graph:
    """Input, a weight updated in place, a long-lived activation, a gradient."""
    tensors = [
        Tensor("x", 40 * MB * scale, Role.INPUT),
        Tensor("w", 20 * MB * scale, Role.WEIGHT),
        Tensor("a", 80 * MB * scale, Role.ACTIVATION),
        Tensor("b", 60 * MB * scale, Role.ACTIVATION),
        Tensor("g", 20 * MB * scale, Role.GRADIENT),
    ]
    kernels = [
        Kernel("f1", "conv2d", ("x", "w"), ("a",), F, 4 * 10**9 * scale),
        Kernel("f2", "relu", ("a",), ("b",), F, 10**6),
        Kernel("f3", "add", ("b", "a"), ("g",), B, 10**6),
        Kernel("sgd", "sgd_momentum", ("g",), (), U, 10**6, updates=("w",)),
    ]
    return Graph("tiny", tensors, kernels)


def spill_step(conv_flops: int = 10**11) -> Graph:
    """An activation ``a`` made first and used last, with a 200 MB tensor ``c`` between
    whose kernels leave no room for it: on a 250 MB device ``a`` goes to the host and back.
    The kernels either side of ``c`` are long convolutions the copies can hide behind."""
    tensors = [
        Tensor("x", 10 * MB, Role.INPUT),
        Tensor("a", 100 * MB, Role.ACTIVATION),
        Tensor("b", 10 * MB, Role.ACTIVATION),
        Tensor("c", 200 * MB, Role.ACTIVATION),
        Tensor("d", 10 * MB, Role.ACTIVATION),
        Tensor("e", 10 * MB, Role.ACTIVATION),
        Tensor("f", 10 * MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("make_a", "relu", ("x",), ("a",), F, 10**6),
        Kernel("conv1", "conv2d", ("x",), ("b",), F, conv_flops),
        Kernel("make_c", "relu", ("b",), ("c",), F, 10**6),
        Kernel("use_c", "add", ("c",), ("d",), F, 10**6),
        Kernel("conv2", "conv2d", ("d",), ("e",), F, conv_flops),
        Kernel("use_a", "add", ("a", "e"), ("f",), F, 10**6),
    ]
    return Graph("spill", tensors, kernels)


tiny_graphs = st.builds(
    lambda sizes, flops, extra: random_graph(sizes, flops, extra),
    st.lists(st.integers(1, 60), min_size=4, max_size=4),
    st.lists(st.integers(0, 5 * 10**9), min_size=3, max_size=3),
    st.booleans(),
)


def random_graph(sizes: list[int], flops: list[int], extra: bool) -> Graph:
    tensors = [
        Tensor("w", sizes[0] * MB, Role.WEIGHT),
        Tensor("a", sizes[1] * MB, Role.ACTIVATION),
        Tensor("b", sizes[2] * MB, Role.ACTIVATION),
        Tensor("c", sizes[3] * MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "conv2d", ("w",), ("a",), F, flops[0]),
        Kernel("k1", "relu", ("a",), ("b",), F, flops[1]),
        Kernel("k2", "linear", ("b", "a") if extra else ("b",), ("c",), F, flops[2]),
        Kernel("k3", "sgd_momentum", ("c",), (), U, 10, updates=("w",)),
    ]
    return Graph("random", tensors, kernels)
