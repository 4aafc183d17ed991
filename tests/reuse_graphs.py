"""Graphs for the memory-reuse tests (hand-checkable, closed-form chains, random steps) and an
independent check of a memory plan: the step replayed on the addresses it gives."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from tmsim.layout.reuse import InPlace
from tmsim.workload.graph import PERSISTENT_ROLES, Graph, Kernel, Phase, Role, Tensor

F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE


def lecture_graph(big: int = 400, small: int = 100, var: int = 40) -> Graph:
    """The example of the lecture's "Memory Planning Algorithm" (CSE599G1, lecture 7; MXNet's
    documentation draws the same graph): ``B = sigmoid(A)``, ``C = sigmoid(B)``,
    ``F = pool(B)``, ``E = pool(C)``, ``G = E * F``, run in that order. ``A`` is a variable the
    planner does not own (a weight here: it keeps its own buffer and is never overwritten);
    the sigmoids are ``relu`` kernels and the product an ``add`` (element-wise ops of the
    in-place table), the pools ``max_pool`` (not in place: the output is smaller)."""
    tensors = [
        Tensor("A", var, Role.WEIGHT),
        Tensor("B", big, Role.ACTIVATION),
        Tensor("C", big, Role.ACTIVATION),
        Tensor("F", small, Role.ACTIVATION),
        Tensor("E", small, Role.ACTIVATION),
        Tensor("G", small, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("b", "relu", ("A",), ("B",), F),
        Kernel("c", "relu", ("B",), ("C",), F),
        Kernel("f", "max_pool", ("B",), ("F",), F),
        Kernel("e", "max_pool", ("C",), ("E",), F),
        Kernel("g", "add", ("E", "F"), ("G",), F),
    ]
    return Graph("lecture", tensors, kernels)


def forward_chain(n: int, op: str, size: int, weight: int = 0) -> Graph:
    """``x0 -> x1 -> ... -> xn``, each step one kernel ``op``; ``x0`` an input; every tensor
    ``size`` bytes; a weight of ``weight`` bytes read by the first kernel if ``weight > 0``."""
    tensors = [
        Tensor(f"x{i}", size, Role.INPUT if i == 0 else Role.ACTIVATION) for i in range(n + 1)
    ]
    extra: tuple[str, ...] = ()
    if weight:
        tensors.append(Tensor("w", weight, Role.WEIGHT))
        extra = ("w",)
    kernels = [
        Kernel(f"k{i}", op, (f"x{i - 1}", *(extra if i == 1 else ())), (f"x{i}",), F)
        for i in range(1, n + 1)
    ]
    return Graph(f"{op}-chain", tensors, kernels)


def training_chain(n: int, size: int, weight: int) -> Graph:
    """A training step of ``n`` ReLUs: forward ``x_i = relu(x_{i-1})``; a loss gradient
    ``d_n = loss(x_n, w)`` (an op the in-place table does not name, reading a weight of
    ``weight`` bytes); backward ``d_{i-1} = relu_backward(d_i, x_i)`` for ``i = n .. 1``.
    Every activation and gradient is ``size`` bytes; ``x0`` is the input."""
    tensors = [Tensor("w", weight, Role.WEIGHT)]
    tensors += [
        Tensor(f"x{i}", size, Role.INPUT if i == 0 else Role.ACTIVATION) for i in range(n + 1)
    ]
    tensors += [Tensor(f"d{i}", size, Role.GRADIENT) for i in range(n + 1)]
    kernels = [Kernel(f"relu{i}", "relu", (f"x{i - 1}",), (f"x{i}",), F) for i in range(1, n + 1)]
    kernels.append(Kernel("loss", "mse_backward", (f"x{n}", "w"), (f"d{n}",), B))
    kernels += [
        Kernel(f"relu{i}_bwd", "relu_backward", (f"d{i}", f"x{i}"), (f"d{i - 1}",), B)
        for i in range(n, 0, -1)
    ]
    return Graph("training-chain", tensors, kernels)


#: Kernels a random step is made of: (op, phase, inputs, outputs); the ops of the in-place
#: table with the arity the zoo gives them, and two ops that are never in place.
_OPS: tuple[tuple[str, Phase, int, int], ...] = (
    ("relu", F, 1, 1),
    ("add", F, 2, 1),
    ("batch_norm", F, 1, 3),
    ("softmax_cross_entropy", F, 2, 2),
    ("softmax_cross_entropy", B, 2, 1),
    ("relu_backward", B, 2, 1),
    ("batch_norm_backward", B, 3, 1),
    ("accumulate", B, 2, 1),
    ("conv2d", F, 2, 1),
    ("max_pool", F, 1, 1),
    ("relu", B, 1, 1),  # a phase the table does not list for relu
)


@st.composite
def random_steps(draw: st.DrawFn, max_kernels: int = 10) -> Graph:
    """A valid random step: one or two inputs, up to two weights, then kernels of
    :data:`_OPS` reading any tensor that exists (sizes from a few values, so that sizes
    often agree and in-place pairs form; now and then fp16), and an update of a weight."""
    sizes = st.sampled_from([8, 8, 16, 24, 64])
    dtypes = st.sampled_from(["fp32", "fp32", "fp32", "fp16"])
    tensors: list[Tensor] = []
    for i in range(draw(st.integers(1, 2))):
        tensors.append(Tensor(f"in{i}", draw(sizes), Role.INPUT, draw(dtypes)))
    for i in range(draw(st.integers(0, 2))):
        tensors.append(Tensor(f"w{i}", draw(sizes), Role.WEIGHT, draw(dtypes)))
    kernels: list[Kernel] = []
    for k in range(draw(st.integers(1, max_kernels))):
        op, phase, n_in, n_out = draw(st.sampled_from(_OPS))
        names = [t.name for t in tensors]
        inputs = tuple(draw(st.sampled_from(names)) for _ in range(n_in))
        outputs = []
        for j in range(n_out):
            role = Role.GRADIENT if phase is B else Role.ACTIVATION
            tensors.append(Tensor(f"t{k}.{j}", draw(sizes), role, draw(dtypes)))
            outputs.append(f"t{k}.{j}")
        kernels.append(Kernel(f"k{k}", op, inputs, tuple(outputs), phase))
    weights = [t.name for t in tensors if t.role is Role.WEIGHT]
    if weights and draw(st.booleans()):
        kernels.append(Kernel("sgd", "sgd_momentum", (), (), U, updates=(weights[0],)))
    return Graph("random", tensors, kernels)


def replay_on_addresses(
    graph: Graph,
    pairs: tuple[InPlace, ...],
    offsets_bytes: npt.NDArray[np.int64] | Mapping[int, int],
    sizes_bytes: npt.NDArray[np.int64],
) -> None:
    """Run ``graph``'s kernels in order on the addresses of a memory plan (tensor ``t`` of
    ``sizes_bytes[t]`` bytes at ``offsets_bytes[t]``; persistent tensors are elsewhere and
    skipped) and raise ``AssertionError`` when a kernel reads a tensor whose bytes a write has
    taken, or writes over the bytes of a tensor still to be read, unless it is the input it
    writes in place (``pairs``), element for element: the very same bytes."""
    persistent = {i for i, t in enumerate(graph.tensors) if t.role in PERSISTENT_ROLES}
    in_place = {
        (p.kernel, graph.tensor_index(p.output)): graph.tensor_index(p.input) for p in pairs
    }
    held: dict[int, tuple[int, int]] = {}  # tensor -> [start, end) of its valid bytes

    def write(t: int, kernel: str) -> None:
        lo, hi = int(offsets_bytes[t]), int(offsets_bytes[t]) + int(sizes_bytes[t])
        for other, (a, b) in held.items():
            if a < hi and lo < b:
                allowed = in_place.get((kernel, t)) == other and (a, b) == (lo, hi)
                assert allowed, (
                    f"{kernel}: {graph.tensors[t].name} overwrites {graph.tensors[other].name}"
                )
        held[t] = (lo, hi)

    for t, tensor in enumerate(graph.tensors):
        if tensor.role is Role.INPUT:
            write(t, "<start>")
    last = graph.live_last
    for k, kern in enumerate(graph.kernels):
        reads = [graph.tensor_index(n) for n in kern.inputs]
        for t in reads:
            assert t in persistent or t in held, (
                f"{kern.name} reads {graph.tensors[t].name}, overwritten"
            )
        for name in kern.outputs:
            o = graph.tensor_index(name)
            write(o, kern.name)
            src = in_place.get((kern.name, o))
            if src is not None:
                del held[src]  # its bytes now hold the output
        for t in [t for t in held if int(last[t]) <= k]:
            del held[t]
