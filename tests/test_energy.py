"""Energy and wear: the ``[energy]`` table of a platform file, and a replayed step charged with
it (hand-checked on a three-kernel graph whose byte counts are in its fixture)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import tmsim
from hwmodels import HardwareModelError, Platform, load_preset, platform_from_dict, platform_to_dict
from hwmodels.energy import SECONDS_PER_YEAR, TierEnergy
from tmsim.comparison import CompareSettings, compare
from tmsim.cost import kernel_dtype
from tmsim.energy import step_energy
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.sim import replay
from tmsim.workload.graph import Graph

PJ = 1e-12

#: Energy of the test platform: round numbers told apart, in the units a preset uses; it
#: prices everything the platform has, as a table must.
ENERGY: dict[str, Any] = {
    "source": "test values",
    "compute_static_W": 2.0,
    "flop": {"fp32_pJ_per_flop": 1000.0, "fp64_pJ_per_flop": 2000.0},
    "tiers": [
        {"name": "DRAM", "read_energy_pJ_per_byte": 10.0, "write_energy_pJ_per_byte": 20.0},
        {
            "name": "PMM",
            "read_energy_pJ_per_bit": 5.0,  # 40 pJ per byte
            "write_energy_nJ_per_byte": 0.1,  # 100 pJ per byte
            "static_W": 1.0,
            "endurance_PBW": 1.0,
            "rated_years": 5,
        },
    ],
    "links": [
        {"src": "DRAM", "dst": "PMM", "energy_pJ_per_byte": 7.0},
        {"src": "PMM", "dst": "DRAM", "energy_pJ_per_byte": 9.0},
    ],
}


def _platform(energy: dict[str, Any] | None = ENERGY, **tier_changes: Any) -> Platform:
    data = platform_to_dict(load_preset("cascadelake-optane"))
    for tier in data["tiers"]:
        tier["access_granularity_bytes"] = 1  # bytes counted exactly, no rounding to lines
        tier.update(tier_changes)
    data.pop("energy", None)  # the preset's own
    if energy is not None:
        data["energy"] = energy
    return platform_from_dict(data, "test")


def test_units_convert_and_round_trip() -> None:
    p = _platform()
    assert p.energy is not None
    dram, pmm = p.energy.tier("DRAM"), p.energy.tier("PMM")
    assert dram is not None and pmm is not None
    assert dram.read_j_per_byte == pytest.approx(10 * PJ)
    assert pmm.read_j_per_byte == pytest.approx(40 * PJ)  # 5 pJ/bit x 8
    assert pmm.write_j_per_byte == pytest.approx(100 * PJ)
    assert pmm.endurance_bytes == pytest.approx(1e15)
    assert p.energy.j_per_flop("float32") == pytest.approx(1000 * PJ)
    assert p.energy.j_per_flop("fp64") == pytest.approx(2000 * PJ)
    link = p.energy.link("DRAM", "PMM")
    assert link is not None and link.j_per_byte == pytest.approx(7 * PJ)
    back = p.energy.link("PMM", "DRAM")
    assert back is not None and back.j_per_byte == pytest.approx(9 * PJ)
    again = platform_from_dict(platform_to_dict(p), "again")
    assert again.energy == p.energy


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {
                "tiers": [
                    {"name": "HBM", "read_energy_pJ_per_byte": 1, "write_energy_pJ_per_byte": 1}
                ]
            },
            "unknown tier 'HBM'",
        ),
        ({"links": [{"src": "PMM", "dst": "HBM", "energy_pJ_per_byte": 1}]}, "no copy path"),
        ({"flop": {"fp16_pJ_per_flop": 1}}, "no peak for dtype 'fp16'"),
        ({"flop": {"fp32_pJ": 1}}, "give <dtype>_<unit>"),
        (
            {
                "tiers": [
                    {
                        "name": "PMM",
                        "read_energy_pJ_per_byte": 1,
                        "write_energy_pJ_per_byte": 1,
                        "endurance_PBW": 1,
                    }
                ]
            },
            "an endurance needs rated_years",
        ),
        (
            {
                "tiers": [
                    {
                        "name": "PMM",
                        "read_energy_pJ_per_byte": 1,
                        "write_energy_pJ_per_byte": 1,
                        "endurance_PBW": 1,
                        "endurance_DWPD": 1,
                        "rated_years": 5,
                    }
                ]
            },
            "give one endurance",
        ),
        (
            {
                "tiers": [
                    {"name": "PMM", "read_energy_pJ_per_byte": -1, "write_energy_pJ_per_byte": 1}
                ]
            },
            "must be a finite number >= 0",
        ),
        (
            {
                "tiers": [
                    {
                        "name": "PMM",
                        "read_energy_pJ_per_byte": 1,
                        "write_energy_pJ_per_byte": 1,
                        "colour": "red",
                    }
                ]
            },
            "unknown field(s) colour",
        ),
        ({"compute_static_kW": 1}, "unknown field(s) compute_static_kW"),
        (
            {
                "tiers": [
                    {"name": "PMM", "read_energy_pJ_per_byte": 1, "write_energy_pJ_per_byte": 1},
                    {"name": "PMM", "read_energy_pJ_per_byte": 1, "write_energy_pJ_per_byte": 1},
                ]
            },
            "tier 'PMM' given twice",
        ),
    ],
)
def test_bad_energy_tables_fail_in_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(HardwareModelError) as err:
        _platform({**ENERGY, **change})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_years_to_wear_closed_form() -> None:
    # a 1 TB drive rated for one drive write a day over 5 years, written 1 TB a day: 5 years
    drive = TierEnergy("nvme", 0.0, 0.0, drive_writes_per_day=1.0, rated_years=5.0)
    assert drive.years_to_wear(10**12, 10**12, 86400.0) == pytest.approx(5.0)
    # half a drive a day lasts twice as long; nothing written never wears it out
    assert drive.years_to_wear(10**12, 5 * 10**11, 86400.0) == pytest.approx(10.0)
    assert math.isinf(drive.years_to_wear(10**12, 0, 1.0))
    dram = TierEnergy("DRAM", 0.0, 0.0)
    assert dram.lifetime_bytes(10**9) is None and math.isinf(dram.years_to_wear(1, 1, 1.0))
    with pytest.raises(HardwareModelError, match="positive step time"):
        drive.years_to_wear(1, 1, 0.0)


def test_all_fast_step_energy_by_hand(mlp: Graph) -> None:
    """mlp on DRAM alone: reads x w1 h1 w2 h2 w3 = 176 B, writes h1 h2 y = 92 B, 60 FLOPs."""
    p = _platform()
    trace = replay(plan("all-fast", mlp, p, PlanSettings()), mlp, p, level=InterferenceLevel.NONE)
    e = step_energy(trace, mlp, p)
    assert e.tier_j["DRAM"] == pytest.approx((176 * 10 + 92 * 20) * PJ)
    assert e.tier_j["PMM"] == 0.0
    assert e.compute_j == pytest.approx(60 * 1000 * PJ)
    assert e.static_j == pytest.approx(trace.simulated_s * (2.0 + 1.0))
    assert e.link_j == {}
    assert e.written_bytes == {"DRAM": 92, "PMM": 0}
    assert math.isinf(e.wear_years["PMM"]) and e.least_wear_tier == "PMM"
    assert e.total_j == pytest.approx(e.compute_j + e.static_j + e.tier_j["DRAM"])


def test_all_slow_step_wears_the_rated_tier_by_hand(mlp: Graph) -> None:
    p = _platform()
    trace = replay(plan("all-slow", mlp, p, PlanSettings()), mlp, p, level=InterferenceLevel.NONE)
    e = step_energy(trace, mlp, p)
    assert e.tier_j["PMM"] == pytest.approx((176 * 40 + 92 * 100) * PJ)
    assert e.written_bytes["PMM"] == 92
    per_s = 92 / trace.simulated_s
    assert e.wear_years["PMM"] == pytest.approx(1e15 / per_s / SECONDS_PER_YEAR)


def test_moves_pay_their_link() -> None:
    """vDNN offloading every activation of a VGG19 step on a GPU: every byte a copy carries
    device -> host costs the link's 7 pJ (the other direction is priced 0), and each copy's
    read and write are charged to the tiers like a kernel's."""
    data = platform_to_dict(load_preset("h100-pcie5"))
    flop = {f"{d}_pJ_per_flop": 1.0 for d in ("fp32", "fp16", "bf16")}
    data["energy"] = {
        "flop": flop,
        "tiers": [
            {"name": "device", "read_energy_pJ_per_byte": 0, "write_energy_pJ_per_byte": 0},
            {"name": "host", "read_energy_pJ_per_byte": 40, "write_energy_pJ_per_byte": 100},
        ],
        "links": [
            {"src": "device", "dst": "host", "energy_pJ_per_byte": 7.0},
            {"src": "host", "dst": "device", "energy_pJ_per_byte": 0.0},
        ],
    }
    p = platform_from_dict(data, "test")
    g = tmsim.graph("vgg19", batch=1)
    made = plan("vdnn", g, p, PlanSettings(offload_all=True))
    trace = replay(made, g, p, level=InterferenceLevel.NONE)
    e = step_energy(trace, g, p)
    host = [t.name for t in p.tiers].index("host")
    device = [t.name for t in p.tiers].index("device")
    down = sum(r.read_bytes[device] for r in trace.moves() if r.dst == "host")
    assert down > 0  # the plan moves something down, or the check below checks nothing
    assert e.link_j["device->host"] == pytest.approx(down * 7 * PJ)
    assert e.link_j.get("host->device", 0.0) == 0.0
    reads = sum(r.read_bytes[host] for r in trace.records)
    writes = sum(r.write_bytes[host] for r in trace.records)
    assert writes > 0 and e.written_bytes["host"] == writes
    assert e.tier_j["host"] == pytest.approx((reads * 40 + writes * 100) * PJ)
    assert e.tier_j["device"] == 0.0  # priced 0: not charged


