"""Hypothesis properties of random valid graphs: JSON round trip and brute-force liveness."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from tmsim.workload.files import graph_from_dict, graph_to_dict, load_graph, save_graph
from tmsim.workload.graph import (
    DTYPE_BYTES,
    PERSISTENT_ROLES,
    PREEXISTING_ROLES,
    Graph,
    Kernel,
    Phase,
    Role,
    Tensor,
)


@st.composite
def graphs(
    draw: st.DrawFn, dtypes: tuple[str, ...] = tuple(sorted(DTYPE_BYTES)), unit_bytes: int = 0
) -> Graph:
    """Random valid graphs: pre-existing tensors, then kernels reading what exists so far.

    With ``unit_bytes``, every size is a whole number (1 to 64) of units and has no shape.
    """
    tensors: list[Tensor] = []
    kernels: list[Kernel] = []
    available: list[str] = []
    persistent: list[str] = []

    def new_tensor(role: Role) -> str:
        name = f"t{len(tensors)}"
        dtype = draw(st.sampled_from(dtypes))
        if unit_bytes:
            shape = ()
            size = unit_bytes * draw(st.integers(1, 64))
        elif draw(st.booleans()):
            shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
            size = DTYPE_BYTES[dtype]
            for d in shape:
                size *= d
        else:
            shape = ()
            size = DTYPE_BYTES[dtype] * draw(st.integers(1, 10**6))
        tensors.append(Tensor(name, size, role, dtype, shape))
        return name

    for _ in range(draw(st.integers(0, 4))):
        role = draw(st.sampled_from(sorted(PREEXISTING_ROLES)))
        name = new_tensor(role)
        available.append(name)
        if role in PERSISTENT_ROLES:
            persistent.append(name)
    for k in range(draw(st.integers(1, 12))):
        reads = (
            draw(st.lists(st.sampled_from(available), max_size=3, unique=True)) if available else []
        )
        updates = (
            draw(st.lists(st.sampled_from(persistent), max_size=2, unique=True))
            if persistent
            else []
        )
        produced_roles = draw(
            st.lists(st.sampled_from([Role.ACTIVATION, Role.GRADIENT, Role.WORKSPACE]), max_size=2)
        )
        outputs = [new_tensor(r) for r in produced_roles]
        phase = draw(st.sampled_from(list(Phase)))
        kernels.append(
            Kernel(
                f"k{k}",
                f"op{k % 3}",
                tuple(reads),
                tuple(outputs),
                phase,
                draw(st.integers(0, 10**12)),
                tuple(updates),
            )
        )
        available.extend(outputs)
    return Graph(draw(st.text(min_size=1, max_size=8)), tensors, kernels)


def brute_force_live_bytes(g: Graph) -> list[int]:
    """Replay the step: a tensor is live at k if it exists by k and is still needed at k."""
    out = []
    n = len(g.kernels)
    for k in range(n):
        total = 0
        for t in g.tensors:
            if t.role in PERSISTENT_ROLES:
                total += t.size_bytes
                continue
            made_at = next((i for i, kern in enumerate(g.kernels) if t.name in kern.outputs), None)
            exists = made_at is None or made_at <= k
            # a tensor nobody reads still occupies memory where it appears (kernel 0 for inputs)
            appears_at = 0 if made_at is None else made_at
            needed = appears_at == k or any(
                t.name in kern.inputs + kern.updates for kern in g.kernels[k:]
            )
            if exists and needed:
                total += t.size_bytes
        out.append(total)
    return out


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_live_bytes_match_brute_force(g: Graph) -> None:
    expected = brute_force_live_bytes(g)
    assert g.live_bytes.tolist() == expected
    assert g.peak_live_bytes == max(expected)


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_json_round_trip_is_exact(g: Graph) -> None:
    assert graph_from_dict(graph_to_dict(g)) == g
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.json"
        save_graph(g, path)
        back = load_graph(path)
    assert back == g
    assert back.tensors == g.tensors and back.kernels == g.kernels
    assert back.live_bytes.tolist() == g.live_bytes.tolist()
