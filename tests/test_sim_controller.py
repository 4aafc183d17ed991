"""The memory controller's sharing rule (tmsim.sim.rates) and its use in the fluid model and
the replay: hand-computed cases, properties against max-min, the preset's fields and the
earlier fit of one PMM read weight to the PerMA-Bench co-runs (the preset now holds the
mechanisms of tmsim.calibration.channel_fit: tests/test_interference_calibration.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from optane_before import optane_before

from hwmodels import platform_from_dict, platform_to_dict
from hwmodels.controller import BusWeight
from hwmodels.errors import HardwareModelError
from hwmodels.presets import load_preset, platform_from_toml, platform_to_toml
from tmsim.calibration import controller_fit
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel, parse_level
from tmsim.planners import PlanSettings, plan
from tmsim.sim import replay
from tmsim.sim.fluid import Flow, FlowResult, FluidModel
from tmsim.sim.rates import ChannelUse, shared_rates
from tmsim.sim.sharing import max_min_rates
from tmsim.workload.zoo import training_graph_of

GB = 1e9
CPU = load_preset("cascadelake-optane")
REL = 1e-9
BEFORE = optane_before()


# ---------------------------------------------------------------- the sharing rule by hand
def test_demand_sharing_slows_every_flow_by_the_same_factor() -> None:
    # capacity 51 for caps 100 and 2: level 51 / 102 = 0.5 of each cap; max-min gives 49, 2
    assert shared_rates([100.0, 2.0], [[(0, 1.0)], [(0, 1.0)]], [51.0], demand=True) == [50, 1]
    assert max_min_rates([100.0, 2.0], [[(0, 1.0)], [(0, 1.0)]], [51.0]) == [49, 2]


@pytest.mark.parametrize(
    ("share", "demand", "want"),
    [
        (0.0, False, (50.0, 50.0)),  # no priority: max-min
        (1.0, False, (80.0, 20.0)),  # strict: A alone gets its cap, B the rest
        (0.5, False, (70.0, 30.0)),  # A keeps 40, then 30 / 30 of the remaining 60
        (0.5, True, (40 + 120 / 7, 300 / 7)),  # then 60 in proportion to 40 : 100
    ],
)
def test_writes_that_drain_first(share: float, demand: bool, want: tuple[float, float]) -> None:
    got = shared_rates(
        [80.0, 100.0],
        [[(0, 1.0)], [(0, 1.0)]],
        [100.0],
        demand=demand,
        priority=[True, False],
        priority_share=share,
    )
    assert got == pytest.approx(want, rel=REL)


def test_bad_arguments_are_refused() -> None:
    uses = [[(0, 1.0)]]
    with pytest.raises(ValueError, match="priority_share"):
        shared_rates([1.0], uses, [1.0], priority=[True], priority_share=1.5)
    with pytest.raises(ValueError, match="finite"):
        shared_rates([math.inf], uses, [1.0], demand=True)
    with pytest.raises(ValueError, match="flows"):
        shared_rates([1.0, 1.0], uses, [1.0])


_caps = st.lists(st.floats(0.1, 100.0), min_size=1, max_size=5)


@st.composite
def _problems(draw: st.DrawFn) -> tuple[list[float], list[list[tuple[int, float]]], list[float]]:
    caps = draw(_caps)
    n_res = draw(st.integers(1, 3))
    uses = [
        [(r, draw(st.floats(0.1, 5.0))) for r in sorted(draw(st.sets(st.integers(0, n_res - 1))))]
        for _ in caps
    ]
    return caps, uses, [draw(st.floats(1.0, 100.0)) for _ in range(n_res)]


@settings(max_examples=150, deadline=None)
@given(_problems(), st.lists(st.booleans(), min_size=5, max_size=5), st.floats(0.0, 1.0))
def test_rates_respect_caps_and_capacities(
    problem: tuple[list[float], list[list[tuple[int, float]]], list[float]],
    flags: list[bool],
    share: float,
) -> None:
    caps, uses, capacities = problem
    for demand in (False, True):
        got = shared_rates(
            caps, uses, capacities, demand=demand, priority=flags[: len(caps)], priority_share=share
        )
        assert all(-1e-12 <= r <= c * (1 + 1e-9) for r, c in zip(got, caps, strict=True))
        for res, cap in enumerate(capacities):
            load = sum(r * a for r, u in zip(got, uses, strict=True) for q, a in u if q == res)
            assert load <= cap * (1 + 1e-9)


@settings(max_examples=150, deadline=None)
@given(_problems(), st.lists(st.booleans(), min_size=5, max_size=5))
def test_without_priority_or_demand_it_is_max_min_exactly(
    problem: tuple[list[float], list[list[tuple[int, float]]], list[float]], flags: list[bool]
) -> None:
    caps, uses, capacities = problem
    want = max_min_rates(caps, uses, capacities)
    assert shared_rates(caps, uses, capacities) == want
    assert shared_rates(caps, uses, capacities, priority=flags[: len(caps)]) == want
    equal = [caps[0]] * len(caps)  # demand with equal caps: equal weights
    assert shared_rates(equal, uses, capacities, demand=True) == max_min_rates(
        equal, uses, capacities
    )


# ---------------------------------------------------------------- the fluid model
def _run(flows: Sequence[Flow], channel: ChannelUse | None) -> list[FlowResult]:
    env = simpy.Environment()
    model = FluidModel(env, CPU.tiers, channel=channel)
    events = [model.transfer(f) for f in flows]
    env.run()
    return [e.value for e in events]


def _dram_read(nbytes: float, cap: float) -> Flow:
    return Flow(nbytes, (nbytes, 0.0), (0.0, 0.0), cap, writers=24)


def _copy(nbytes: float, src: int, cap: float) -> Flow:
    read, write = [0.0, 0.0], [0.0, 0.0]
    read[src], write[1 - src] = nbytes, nbytes
    return Flow(nbytes, tuple(read), tuple(write), cap)


def test_a_kernel_beside_a_copy_thread_shares_the_channels_by_demand() -> None:
    # Kernel: 200 GB of DRAM reads at up to 100 GB/s; copy: 2 GB PMM -> DRAM at 2 GB/s.
    # Channel-seconds per byte (104.6 GB/s): kernel 1, copy 2.24 + 1.362 = 3.602; the DRAM
    # device allows (100 / 104.6 + 2 / 76.8) l <= 1, l <= 1.018; the channel (100 + 7.204) l
    # <= 104.6 binds: l = 104.6 / 107.204. The copy ends at 1 / l; the kernel has then moved
    # 100 GB and moves the rest alone at 100 GB/s.
    kernel, copy = _dram_read(200 * GB, 100 * GB), _copy(2 * GB, 1, 2 * GB)
    level = 104.6 / 107.204
    k, c = _run([kernel, copy], ChannelUse.of(BEFORE))
    assert c.end_s == pytest.approx(1 / level, rel=REL)
    assert k.end_s == pytest.approx(1 / level + 1.0, rel=REL)
    k0, c0 = _run([kernel, copy], None)  # bandwidth level: both at their caps
    assert (k0.end_s, c0.end_s) == (pytest.approx(2.0, rel=REL), pytest.approx(1.0, rel=REL))


def test_a_pmm_write_stream_drains_before_a_dram_read_stream() -> None:
    # W writes 10 GB to PMM at 10 GB/s (PMM device 12.5 GB/s: not full), first: it holds
    # 10 * 7.7 = 77 of the 104.6 GB/s of channel; R reads DRAM at the 27.6 left until W ends
    # at 1 s, then its remaining 72.4 GB at its cap of 100 GB/s.
    w = Flow(10 * GB, (0.0, 0.0), (0.0, 10 * GB), 10 * GB)
    r = _dram_read(100 * GB, 100 * GB)
    got_r, got_w = _run([r, w], ChannelUse.of(BEFORE))
    assert got_w.end_s == pytest.approx(1.0, rel=REL)
    assert got_r.end_s == pytest.approx(1.0 + (100 - 27.6) / 100, rel=REL)
    # Without the drain R would have had 104.6 / (77 + 100) of its cap (demand shares): it
    # lost that much of its rate to sharing and the rest, down to 27.6, to the writes, for 1 s.
    unblocked = 100 * 104.6 / 177
    want = ((100 - unblocked) / 100, (unblocked - 27.6) / 100, 0.0, 0.0)
    assert got_r.losses.astuple() == pytest.approx(want, rel=1e-9)
    assert got_w.losses.total_s == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 50.0), st.floats(0.0, 50.0), st.integers(0, 1))
def test_more_copy_traffic_never_speeds_a_kernel(small: float, extra: float, src: int) -> None:
    kernel = Flow(50 * GB, (30 * GB, 5 * GB), (10 * GB, 5 * GB), 60 * GB, writers=24)
    ends = [
        _run([kernel, _copy(size * GB, src, 2.5 * GB)], ChannelUse.of(CPU))[0].end_s
        for size in (small, small + extra)
    ]
    assert ends[1] >= ends[0] * (1 - 1e-12)


# ---------------------------------------------------------------- the replay
@pytest.fixture(scope="module")
def async_plan() -> tuple[object, object]:
    graph = training_graph_of("resnet50", 8)
    # at 1% the sync plan is already within the gap of the async bound (0.74%) and has
    # no asynchronous copy; at 0.5% the async solve overlaps 813 of its 1030 copies
    settings = PlanSettings(capacity=Capacity.parse("4:1"), gap=0.005, window=1, time_limit_s=None)
    got = plan("async", graph, CPU, settings)
    assert any(m.mode.value == "async" for m in got.moves)
    return graph, got


def test_levels_in_the_replay(async_plan: tuple[object, object]) -> None:
    graph, got = async_plan
    none = replay(got, graph, CPU, level=InterferenceLevel.NONE)  # type: ignore[arg-type]
    assert none.level == "none"
    assert none.simulated_s == pytest.approx(got.predicted_s, rel=1e-9)  # type: ignore[attr-defined]
    full = replay(got, graph, CPU, level=InterferenceLevel.CONTROLLER)  # type: ignore[arg-type]
    assert full.level == "controller"
    assert replay(got, graph, CPU, level="none").level == "none"  # type: ignore[arg-type]
    # (That the level adds nothing when its terms are neutral: tests/test_sim_threads.py.)


def test_parse_level() -> None:
    assert parse_level(" Controller ") is InterferenceLevel.CONTROLLER
    with pytest.raises(TmsimError, match="levels are none, bandwidth, controller"):
        parse_level("full")


# ---------------------------------------------------------------- the preset's fields
def _with(**changes: object) -> dict[str, object]:
    data = platform_to_dict(CPU)
    ctl = dict(data["controller"])
    ctl.update(changes)
    data["controller"] = ctl
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"weights": {"DRAM": {"read": 1, "write": 1}, "PMM": {"read": -1, "write": 1}}},
            "controller.weights.PMM: read must be a finite number > 0",
        ),
        (
            {"weights": {"DRAM": {"read": 1, "write": 1}, "PMM": {"read": 1e4, "write": 1}}},
            r"controller: weights.PMM: read must be a number in \[0.001, 1000\]",
        ),
        (
            {"weights": {"DRAM": {"read": 1, "write": 1}}},
            "controller: weights must name two or more tiers",
        ),
        (
            {
                "weights": {"DRAM": {"read": 1, "write": 1}, "HBM": {"read": 1, "write": 1}},
                "priority_tiers": [],
            },
            "controller: weights name unknown tier 'HBM'",
        ),
        (
            {"weights": {"DRAM": {"read": 1, "write": 1}, "PMM": {"read": 1}}},
            "controller.weights.PMM: missing field 'write'",
        ),
        ({"arbitration": "fifo"}, "controller: arbitration must be one of demand, max-min"),
        ({"write_priority": 2}, r"controller: write_priority must lie in \[0, 1\]"),
        ({"priority_tiers": ["HBM"]}, "controller: priority_tiers names 'HBM'"),
        ({"priority_tiers": "PMM"}, "controller: priority_tiers must be an array"),
        (
            {"channel_bw_bytes_per_s": 0},
            "controller: channel_bw_bytes_per_s must be a finite number > 0",
        ),
        ({"colour": "red"}, "controller: unknown field"),
    ],
)
def test_bad_controller_fields_give_one_line_errors(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(HardwareModelError, match=message) as info:
        platform_from_dict(_with(**changes), "p.toml")
    assert "\n" not in str(info.value) and str(info.value).startswith("p.toml: ")


def test_the_controller_survives_toml() -> None:
    assert platform_from_toml(platform_to_toml(CPU), "rt.toml") == CPU
    data = platform_to_dict(CPU)
    del data["controller"]["channel_bw_bytes_per_s"]  # type: ignore[attr-defined]
    with pytest.raises(HardwareModelError, match="missing field channel_bw"):
        platform_from_dict(data, "p.toml")


# ---------------------------------------------------------------- the fit
@pytest.fixture(scope="module")
def fits() -> tuple[controller_fit.Fit, controller_fit.Fit, float]:
    ctl = CPU.controller
    assert ctl is not None
    dram = ctl.weight("DRAM")
    assert dram is not None
    bound = controller_fit.sync_bound(BEFORE)
    return controller_fit.fit(dram.write), controller_fit.fit(dram.write, bound), bound


def test_the_earlier_pmm_read_weight_is_the_bounded_fit(
    fits: tuple[controller_fit.Fit, controller_fit.Fit, float],
) -> None:
    free, bounded, bound = fits
    # 104.6 / 29 - 1.362 (AutoTM's synchronous PMM -> DRAM copy must still reach 29 GB/s)
    assert bound == pytest.approx(104.6 / 29 - 1.362, rel=1e-12)
    ctl = BEFORE.controller
    assert ctl is not None and ctl.weight("PMM") == BusWeight("PMM", bounded.pmm_read, 7.7)
    assert (free.pmm_read, bounded.pmm_read) == (2.99, 2.24)  # as the simulation guide says
    # The errors docs/guides/simulation.rst reports (fitted 16/16 row, held-out 8/8 row), to
    # 0.1%.
    assert bounded.errors("8/8") == pytest.approx((0.351, 0.091), abs=1e-3)
    assert bounded.errors("16/16 control") == pytest.approx((-0.040, -0.130), abs=1e-3)
    assert free.errors("8/8") == pytest.approx((0.207, -0.026), abs=1e-3)


def test_demand_arbitration_fits_the_control_far_better_than_max_min(
    fits: tuple[controller_fit.Fit, controller_fit.Fit, float],
) -> None:
    _, bounded, _ = fits
    run = next(c for c in controller_fit.CORUNS if c.name == "16/16 control")
    reader, _ = controller_fit.corun_rates(run, bounded.pmm_read, 1.362, bounded.efficiency, False)
    assert abs(reader - run.a_together) / run.a_together > 0.5  # max-min: 25 against 60.2
    assert abs(bounded.errors("16/16 control")[0]) < 0.05