def test_no_energy_model_is_refused_and_compare_leaves_the_columns_empty(mlp: Graph) -> None:
    bare = _platform(None)
    trace = replay(plan("all-fast", mlp, bare, PlanSettings()), mlp, bare)
    with pytest.raises(Exception, match="has no energy model"):
        step_energy(trace, mlp, bare)
    rows = compare(mlp, bare, CompareSettings(strategies=("all-fast", "all-slow")))
    assert all(math.isnan(r.energy_j) and r.wear_tier == "" for r in rows)


def test_compare_rows_carry_energy_and_wear(mlp: Graph) -> None:
    p = _platform()
    rows = {
        r.strategy: r
        for r in compare(mlp, p, CompareSettings(strategies=("all-fast", "all-slow", "2lm")))
    }
    fast, slow = rows["all-fast"], rows["all-slow"]
    assert slow.energy_j > fast.energy_j > 0
    assert slow.wear_tier == "PMM" and slow.wear_written_bytes == 92
    assert fast.wear_written_bytes == 0 and math.isnan(fast.wear_years)  # unwritten: no wear
    assert math.isfinite(slow.wear_years) and slow.wear_years > 0
    cached = rows["2lm"]
    assert cached.energy_j > 0 and not cached.error


#: DRAM costs energy, PMM and the rest none: time and energy pull every tensor opposite ways.
PULL: dict[str, Any] = {
    "flop": {"fp32_pJ_per_flop": 0.0, "fp64_pJ_per_flop": 0.0},
    "links": [],
    "tiers": [
        {"name": "DRAM", "read_energy_nJ_per_byte": 1.0, "write_energy_nJ_per_byte": 1.0},
        {"name": "PMM", "read_energy_pJ_per_byte": 0.0, "write_energy_pJ_per_byte": 0.0},
    ],
}


