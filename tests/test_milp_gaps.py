"""The compact form of the asynchronous MILP (tmsim.planners.milp.formulation.windows): window kernels as
copy events between a tensor's uses. It must have the general form's optimum (both solved
exactly on tiny graphs, and its LP relaxation the same) with far fewer variables."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import MB, spill_step, tiny_graphs

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind, Gadgets
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.states import Kind, build_catalogue, is_prefetch
from tmsim.planners.milp.formulation.windows import Events, gaps_of, is_compact, order_key
from tmsim.workload.graph import Graph


def _gadgets(tensor: list[int], kind: list[int]) -> Gadgets:
    t = np.array(tensor, dtype=np.int64)
    n = t.size
    first = np.ones(n, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = t[:-1] != t[1:]
    true = np.ones(n, dtype=bool)
    return Gadgets(
        t, np.arange(n), np.array(kind), ~true, true, first, last, true, true, ~true, ~true
    )


def test_each_gadget_knows_the_core_gadgets_around_it() -> None:
    c, u, w = GadgetKind.CREATE, GadgetKind.USER, GadgetKind.WINDOW
    #            tensor 0 .........  tensor 1 ...
    g = _gadgets([0, 0, 0, 0, 0, 1, 1, 1], [c, w, w, u, w, w, u, w])
    gaps = gaps_of(g, compact=True)
    assert gaps.compact
    assert list(gaps.core) == [True, False, False, True, False, False, True, False]
    assert list(gaps.prev_core) == [-1, 0, 0, 0, 3, -1, -1, 6]
    assert list(gaps.next_core) == [3, 3, 3, -1, -1, 6, -1, -1]
    general = gaps_of(g, compact=False)
    assert not general.compact and general.core.all()
    assert list(general.prev_core) == [-1, 0, 1, 2, 3, -1, 5, 6]
    assert list(general.next_core) == [1, 2, 3, 4, -1, 6, 7, -1]


def test_a_fetch_cannot_read_a_slow_copy_written_beside_the_same_kernel() -> None:
    """A write-drop's slow copy lands after its kernel: a fetch beside that kernel, earlier in
    the gap's order, cannot read it, even where the gap's balance would allow the pair (the
    pair once made an asynchronous plan of Inception v4 b16 the validator refused)."""
    cat = build_catalogue(("DRAM", "PMM"), (True, True), (True, False), lambda s, d: True)
    c, w, u = GadgetKind.CREATE, GadgetKind.WINDOW, GadgetKind.USER
    g = _gadgets([0, 0, 0], [c, w, u])
    gaps = gaps_of(g, compact=True)
    f, fs, slow = cat.state([0]), cat.state([0, 1]), cat.state([1])
    fetch = cat.edge(Kind.FETCH, slow, fs)
    write_drop = next(
        i for i, e in enumerate(cat.edges) if e.kind is Kind.WRITE_DROP and e.src == f
    )
    keep = cat.edge(Kind.KEEP, f, f)
    # columns: the producer's keep (into F), then the two events beside kernel 1
    edge_gadget = np.array([0, 1, 1], dtype=np.int64)
    edge_type = np.array([keep, fetch, write_drop], dtype=np.int64)
    edge_index = np.full((3, cat.n_edges), -1, dtype=np.int64)
    edge_index[edge_gadget, edge_type] = np.arange(3)
    rows = Events.of(cat, g, edge_gadget, edge_type, gaps).order_rows(edge_index, 3).toarray()
    pair = np.array([1.0, 1.0, 1.0])  # the producer leaves F; fetch and write-drop both run
    assert (rows @ pair > 0).any(), rows
    alone = np.array([1.0, 0.0, 1.0])  # the write-drop alone keeps every row
    assert (rows @ alone <= 0).all(), rows


def _both(
    graph: Graph, platform: Platform, limit: int, window: int, relax: bool
) -> tuple[Model, Model]:
    cost = CostModel(graph, platform)
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    models = [
        build_model(cost, window, Formulation.ASYNC, limits, relax=relax, compact=flag)
        for flag in (True, False)
    ]
    return models[0], models[1]


def _value(model: Model) -> float | None:
    model.problem.solve(solver="HIGHS", mip_rel_gap=0.0, mip_abs_gap=0.0)
    return float(model.problem.value) if model.problem.status == cp.OPTIMAL else None


@settings(max_examples=30, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]),
    st.integers(1, 3),
)
def test_the_compact_form_has_the_general_forms_optimum_and_lp_bound(
    graph: Graph, share: float, preset: str, window: int
) -> None:
    platform = load_preset(preset)
    limit = max(1, int(graph.peak_live_bytes * share))
    for relax in (True, False):
        compact, general = _both(graph, platform, limit, window, relax)
        if not compact.gaps.compact:
            return  # no window gadget survives: the two are one model
        assert compact.variables < general.variables
        a, b = _value(compact), _value(general)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a == pytest.approx(b, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("preset", ["cascadelake-optane", "rtx2080ti-pcie3"])
def test_the_compact_form_against_exhaustive_search(preset: str) -> None:
    graph = spill_step()
    platform = load_preset(preset)
    for limit in (150 * MB, 250 * MB):
        compact, _ = _both(graph, platform, limit, 2, relax=False)
        assert compact.gaps.compact
        optimum = brute_force(CostModel(graph, platform), limit, "async", 2)
        value = _value(compact)
        assert (value if value is not None else np.inf) == pytest.approx(optimum, rel=1e-9)


def test_the_compact_form_applies_only_where_it_is_exact() -> None:
    graph = spill_step()
    gpu = load_preset("rtx2080ti-pcie3")
    cost = CostModel(graph, gpu)
    limits = np.full(len(graph.kernels), 250 * MB, dtype=np.int64)
    for formulation in (Formulation.STATIC, Formulation.SYNC):  # no windows to compact
        assert not build_model(cost, 2, formulation, limits, relax=True).gaps.compact
    assert build_model(cost, 2, Formulation.ASYNC_AWARE, limits, relax=True).gaps.compact
    model = build_model(cost, 2, Formulation.ASYNC, limits, relax=True)
    assert not is_compact(3, Formulation.ASYNC, model.gadgets)
    # window kernels carry copies only: no stay or keep, so their binaries are all moves
    window = ~model.gaps.core[model.vars.edge_gadget]
    assert window.any()
    assert np.all(model.catalogue.edge_add[model.vars.edge_type[window]] >= 0)
    assert np.all(model.gadgets.kind[model.vars.edge_gadget[window]] == GadgetKind.WINDOW)


@pytest.mark.parametrize("host_mb", [320, 335, 349])
def test_with_the_slow_tiers_capacity_modelled_too(host_mb: int) -> None:
    # the host a few tens of MB short of every tensor (350 MB): its capacity binds, and the
    # slow copies the events make count from their kernels on
    graph = spill_step()
    gpu = load_preset("rtx2080ti-pcie3").with_tier_capacity("host", host_mb * MB)
    for limit in (200 * MB, 250 * MB):
        for relax in (True, False):
            compact, general = _both(graph, gpu, limit, 2, relax)
            assert compact.gaps.compact and compact.tiers == (0, 1)
            a, b = _value(compact), _value(general)
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert a == pytest.approx(b, rel=1e-6)
        optimum = brute_force(CostModel(graph, gpu), limit, "async", 2)
        value = _value(_both(graph, gpu, limit, 2, relax=False)[0])
        assert (value if value is not None else np.inf) == pytest.approx(optimum, rel=1e-9)


def _order_rows_one_by_one(ev: Events, edge_index: np.ndarray, count: int) -> np.ndarray:
    """The order rows built event by event, as the module documents them (dense)."""
    cat = ev.cat
    key = order_key(ev.kernel, is_prefetch(cat.edge_kind[ev.edge]))
    src, dst = cat.edge_src[ev.edge], cat.edge_dst[ev.edge]
    rows: list[np.ndarray] = []
    for a in sorted(set(ev.prev[ev.prev >= 0].tolist())):
        members = np.flatnonzero(ev.prev == a)
        for i in members:
            state = src[i]
            makes = members[dst[members] == state]
            if makes.size == 0:
                continue
            row = np.zeros(count)
            for j in members:
                if src[j] == state and key[j] <= key[i]:
                    row[ev.column[j]] += 1.0
                if dst[j] == state and key[j] < key[i]:
                    row[ev.column[j]] -= 1.0
            evicts = (cat.edge_dst == state) & ~is_prefetch(cat.edge_kind)
            for e in range(cat.n_edges):
                if evicts[e] and edge_index[a, e] >= 0:
                    row[edge_index[a, e]] -= 1.0
            rows.append(row)
    return np.array(rows).reshape(len(rows), count)


def _order_rows_both_ways(
    graph: Graph, preset: str, share: float, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """The compact async model's order rows (at ``share`` of the peak, ``window``) as
    :meth:`Events.order_rows` builds them and as built event by event (dense)."""
    cost = CostModel(graph, load_preset(preset))
    limits = np.full(len(graph.kernels), max(1, int(graph.peak_live_bytes * share)))
    model = build_model(cost, window, Formulation.ASYNC, limits, relax=True, compact=True)
    v = model.vars
    ev = Events.of(model.catalogue, model.gadgets, v.edge_gadget, v.edge_type, model.gaps)
    got = ev.order_rows(v.edge_index, v.count).toarray()
    return got, _order_rows_one_by_one(ev, v.edge_index, v.count)


@settings(max_examples=40, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]),
    st.integers(1, 4),
)
def test_the_order_rows_are_those_built_event_by_event(
    graph: Graph, share: float, preset: str, window: int
) -> None:
    got, want = _order_rows_both_ways(graph, preset, share, window)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_the_order_rows_of_a_network_are_those_built_event_by_event() -> None:
    from tmsim.workload.zoo import training_graph_of

    got, want = _order_rows_both_ways(training_graph_of("vgg19", 2), "rtx2080ti-pcie3", 0.6, 4)
    assert want.shape[0] >= 50 and got.shape == want.shape and np.array_equal(got, want)
