"""Memory reuse (tmsim.layout.reuse): the lecture's example by hand, closed forms on chains,
the in-place rules one by one, the zoo's steps, and properties of random steps: the bounds in
order, every pool at or above its bound, no better than a brute-force optimum and laid out so
that the step runs on its addresses, and in-place writes lowering live bytes only where they
happen."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from reuse_graphs import (
    forward_chain,
    lecture_graph,
    random_steps,
    replay_on_addresses,
    training_chain,
)

import tmsim
from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.addresses import SMALLEST_OF, plan_memory
from tmsim.layout.reuse import (
    IN_PLACE_RULES,
    InPlace,
    Scheme,
    in_place_pairs,
    memory_reuse,
    transient_buffers,
)
from tmsim.layout.tags import plan_tags
from tmsim.workload.graph import PERSISTENT_ROLES, Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import MODELS as CNN_MODELS

F, B = Phase.FORWARD, Phase.BACKWARD


def bounds(graph: Graph, alignment_bytes: int = 1) -> dict[str, int]:
    return {s.scheme.value: s.bound_bytes for s in memory_reuse(graph, alignment_bytes).schemes}


def test_the_lecture_example_by_hand() -> None:
    # Live ranges (kernels b c f e g = 0..4): B [0,2], C [1,3], F [2,4], E [3,4], G [4,4];
    # B and C are 400 bytes, F, E and G 100, the variable A 40. The most live at once is at
    # f: B + C + F = 900. G = E * F is written into E (step 5), nothing else in place: C
    # cannot go into B, still alive (step 2); the pools change size.
    r = memory_reuse(lecture_graph(), alignment_bytes=1)
    assert r.in_place == (InPlace("g", "E", "G"),)
    assert r.persistent_bytes == 40
    assert bounds(lecture_graph()) == {
        "no-reuse": 40 + 2 * 400 + 3 * 100,
        "in-place": 40 + 2 * 400 + 2 * 100,
        "shared": 40 + 900,
        "shared+in-place": 40 + 900,
    }
    assert [s.buffers for s in r.schemes] == [6, 5, 6, 5]
    for scheme in (Scheme.SHARED, Scheme.SHARED_IN_PLACE):
        m = r.scheme(scheme)
        assert dict(m.pools_bytes) == dict.fromkeys(SMALLEST_OF, 940)
        assert m.pool_bytes == m.tags_bytes == 940  # the lecture's final plan: three tags


def test_the_lecture_pitfall_in_place_only_for_the_last_consumer() -> None:
    # Without F = pool(B), C = sigmoid(B) is B's only consumer and takes B's memory.
    g = lecture_graph()
    kernels = [k for k in g.kernels if k.name != "f"]
    kernels[-1] = Kernel("g", "add", ("E", "E"), ("G",), F)
    lone = Graph("lone", [t for t in g.tensors if t.name != "F"], kernels)
    assert in_place_pairs(lone) == (InPlace("c", "B", "C"), InPlace("g", "E", "G"))


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_closed_forms_on_forward_chains(n: int) -> None:
    s, p = 96, 64
    # In place, a chain of element-wise ops of any length runs in constant memory (MXNet's
    # note on memory optimisation, on chained sigmoids); shared, it needs two buffers.
    relu = memory_reuse(forward_chain(n, "relu", s, p), alignment_bytes=1)
    assert len(relu.in_place) == n  # every step overwrites its input, the graph input too
    assert {m.scheme.value: m.bound_bytes for m in relu.schemes} == {
        "no-reuse": (n + 1) * s + p,
        "in-place": s + p,
        "shared": 2 * s + p,
        "shared+in-place": s + p,
    }
    conv = memory_reuse(forward_chain(n, "conv2d", s, p), alignment_bytes=1)
    assert conv.in_place == ()
    assert [m.bound_bytes for m in conv.schemes] == [(n + 1) * s + p] * 2 + [2 * s + p] * 2
    for r in (relu, conv):  # equal sizes: every allocator and the tags reach the bound
        for m in r.schemes:
            assert set(m.pools_bytes.values()) == {m.bound_bytes} == {m.tags_bytes}


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_closed_forms_on_a_training_chain(n: int) -> None:
    # x1..xn live until their ReLU's backward kernel; the most live at once is at the first
    # backward kernel: n activations and two gradients. In place: x1 into the input x0 and
    # each gradient into the one before (relu_backward's dx into dy); the forward ReLUs
    # cannot, their inputs are read again going backward.
    s, p = 128, 40
    g = training_chain(n, s, p)
    pairs = in_place_pairs(g)
    assert pairs[0] == InPlace("relu1", "x0", "x1")
    assert pairs[1:] == tuple(
        InPlace(f"relu{i}_bwd", f"d{i}", f"d{i - 1}") for i in range(n, 0, -1)
    )
    assert bounds(g) == {
        "no-reuse": 2 * (n + 1) * s + p,
        "in-place": (n + 1) * s + p,
        "shared": (n + 2) * s + p,
        "shared+in-place": (n + 1) * s + p,
    }


def _one_kernel(
    op: str, phase: Phase, inputs: list[Tensor], outputs: list[Tensor], later: tuple[str, ...] = ()
) -> Graph:
    """One kernel ``op`` of ``inputs`` into ``outputs``; ``later`` read again by a second."""
    kernels = [
        Kernel("k", op, tuple(t.name for t in inputs), tuple(t.name for t in outputs), phase)
    ]
    if later:
        kernels.append(Kernel("after", "conv2d", later, (), F))
    return Graph("one", {t.name: t for t in inputs + outputs}.values(), kernels)


def _t(name: str, size: int = 64, role: Role = Role.ACTIVATION, dtype: str = "fp32") -> Tensor:
    return Tensor(name, size, role, dtype)


X, Y, DY, DX = (
    _t("x", role=Role.INPUT),
    _t("y"),
    _t("dy", role=Role.INPUT),
    _t("dx", role=Role.GRADIENT),
)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        (_one_kernel("relu", F, [X], [Y]), [("x", "y")]),
        (_one_kernel("relu", F, [X], [Y], later=("x",)), []),  # x still to be read
        (_one_kernel("relu", F, [_t("x", role=Role.WEIGHT)], [Y]), []),  # persistent
        (_one_kernel("relu", F, [X], [_t("y", dtype="fp16")]), []),  # same bytes, other dtype
        (_one_kernel("relu", F, [X], [_t("y", size=128)]), []),  # other size
        (_one_kernel("relu", B, [X], [Y]), []),  # the table lists relu forward only
        (_one_kernel("conv2d", F, [X], [Y]), []),  # not element-wise
        (_one_kernel("max_pool", F, [X], [Y]), []),
        (_one_kernel("add", F, [X, X], [Y]), [("x", "y")]),  # one pair for a repeated input
        (_one_kernel("add", F, [X, _t("b", role=Role.INPUT)], [Y], later=("x",)), [("b", "y")]),
        (_one_kernel("relu_backward", B, [DY, _t("y", role=Role.INPUT)], [DX]), [("dy", "dx")]),
        (
            _one_kernel("relu_backward", B, [DY, _t("y", role=Role.INPUT)], [DX], later=("dy",)),
            [("y", "dx")],
        ),
        (
            _one_kernel(
                "softmax_cross_entropy", F, [X, _t("l", role=Role.INPUT)], [_t("loss", 4), Y]
            ),
            [("x", "y")],  # the probabilities (output 1) into the logits, not the loss
        ),
        (_one_kernel("batch_norm", F, [X], [Y, _t("m", 4), _t("v", 4)]), [("x", "y")]),
        (_one_kernel("batch_norm", F, [X], [Y, _t("m", 4), _t("v", 4)], later=("x",)), []),
        (_one_kernel("accumulate", B, [DY, _t("p", role=Role.INPUT)], [DX]), [("dy", "dx")]),
    ],
)
def test_the_in_place_rules_one_by_one(graph: Graph, expected: list[tuple[str, str]]) -> None:
    assert [(p.input, p.output) for p in in_place_pairs(graph)] == expected


def test_every_zoo_kernel_the_table_names_writes_in_place_but_batch_norm() -> None:
    # Batch norm keeps its input for the backward pass; every other kernel the table names
    # is, in the CNN zoo's steps, the last reader of the input it overwrites.
    for model in CNN_MODELS:
        g = tmsim.graph(model, batch=1)
        pairs = {p.kernel for p in in_place_pairs(g)}
        named = {k.name for k in g.kernels if (k.op, k.phase) in IN_PLACE_RULES}
        norms = {k.name for k in g.kernels if k.op == "batch_norm"}
        assert pairs == named - norms, model


def test_a_transformer_loss_keeps_the_logits_its_backward_reads() -> None:
    # The transformers' loss backward reads the logits again, so its forward may not write
    # the probabilities over them; every pair is still a kernel the table names.
    g = tmsim.graph("gpt2_small", batch=1, seq_len=64, layers=1)
    pairs = {p.kernel for p in in_place_pairs(g)}
    named = {k.name for k in g.kernels if (k.op, k.phase) in IN_PLACE_RULES}
    assert pairs <= named and "loss.fwd" in named - pairs
    loss_bwd = next(k for k in g.kernels if k.name == "loss.bwd")
    assert set(next(k for k in g.kernels if k.name == "loss.fwd").inputs) & set(loss_bwd.inputs)


@pytest.mark.parametrize("model", ["vgg19", "resnet50", "densenet121"])
def test_a_zoo_step_runs_on_every_plan_addresses(model: str) -> None:
    g = tmsim.graph(model, batch=2)
    pairs = in_place_pairs(g)
    r = memory_reuse(g)  # 64-byte alignment
    assert r.scheme("shared").bound_bytes >= g.peak_live_bytes
    aligned = -(-g.sizes_bytes // 64) * 64
    for used in ((), pairs):
        buf = transient_buffers(g, used)
        for strategy in SMALLEST_OF:
            layout = plan_memory(buf.sizes_bytes, buf.first, buf.last, strategy, 1)
            replay_on_addresses(g, used, layout.offsets_bytes[buf.buffer_of], aligned)
        tags = plan_tags(buf.sizes_bytes, buf.first, buf.last)
        replay_on_addresses(g, used, tags.offsets_bytes[buf.buffer_of], aligned)


def test_the_address_check_catches_a_bad_plan() -> None:
    g = lecture_graph()
    sizes = g.sizes_bytes
    at = {g.tensor_index(n): 0 for n in "BCFEG"}
    with pytest.raises(AssertionError, match="C overwrites B"):
        replay_on_addresses(g, (), at, sizes)
    with pytest.raises(AssertionError, match="G overwrites E"):  # not declared in place
        replay_on_addresses(g, (), {**at, 1: 0, 2: 400, 3: 800, 4: 0, 5: 0}, sizes)
    replay_on_addresses(
        g, (InPlace("g", "E", "G"),), {**at, 1: 0, 2: 400, 3: 800, 4: 0, 5: 0}, sizes
    )


def test_alignment_rounds_every_size_up() -> None:
    g = forward_chain(3, "conv2d", 100, 12)
    assert bounds(g, 64) == {
        "no-reuse": 4 * 128 + 64,
        "in-place": 4 * 128 + 64,
        "shared": 2 * 128 + 64,
        "shared+in-place": 2 * 128 + 64,
    }


@pytest.mark.parametrize("bad", [0, -64, 1.5, True, "64"])
def test_a_bad_alignment_is_refused(bad: object) -> None:
    with pytest.raises(TmsimError, match="alignment_bytes"):
        memory_reuse(lecture_graph(), bad)  # type: ignore[arg-type]
    with pytest.raises(TmsimError, match="alignment_bytes"):
        tmsim.memory_reuse(lecture_graph(), alignment_bytes=bad)  # type: ignore[arg-type]


def test_the_api_refuses_what_is_not_a_graph() -> None:
    with pytest.raises(TmsimError, match="graph must be a Graph"):
        tmsim.memory_reuse("vgg19")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nope"):
        memory_reuse(lecture_graph()).scheme("nope")


def test_transient_buffers_takes_pairs_in_any_order_and_refuses_bad_ones() -> None:
    g = training_chain(4, 32, 8)
    pairs = in_place_pairs(g)
    forward, backward = transient_buffers(g, pairs, 1), transient_buffers(g, pairs[::-1], 1)
    for a, b in zip(
        (forward.sizes_bytes, forward.first, forward.last, forward.buffer_of),
        (backward.sizes_bytes, backward.first, backward.last, backward.buffer_of),
        strict=True,
    ):
        assert a.tolist() == b.tolist()
    chain = forward.buffer_of[[g.tensor_index(f"d{i}") for i in range(5)]]
    assert len(set(chain.tolist())) == 1  # the gradients d4 .. d0: one buffer
    for bad, message in [
        (InPlace("loss", "w", "d4"), "persistent"),
        (InPlace("relu2", "x0", "x2"), "does not read"),
        (InPlace("relu2", "x1", "x2"), "read after it"),
    ]:
        with pytest.raises(TmsimError, match=message):
            transient_buffers(g, (bad,))
    with pytest.raises(TmsimError, match="another pair"):
        transient_buffers(g, (pairs[0], pairs[0]))
    with pytest.raises(KeyError):
        transient_buffers(g, (InPlace("relu1", "x0", "nope"),))


@settings(max_examples=150, deadline=None)
@given(random_steps())
def test_bounds_are_ordered_and_every_pool_lies_above_its_bound(g: Graph) -> None:
    r = memory_reuse(g, alignment_bytes=1)
    b = {s.scheme: s.bound_bytes for s in r.schemes}
    assert b[Scheme.NO_REUSE] == int(g.sizes_bytes.sum())
    assert b[Scheme.SHARED] == g.peak_live_bytes
    assert b[Scheme.SHARED_IN_PLACE] <= b[Scheme.SHARED] <= b[Scheme.NO_REUSE]
    assert b[Scheme.SHARED_IN_PLACE] <= b[Scheme.IN_PLACE] <= b[Scheme.NO_REUSE]
    for m in r.schemes:
        assert min(m.pools_bytes.values()) == m.pool_bytes >= m.bound_bytes
        assert m.tags_bytes >= m.bound_bytes
        assert m.tags_bytes <= b[Scheme.NO_REUSE]


@settings(max_examples=150, deadline=None)
@given(random_steps())
def test_in_place_lowers_live_bytes_only_where_it_writes(g: Graph) -> None:
    # At each kernel, merging an output into its input's buffer saves exactly the bytes of
    # the outputs written in place there and changes nothing elsewhere.
    pairs = in_place_pairs(g)
    n = len(g.kernels)
    own, merged = transient_buffers(g, (), 1), transient_buffers(g, pairs, 1)
    before = occupancy(own.first, own.last, own.sizes_bytes, n)
    after = occupancy(merged.first, merged.last, merged.sizes_bytes, n)
    saved = np.zeros(n, dtype=np.int64)
    kernel_index = {k.name: i for i, k in enumerate(g.kernels)}
    for p in pairs:
        saved[kernel_index[p.kernel]] += g.tensor(p.output).size_bytes
    assert (before - after).tolist() == saved.tolist()


@settings(max_examples=150, deadline=None)
@given(random_steps())
def test_every_pair_meets_the_rules(g: Graph) -> None:
    pairs = in_place_pairs(g)
    seen_in: set[str] = set()
    seen_out: set[str] = set()
    for p in pairs:
        k = next(i for i, kern in enumerate(g.kernels) if kern.name == p.kernel)
        kern = g.kernels[k]
        rules = IN_PLACE_RULES[(kern.op, kern.phase)]
        assert any(
            kern.inputs[i] == p.input and kern.outputs[o] == p.output
            for i, o in rules
            if i < len(kern.inputs) and o < len(kern.outputs)
        )
        a, b = g.tensor(p.input), g.tensor(p.output)
        assert a.role not in PERSISTENT_ROLES
        assert (a.size_bytes, a.dtype) == (b.size_bytes, b.dtype)
        assert g.live_range(p.input)[1] == k  # no kernel reads it afterwards
        assert p.input not in seen_in and p.output not in seen_out
        seen_in.add(p.input)
        seen_out.add(p.output)


@settings(max_examples=150, deadline=None)
@given(random_steps())
def test_a_random_step_runs_on_every_plan_addresses(g: Graph) -> None:
    pairs = in_place_pairs(g)
    for used in ((), pairs):
        buf = transient_buffers(g, used, 1)
        if buf.sizes_bytes.size == 0:
            continue
        for strategy in SMALLEST_OF:
            layout = plan_memory(buf.sizes_bytes, buf.first, buf.last, strategy, 1)
            replay_on_addresses(g, used, layout.offsets_bytes[buf.buffer_of], g.sizes_bytes)
        tags = plan_tags(buf.sizes_bytes, buf.first, buf.last)
        replay_on_addresses(g, used, tags.offsets_bytes[buf.buffer_of], g.sizes_bytes)


def _first_fit_in_order(
    order: tuple[int, ...], sizes: np.ndarray, first: np.ndarray, last: np.ndarray
) -> int:
    """The pool when buffers are placed in ``order``, each at the lowest offset free of
    every buffer placed before it that is live with it."""
    placed: list[int] = []
    offset = [0] * len(sizes)
    for i in order:
        busy = sorted(
            (offset[j], offset[j] + int(sizes[j]))
            for j in placed
            if first[j] <= last[i] and first[i] <= last[j]
        )
        at = 0
        for lo, hi in busy:
            if at + int(sizes[i]) <= lo:
                break
            at = max(at, hi)
        offset[i] = at
        placed.append(i)
    return max(offset[i] + int(sizes[i]) for i in order)


@settings(max_examples=60, deadline=None)
@given(random_steps(max_kernels=5))
def test_the_bound_lies_below_the_brute_force_optimum(g: Graph) -> None:
    # Any layout can be pushed down until every buffer rests on one below it, so some order
    # of placement by first fit reaches the optimum: the smallest over every order is it.
    r = memory_reuse(g, alignment_bytes=1)
    for scheme, used in ((Scheme.SHARED, ()), (Scheme.SHARED_IN_PLACE, r.in_place)):
        buf = transient_buffers(g, used, 1)
        n = buf.sizes_bytes.size
        if not 0 < n <= 7:
            continue
        best = min(
            _first_fit_in_order(order, buf.sizes_bytes, buf.first, buf.last)
            for order in itertools.permutations(range(n))
        )
        m = r.scheme(scheme)
        assert m.bound_bytes - r.persistent_bytes <= best <= m.pool_bytes - r.persistent_bytes
        assert best <= m.tags_bytes - r.persistent_bytes
