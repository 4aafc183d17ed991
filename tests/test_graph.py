"""Liveness of hand-checkable graphs, and every validation error."""

from __future__ import annotations

import numpy as np
import pytest

from tmsim.errors import GraphError
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

F = Phase.FORWARD


def test_mlp_live_ranges_bytes_and_peak(mlp: Graph) -> None:
    assert mlp.live_range("x") == (0, 0)
    assert mlp.live_range("h1") == (0, 1)
    assert mlp.live_range("h2") == (1, 2)
    assert mlp.live_range("y") == (2, 2)
    for w in ("w1", "w2", "w3"):  # weights are live during the whole step
        assert mlp.live_range(w) == (0, 2)
    # k0: x 100 + h1 20 + weights 24; k1: h1 20 + h2 32 + 24; k2: h2 32 + y 40 + 24
    assert mlp.live_bytes.tolist() == [144, 76, 96]
    assert mlp.peak_live_bytes == 144
    assert mlp.flops == 60
    assert mlp.params == (12 + 8 + 4) // 4


def test_diamond_fan_out(diamond: Graph) -> None:
    assert diamond.users("b").tolist() == [1, 2]
    assert diamond.live_range("b") == (0, 2)
    assert diamond.live_range("c") == (1, 3)
    assert diamond.live_range("d") == (2, 3)
    assert diamond.live_bytes.tolist() == [24, 48, 112, 100]
    assert diamond.peak_live_bytes == 112
    names = [diamond.tensors[i].name for i in diamond.live_set(2)]
    assert names == ["b", "c", "d"]
    assert diamond.producers.tolist() == [-1, 0, 1, 2, 3]
    assert [diamond.tensors[i].name for i in diamond.kernel_operands(3)] == ["c", "d", "e"]


def test_live_set_out_of_range(diamond: Graph) -> None:
    with pytest.raises(IndexError):
        diamond.live_set(4)


def test_unread_output_is_live_at_its_producer_only() -> None:
    g = Graph(
        "g",
        [
            Tensor("a", 4, Role.INPUT),
            Tensor("b", 8, Role.ACTIVATION),
            Tensor("c", 4, Role.ACTIVATION),
        ],
        [Kernel("k0", "op", ("a",), ("b", "c"), F), Kernel("k1", "op", ("c",), (), F)],
    )
    assert g.live_range("b") == (0, 0)
    assert g.live_bytes.tolist() == [16, 4]


def test_in_place_update_of_persistent_state() -> None:
    g = Graph(
        "g",
        [
            Tensor("w", 4, Role.WEIGHT),
            Tensor("g", 4, Role.GRADIENT),
            Tensor("m", 4, Role.OPTIMIZER_STATE),
        ],
        [
            Kernel("grad", "op", ("w",), ("g",), Phase.BACKWARD),
            Kernel("sgd", "sgd_momentum", ("g",), (), Phase.UPDATE, 4, updates=("w", "m")),
        ],
    )
    assert g.users("w").tolist() == [0, 1]
    assert g.live_range("m") == (0, 1)
    assert g.live_bytes.tolist() == [12, 12]


def test_derived_arrays_are_read_only(diamond: Graph) -> None:
    with pytest.raises(ValueError):
        diamond.live_bytes[0] = 0
    with pytest.raises(AttributeError):
        diamond.name = "other"  # type: ignore[misc]


def _graph(tensors: list[Tensor], kernels: list[Kernel]) -> Graph:
    return Graph("bad", tensors, kernels)


A = Tensor("a", 4, Role.INPUT)
B = Tensor("b", 4, Role.ACTIVATION)


