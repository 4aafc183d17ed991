"""The fluid bandwidth model against hand-computed closed forms, and conservation of bytes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodels.presets import load_preset
from hwmodels.tiers import MemoryTier
from tmsim.sim.fluid import DONE_REL, Flow, FlowResult, FluidModel
from tmsim.sim.sharing import max_min_rates

GB = 1e9
CPU = load_preset("cascadelake-optane")
DRAM, PMM = CPU.tiers
REL = 1e-9
INF = math.inf


def link_flow(nbytes: float, cap: float = INF, link: int = 0, n_tiers: int = 0) -> Flow:
    zeros = (0.0,) * n_tiers
    return Flow(nbytes, zeros, zeros, cap, links=((link, nbytes),))


def tier_flow(
    n_tiers: int,
    tier: int,
    read: float,
    write: float,
    cap: float = INF,
    writers: int = 1,
    efficiency: float = 1.0,
) -> Flow:
    r = [0.0] * n_tiers
    w = [0.0] * n_tiers
    r[tier], w[tier] = read, write
    return Flow(read + write, tuple(r), tuple(w), cap, writers=writers, efficiency=efficiency)


def run(
    flows: Sequence[tuple[float, Flow]],
    tiers: Sequence[MemoryTier] = (),
    links: Sequence[float] = (),
    shared: bool = True,
    controllers: Sequence[Sequence[int]] = (),
) -> list[FlowResult]:
    """Start each ``(time, flow)`` at its time; return the results in input order."""
    env = simpy.Environment()
    model = FluidModel(env, tiers, links, shared=shared, controllers=controllers)
    out: list[FlowResult | None] = [None] * len(flows)

    def start(i: int, at: float, flow: Flow) -> simpy.events.ProcessGenerator:
        yield env.timeout(at)
        out[i] = yield model.transfer(flow)

    for i, (at, flow) in enumerate(flows):
        env.process(start(i, at, flow))
    env.run()
    assert model.active == 0
    assert all(r is not None for r in out)
    return [r for r in out if r is not None]


# ---------------------------------------------------------------------- max-min sharing
def test_max_min_rates_textbook_case() -> None:
    # f0 crosses links 0 and 1, f1 only link 0, f2 only link 1; capacities 1 and 2.
    # Link 0 fills first at 0.5 each; f2 then takes the rest of link 1: 2 - 0.5 = 1.5.
    rates = max_min_rates([INF, INF, INF], [[(0, 1.0), (1, 1.0)], [(0, 1.0)], [(1, 1.0)]], [1, 2])
    assert rates == pytest.approx([0.5, 0.5, 1.5], rel=1e-12)


def test_max_min_rates_cap_frees_capacity_for_others() -> None:
    rates = max_min_rates([0.2, INF, INF], [[(0, 1.0)], [(0, 1.0)], [(0, 1.0)]], [1.0])
    assert rates[0] == 0.2
    assert rates[1:] == pytest.approx([0.4, 0.4], rel=1e-12)


def test_max_min_rates_weighted_use() -> None:
    # A flow using 2 units of capacity per unit of rate gets the same rate, costing twice.
    rates = max_min_rates([INF, INF], [[(0, 2.0)], [(0, 1.0)]], [3.0])
    assert rates == pytest.approx([1.0, 1.0], rel=1e-12)


def test_max_min_rates_freezes_a_cap_the_rounded_level_misses() -> None:
    # Paces 1, 0.21, 0.01: f0 reaches its cap 7 at level 7; f1 its cap 57.4 at level
    # 57.4 / 0.21 = 273.33..., where 7 + (273.33... - 7) times 0.21 rounds to 57.39999999999999,
    # a hair below the cap. f2 is held by nothing but its resource (1000 at level 1e5): it
    # must not be frozen with f1 at 2.73.
    rates = max_min_rates([7.0, 57.4, 1e3], [[], [], [(0, 1.0)]], [1e3], [1.0, 0.21, 0.01])
    assert rates[:2] == [7.0, 57.4]
    assert rates[2] == pytest.approx(1e3, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(1e-3, 1e3) | st.just(INF),
            st.floats(1e-12, 1.0),
            st.lists(st.tuples(st.integers(0, 2), st.floats(1e-3, 1e3)), max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.floats(1e-2, 1e2), min_size=3, max_size=3),
)
def test_max_min_rates_are_weighted_max_min_fair(
    flows: list[tuple[float, float, list[tuple[int, float]]]], capacities: list[float]
) -> None:
    # The defining property: every flow is at its cap, or crosses a full resource on which no
    # flow has a higher rate per unit of weight (so it could get more only by taking from one
    # that has no more).
    caps = [c if u else (1.0 if c == INF else c) for c, _, u in flows]
    uses = [dict(u) for _, _, u in flows]
    weights = [w for _, w, _ in flows]
    rates = max_min_rates(caps, [list(u.items()) for u in uses], capacities, weights)
    load = [sum(r * u.get(k, 0.0) for r, u in zip(rates, uses, strict=True)) for k in range(3)]
    assert all(x <= c * (1 + 1e-9) for x, c in zip(load, capacities, strict=True))
    for f, (rate, cap) in enumerate(zip(rates, caps, strict=True)):
        assert rate <= cap
        if rate >= cap * (1 - 1e-12):
            continue
        level = rate / weights[f]
        assert any(
            load[k] >= capacities[k] * (1 - 1e-9)
            and all(
                rates[g] / weights[g] <= level * (1 + 1e-9)
                for g in range(len(rates))
                if k in uses[g]
            )
            for k in uses[f]
        ), (f, rates)


def test_max_min_rates_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="> 0"):
        max_min_rates([0.0], [[]], [])
    with pytest.raises(ValueError, match="> 0"):
        max_min_rates([1.0], [[(0, 1.0)]], [0.0])


# ---------------------------------------------------------------------- links
def test_two_overlapping_transfers_share_a_link() -> None:
    # Link 10 GB/s. A (10 GB) alone from 0 to 0.5 s moves 5 GB; B (2 GB) joins at 0.5 s and
    # both get 5 GB/s: B ends at 0.5 + 2/5 = 0.9 s, A has 3 GB left, alone again: 0.9 + 0.3.
    a, b = run([(0.0, link_flow(10 * GB)), (0.5, link_flow(2 * GB))], links=[10 * GB])
    assert (b.start_s, a.start_s) == (0.5, 0.0)
    assert b.end_s == pytest.approx(0.9, rel=REL)
    assert a.end_s == pytest.approx(1.2, rel=REL)


def test_cap_that_binds_leaves_the_rest_to_the_other_flow() -> None:
    # A capped at 2 GB/s on a 10 GB/s link: A 4 GB ends at 2 s; B gets 8 GB/s, then 10.
    a, b = run([(0.0, link_flow(4 * GB, cap=2 * GB)), (0.0, link_flow(20 * GB))], links=[10 * GB])
    assert a.end_s == pytest.approx(2.0, rel=REL)
    assert b.end_s == pytest.approx(2.0 + (20 - 16) / 10, rel=REL)


def test_cap_that_does_not_bind_changes_nothing() -> None:
    # Fair share 5 GB/s is below A's cap of 6 GB/s: both get 5 GB/s.
    a, b = run([(0.0, link_flow(4 * GB, cap=6 * GB)), (0.0, link_flow(4 * GB))], links=[10 * GB])
    assert a.end_s == pytest.approx(0.8, rel=REL)
    assert b.end_s == pytest.approx(0.8, rel=REL)


def test_without_sharing_every_flow_runs_at_its_cap() -> None:
    a, b = run(
        [(0.0, link_flow(4 * GB, cap=2 * GB)), (1.0, link_flow(9 * GB, cap=9 * GB))],
        links=[1 * GB],
        shared=False,
    )
    assert (a.end_s, b.end_s) == (pytest.approx(2.0, rel=REL), pytest.approx(2.0, rel=REL))


# ---------------------------------------------------------------------- memory tiers
def test_pmm_read_stream_slowed_by_a_write_stream_as_the_interference_model_says() -> None:
    # Both uncapped: they move at one rate, a 1:1 mix, so the 2 GB write finishes when the
    # device has served 2 GB of reads and 2 GB of writes: service_time_s(2, 2, 1 writer).
    tiers = CPU.tiers
    read, write = run(
        [(0.0, tier_flow(2, 1, 10 * GB, 0.0)), (0.0, tier_flow(2, 1, 0.0, 2 * GB))], tiers
    )
    both = float(PMM.service_time_s(2 * GB, 2 * GB, 1))
    assert write.end_s == pytest.approx(both, rel=REL)
    assert read.end_s == pytest.approx(both + 8 * GB / PMM.read_bw_bytes_per_s, rel=REL)
    # The mix costs twice the time of the reads and writes one after the other (mix_penalty 1).
    separate = 2 * GB / PMM.read_bw_bytes_per_s + 2 * GB / float(PMM.write_bw_at(1))
    assert both == pytest.approx(2 * separate, rel=1e-12)


def test_pmm_read_stream_beside_a_capped_write_stream_fills_the_device() -> None:
    # Writes capped at 4 GB/s; the read stream gets the rate x that makes the device exactly
    # busy at the aggregate mix: service_time_s(x, 4 GB, 1) == 1 second per second.
    cap = 4 * GB
    read, write = run(
        [(0.0, tier_flow(2, 1, 40 * GB, 0.0)), (0.0, tier_flow(2, 1, 0.0, 4 * GB, cap=cap))],
        CPU.tiers,
    )
    assert write.end_s == pytest.approx(1.0, rel=REL)
    # 40 GB = x * 1 s + (end - 1 s) * read_bw (alone after the writes end)
    x = 40 * GB - (read.end_s - 1.0) * PMM.read_bw_bytes_per_s
    assert float(PMM.service_time_s(x, cap, 1)) == pytest.approx(1.0, rel=1e-7)
    assert x < PMM.read_bw_bytes_per_s * (1 - cap / float(PMM.write_bw_at(1)))  # the mix costs


def test_a_shared_controller_adds_the_device_times_of_its_tiers() -> None:
    # A DRAM read stream and a PMM read stream, uncapped, at one rate x. Apart, each tier is
    # busy only with its own stream (the PMM one ends after 10 GB / 37.6 GB/s). Behind one
    # controller they take x (1/read_dram + 1/read_pmm) controller-seconds per second: both
    # 10 GB streams end together at 10 GB x (1/read_dram + 1/read_pmm).
    flows = [(0.0, tier_flow(2, 0, 10 * GB, 0.0)), (0.0, tier_flow(2, 1, 10 * GB, 0.0))]
    apart = run(flows, CPU.tiers)
    assert apart[0].end_s == pytest.approx(10 * GB / DRAM.read_bw_bytes_per_s, rel=REL)
    assert apart[1].end_s == pytest.approx(10 * GB / PMM.read_bw_bytes_per_s, rel=REL)
    joint = run(flows, CPU.tiers, controllers=[(0, 1)])
    both = 10 * GB * (1 / DRAM.read_bw_bytes_per_s + 1 / PMM.read_bw_bytes_per_s)
    assert joint[0].end_s == pytest.approx(both, rel=REL)
    assert joint[1].end_s == pytest.approx(both, rel=REL)
    # A capped copy-like flow (PMM read at 2 GB/s) beside a DRAM stream takes its share of
    # the controller: the stream gets (1 - 2 GB/s / read_pmm) x read_dram while it runs.
    capped = [
        (0.0, tier_flow(2, 0, 200 * GB, 0.0)),
        (0.0, tier_flow(2, 1, 2 * GB, 0.0, cap=2 * GB)),
    ]
    stream, copy = run(capped, CPU.tiers, controllers=[(0, 1)])
    assert copy.end_s == pytest.approx(1.0, rel=REL)
    during = (1 - 2 * GB / PMM.read_bw_bytes_per_s) * DRAM.read_bw_bytes_per_s
    assert stream.end_s == pytest.approx(
        1.0 + (200 * GB - during) / DRAM.read_bw_bytes_per_s, rel=REL
    )
    with pytest.raises(ValueError, match="unknown tiers"):
        FluidModel(simpy.Environment(), CPU.tiers, controllers=[(0, 2)])


def test_dram_has_no_mix_penalty() -> None:
    read, write = run(
        [(0.0, tier_flow(2, 0, 4 * GB, 0.0)), (0.0, tier_flow(2, 0, 0.0, 4 * GB))], CPU.tiers
    )
    expected = 4 * GB / DRAM.read_bw_bytes_per_s + 4 * GB / DRAM.write_bw_bytes_per_s
    assert read.end_s == pytest.approx(expected, rel=REL)
    assert write.end_s == pytest.approx(expected, rel=REL)


def test_many_writers_divide_the_write_bandwidth() -> None:
    # Two write flows of 10 writers each: 20 writers, peak / (1 + 0.04 * (20 - 8)); equal share.
    flows = [(0.0, tier_flow(2, 1, 0.0, 1 * GB, writers=10)) for _ in range(2)]
    a, b = run(flows, CPU.tiers)
    bw20 = float(PMM.write_bw_at(20))
    assert bw20 == pytest.approx(12.5 * GB / 1.48, rel=1e-12)
    assert a.end_s == pytest.approx(2 * GB / bw20, rel=REL)
    assert b.end_s == a.end_s


def test_a_mixed_flow_alone_costs_what_the_roofline_charges() -> None:
    # A kernel's own read/write mix is priced as hwmodels.timing.roofline prices it (no mix
    # factor): (R / read_bw + W / write_bw(24)) / efficiency.
    (k,) = run([(0.0, tier_flow(2, 1, 3 * GB, 2 * GB, writers=24, efficiency=0.8))], CPU.tiers)
    expected = (3 * GB / PMM.read_bw_bytes_per_s + 2 * GB / float(PMM.write_bw_at(24))) / 0.8
    assert k.end_s == pytest.approx(expected, rel=REL)


def test_a_copy_crosses_tiers_and_its_link() -> None:
    # DRAM -> PMM at a 2.5 GB/s cap, writing PMM: the cap binds (PMM writes 12.5 GB/s).
    flow = Flow(5 * GB, (5 * GB, 0.0), (0.0, 5 * GB), 2.5 * GB, links=((0, 5 * GB),))
    (c,) = run([(0.0, flow)], CPU.tiers, links=[3 * GB])
    assert c.end_s == pytest.approx(2.0, rel=REL)
    # With a 1 GB/s link, the link binds.
    (c,) = run([(0.0, flow)], CPU.tiers, links=[1 * GB])
    assert c.end_s == pytest.approx(5.0, rel=REL)


def test_zero_byte_flow_completes_at_once() -> None:
    (z,) = run([(0.25, Flow(0.0, (0.0, 0.0), (0.0, 0.0), 1.0))], CPU.tiers)
    assert (z.start_s, z.end_s, z.moved_bytes) == (0.25, 0.25, 0.0)


def test_bad_flows_are_rejected() -> None:
    env = simpy.Environment()
    model = FluidModel(env, CPU.tiers, [1.0])
    with pytest.raises(ValueError, match="each of 2 tiers"):
        model.transfer(Flow(1.0, (1.0,), (0.0,), 1.0))
    with pytest.raises(ValueError, match="cap"):
        model.transfer(Flow(1.0, (1.0, 0.0), (0.0, 0.0), 0.0))
    with pytest.raises(ValueError, match="efficiency"):
        model.transfer(Flow(1.0, (1.0, 0.0), (0.0, 0.0), 1.0, efficiency=1.5))
    with pytest.raises(ValueError, match="unknown link"):
        model.transfer(Flow(1.0, (1.0, 0.0), (0.0, 0.0), 1.0, links=((3, 1.0),)))
    with pytest.raises(ValueError, match="> 0"):
        FluidModel(env, CPU.tiers, [0.0])


# ---------------------------------------------------------------------- conservation
@st.composite
def flow_sets(draw: st.DrawFn) -> list[tuple[float, Flow]]:
    out = []
    for _ in range(draw(st.integers(1, 8))):
        r = [float(draw(st.integers(0, 5))) * GB for _ in range(2)]
        w = [float(draw(st.integers(0, 5))) * GB for _ in range(2)]
        link_bytes = float(draw(st.integers(0, 3))) * GB
        n = sum(r) + sum(w) + link_bytes
        cap = draw(st.sampled_from([INF, 1 * GB, 7 * GB, 50 * GB]))
        links = ((draw(st.integers(0, 1)), link_bytes),) if link_bytes else ()
        flow = Flow(n, tuple(r), tuple(w), cap, links=links, writers=draw(st.integers(0, 30)))
        out.append((draw(st.sampled_from([0.0, 0.1, 0.35, 1.0])), flow))
    return out


@settings(max_examples=60, deadline=None)
@given(flow_sets())
def test_bytes_moved_equal_bytes_requested(flows: list[tuple[float, Flow]]) -> None:
    results = run(flows, CPU.tiers, links=[2 * GB, 5 * GB])
    for (at, flow), res in zip(flows, results, strict=True):
        assert res.start_s == at
        assert res.moved_bytes == pytest.approx(flow.nbytes, rel=2 * DONE_REL, abs=1e-6)
        if flow.nbytes:
            # No flow beats its own cap.
            assert res.end_s - res.start_s >= flow.nbytes / flow.cap_bytes_per_s * (1 - 1e-9)
    assert sum(r.moved_bytes for r in results) == pytest.approx(
        sum(f.nbytes for _, f in flows), rel=2 * DONE_REL, abs=1e-6
    )


def test_same_flows_same_results() -> None:
    flows = [(0.0, tier_flow(2, 1, 3 * GB, 1 * GB)), (0.2, tier_flow(2, 1, 0.0, 2 * GB, cap=GB))]
    assert run(flows, CPU.tiers) == run(flows, CPU.tiers)