@pytest.mark.parametrize("formulation", ["static", "sync"])
def test_energy_weight_trades_time_for_energy(mlp: Graph, formulation: str) -> None:
    """Planned for time, mlp sits in DRAM; at 1e6 s per J (268 B x 1 nJ = 0.27 s against
    microseconds of time) every byte goes to PMM; and each plan is the better one under its
    own objective (time + weight x energy, from uncontended replays)."""
    p = _platform(PULL)
    weight = 1e6
    timed = plan(formulation, mlp, p, PlanSettings(time_limit_s=None))
    weighted = plan(
        formulation, mlp, p, PlanSettings(time_limit_s=None, energy_weight_s_per_j=weight)
    )

    def cost(made: Any, w: float) -> tuple[float, float]:
        trace = replay(made, mlp, p, level=InterferenceLevel.NONE)
        e = step_energy(trace, mlp, p)
        return trace.simulated_s, trace.simulated_s + w * e.total_j

    (t_timed, _), (t_weighted, _) = cost(timed, 0.0), cost(weighted, 0.0)
    assert (
        step_energy(replay(timed, mlp, p, level=InterferenceLevel.NONE), mlp, p).tier_j["DRAM"] > 0
    )
    assert (
        step_energy(replay(weighted, mlp, p, level=InterferenceLevel.NONE), mlp, p).tier_j["DRAM"]
        == 0
    )
    assert t_timed < t_weighted
    assert cost(weighted, weight)[1] < cost(timed, weight)[1]