@pytest.mark.parametrize(
    ("tensors", "kernels", "message"),
    [
        ([A], [], "graph 'bad' has no kernels"),
        (
            [A, Tensor("a", 8, Role.INPUT)],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': declared twice",
        ),
        (
            [A, B],
            [Kernel("k", "op", ("a",), ("b",), F), Kernel("k", "op", ("b",), (), F)],
            "kernel 'k': name used twice",
        ),
        (
            [A, B, Tensor("c", 4, Role.ACTIVATION)],
            [Kernel("k0", "op", ("b",), ("c",), F), Kernel("k1", "op", ("a",), ("b",), F)],
            "kernel 'k0': reads tensor 'b' before any kernel produces it",
        ),
        (
            [A, B],
            [Kernel("k0", "op", ("a",), ("b",), F), Kernel("k1", "op", ("a",), ("b",), F)],
            "kernel 'k1': produces tensor 'b', already produced by kernel 'k0'",
        ),
        (
            [Tensor("a", 0, Role.INPUT)],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': size_bytes must be a positive integer, got 0",
        ),
        (
            [Tensor("a", 2.5, Role.INPUT)],
            [Kernel("k", "op", ("a",), (), F)],
            "size_bytes must be a positive integer, got 2.5",
        ),  # type: ignore[arg-type]
        (
            [Tensor("a", 4, "weights")],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': unknown role 'weights'",
        ),  # type: ignore[arg-type]
        (
            [Tensor("a", 4, Role.INPUT, "fp24")],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': unknown dtype 'fp24'",
        ),
        (
            [Tensor("a", 4, Role.INPUT, "fp32", (2, 2))],
            [Kernel("k", "op", ("a",), (), F)],
            "disagrees with shape (2, 2)",
        ),
        ([A], [Kernel("k", "op", ("z",), (), F)], "kernel 'k': operand 'z' is not a tensor"),
        ([A], [Kernel("k", "op", ("a",), (), "fwd")], "kernel 'k': unknown phase 'fwd'"),  # type: ignore[arg-type]
        (
            [A],
            [Kernel("k", "op", ("a",), (), F, -1)],
            "kernel 'k': flops must be a non-negative integer",
        ),
        (
            [A, B],
            [Kernel("k", "op", ("a",), ("b",), F, 0, ("a",))],
            "kernel 'k': updates tensor 'a' in place",
        ),
        (
            [A],
            [Kernel("k", "op", (), ("a",), F)],
            "kernel 'k': produces tensor 'a', whose role 'input'",
        ),
        (
            [A, B],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'b': role 'activation' but no kernel produces it",
        ),
        ([A, B], [Kernel("k", "op", ("a",), ("b", "b"), F)], "kernel 'k': lists an output twice"),
        # sizes and FLOPs under the bound of 2**62 in all, checked in Python integers
        (
            [Tensor("a", 2**62, Role.INPUT, "uint8")],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': size_bytes 4611686018427387904 is not below the bound of 2**62",
        ),
        (
            [Tensor("a", 10**400, Role.INPUT, "uint8")],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': size_bytes about 2**1328 is not below the bound",
        ),
        (
            [Tensor("a", 2**61, Role.INPUT, "uint8"), Tensor("b", 2**61, Role.INPUT, "uint8")],
            [Kernel("k", "op", ("a", "b"), (), F)],
            "tensor 'b': brings the graph's bytes to 4611686018427387904, not below the bound",
        ),
        (
            [A],
            [Kernel("k", "op", ("a",), (), F, 2**62)],
            "kernel 'k': flops 4611686018427387904 is not below the bound of 2**62 FLOPs",
        ),
        (
            [A],
            [Kernel("k", "op", ("a",), (), F, 2**61), Kernel("j", "op", ("a",), (), F, 2**61)],
            "kernel 'j': brings the graph's FLOPs to 4611686018427387904, not below the bound",
        ),
        (
            [A],
            [Kernel("k", "op", ("a",), (), F, True)],
            "kernel 'k': flops must be a non-negative integer, got True",
        ),  # type: ignore[arg-type]
        (
            # 2**32 x (2**32 + 1) wraps to 2**32 in 64-bit arithmetic: the shape must not pass
            [Tensor("a", 2**32, Role.INPUT, "uint8", (2**32, 2**32 + 1))],
            [Kernel("k", "op", ("a",), (), F)],
            "tensor 'a': shape (4294967296, 4294967297) must hold positive integers",
        ),
        (
            [Tensor("a", 2**32, Role.INPUT, "uint8", (2**16, 2**16 + 1))],
            [Kernel("k", "op", ("a",), (), F)],
            "disagrees with shape (65536, 65537) of uint8 (4295032832 bytes)",
        ),
    ],
)
def test_validation_errors_name_the_culprit(
    tensors: list[Tensor], kernels: list[Kernel], message: str
) -> None:
    with pytest.raises(GraphError) as info:
        _graph(tensors, kernels)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_graph_error_is_value_error() -> None:
    assert issubclass(GraphError, ValueError)


def test_equality_and_live_set_consistency(diamond: Graph) -> None:
    again = Graph(diamond.name, diamond.tensors, diamond.kernels)
    assert again == diamond
    sizes = diamond.sizes_bytes
    for k in range(len(diamond.kernels)):
        assert int(sizes[diamond.live_set(k)].sum()) == int(diamond.live_bytes[k])
    assert np.all(diamond.live_first <= diamond.live_last)


def test_a_kernel_reading_a_tensor_twice_is_one_user() -> None:
    g = Graph(
        "twice",
        [Tensor("x", 4, Role.INPUT), Tensor("w", 4, Role.WEIGHT), Tensor("y", 4, Role.ACTIVATION)],
        [
            Kernel("add", "add", ("x", "x"), ("y",), F),
            Kernel("sgd", "sgd_momentum", ("y", "w"), (), Phase.UPDATE, updates=("w",)),
        ],
    )
    assert g.users("x").tolist() == [0]
    assert g.users("w").tolist() == [1]


def test_live_bytes_near_the_bound_are_exact() -> None:
    """Bytes just under 2**62 in all: every sum fits 64 bits, so the peak is exact."""
    big = 2**62 - 2**40
    tensors = [Tensor("a", big - 8, Role.INPUT, "uint8"), Tensor("b", 8, Role.ACTIVATION)]
    g = Graph("big", tensors, [Kernel("k", "op", ("a",), ("b",), F)])
    assert g.peak_live_bytes == big and int(g.live_bytes[0]) == big