def test_energy_weight_needs_an_energy_model(mlp: Graph) -> None:
    with pytest.raises(TmsimError, match="has no energy model"):
        plan("static", mlp, _platform(None), PlanSettings(energy_weight_s_per_j=1.0))
    with pytest.raises(TmsimError, match="energy_weight_s_per_j must be a finite number >= 0"):
        PlanSettings(energy_weight_s_per_j=-1.0)


def test_host_kernels_pay_the_host_cpus_flops() -> None:
    """ZeRO-Offload runs the Adam steps on the host: their FLOPs at the host socket's price
    (52.6 pJ/FLOP in fp32), the device's kernels at the GPU's."""
    g = tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)
    p = tmsim.platform("h100-host-nvme")
    made = tmsim.plan(g, p, "zero-offload")
    assert made.host_kernels
    trace = replay(made, g, p)
    e = step_energy(trace, g, p)
    assert p.energy is not None
    on_host = set(made.host_kernels)
    expected = sum(
        k.flops * p.energy.j_per_flop(kernel_dtype(g, i), host=i in on_host)
        for i, k in enumerate(g.kernels)
    )
    assert e.compute_j == pytest.approx(expected)
    host_flops = sum(g.kernels[i].flops for i in on_host)
    assert host_flops > 0 and p.energy.j_per_flop("fp32", host=True) == pytest.approx(52.6 * PJ)


def test_a_runs_summary_carries_its_energy_and_wear(mlp: Graph) -> None:
    p = _platform()
    made = plan("all-slow", mlp, p, PlanSettings())
    run = tmsim.simulate(made, mlp, p, interference="none")
    assert run.energy is not None
    info = run.summary()
    assert info["energy_j"] == pytest.approx(step_energy(run.trace, mlp, p).total_j)
    assert sum(info["energy_parts_j"].values()) == pytest.approx(info["energy_j"])
    assert info["written_bytes"] == {"DRAM": 0, "PMM": 92}
    assert info["wear_years"]["PMM"] == pytest.approx(run.energy.wear_years["PMM"])
    bare = _platform(None)
    plain = tmsim.simulate(plan("all-slow", mlp, bare, PlanSettings()), mlp, bare)
    assert plain.energy is None and "energy_j" not in plain.summary()


def test_recomputes_pay_their_producers_flops() -> None:
    """A checkpointed step runs producers again: each recompute record costs its producer's
    FLOPs once more (ResNet-50 b2 on the Optane preset's fp32 price, 44.8 pJ/FLOP)."""
    g = tmsim.graph("resnet50", batch=2)
    p = tmsim.platform()
    made = tmsim.plan(g, p, "checkpoint")
    trace = replay(made, g, p)
    again = [r for r in trace.records if r.kind == "recompute"]
    assert again  # the plan recomputes, or the check below checks nothing
    producer = {t.name: int(k) for t, k in zip(g.tensors, g.producers, strict=True)}
    flops = g.flops + sum(g.kernels[producer[r.name]].flops for r in again)
    assert p.energy is not None
    e = step_energy(trace, g, p)
    assert e.compute_j == pytest.approx(flops * p.energy.j_per_flop("fp32"))
