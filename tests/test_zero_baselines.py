"""The runtime baselines as plans: ZeRO-Offload, ZeRO-Infinity (optimizer state on NVMe) and
PyTorch's save_on_cpu, on a small GPT-2 step (two blocks, 128 tokens) on the H100 with a
Sapphire Rapids host and an NVMe drive, and on GH200.

What the papers count per step, with Psi parameters in fp16 mixed precision with Adam (ZeRO,
Rajbhandari et al., SC'20: 2 + 2 + 12 bytes per parameter): ZeRO-Offload (Ren et al., ATC'21)
moves 2 Psi bytes of gradients to the host and 2 Psi bytes of updated weights back; the
optimizer state (12 Psi: fp32 master weights and two moments) stays on the host, or, for
ZeRO-Infinity (Rajbhandari et al., SC'21), is read from NVMe and written back, 12 Psi bytes
each way.
"""

from __future__ import annotations

import math
from functools import cache

import pytest
from tiny_graphs import MB, spill_step, tiny_step

import tmsim
from tmsim.errors import NoPlanError, TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.plans.files import plan_from_dict, plan_to_dict
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.sim import replay
from tmsim.sim.trace import HOST, KERNEL
from tmsim.strategies import applicable, compared_by_default
from tmsim.workload.graph import Graph, Phase, Role

H100 = tmsim.platform("h100-host-nvme")
GH200 = tmsim.platform("gh200")
RUNTIMES = ("zero-offload", "zero-infinity", "save-on-cpu")


@cache
def gpt2() -> Graph:
    return tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)


@cache
def made(name: str, where: str = "h100-host-nvme") -> Plan:
    platform = H100 if where == "h100-host-nvme" else GH200
    plan = tmsim.plan(gpt2(), platform, name)
    check = validate(plan, gpt2(), platform)
    assert check.ok, check.errors[:3]
    return plan


def params() -> int:
    """Psi: the elements of every weight the optimizer updates (GPT-2 ties its token table)."""
    g = gpt2()
    updated = {n for k in g.kernels if k.phase is Phase.UPDATE for n in k.updates}
    return sum(math.prod(t.shape) for t in g.tensors if t.role is Role.WEIGHT and t.name in updated)


def moved(plan: Plan, src: str, dst: str) -> int:
    return sum(
        gpt2().tensor(m.tensor).size_bytes for m in plan.moves if (m.src, m.dst) == (src, dst)
    )


def test_zero_offload_moves_four_bytes_per_parameter() -> None:
    plan, psi = made("zero-offload"), params()
    assert psi == 53_561_088  # 38.6M (tokens) + 0.8M (positions) + 2 blocks of 7.1M + norms
    assert moved(plan, "device", "host") == 2 * psi  # fp16 gradients down
    assert moved(plan, "host", "device") == 2 * psi  # updated fp16 weights up
    assert moved(plan, "nvme", "host") == moved(plan, "host", "nvme") == 0
    g = gpt2()
    adams = [k for k, kern in enumerate(g.kernels) if kern.op == "adam"]
    assert sorted(plan.host_kernels) == adams
    states = {t.name for t in g.tensors if t.role is Role.OPTIMIZER_STATE}
    assert {n for n, tiers in plan.initial_tiers.items() if tiers == ("host",)} == states
    for k in adams:  # the optimizer reads and writes host memory only
        assert set(plan.operand_tiers[k]) == {"host"}


def test_zero_offload_steps_the_optimizer_beside_the_backward_pass() -> None:
    plan, g = made("zero-offload"), gpt2()
    uncontended = replay(plan, g, H100, level=InterferenceLevel.NONE)
    assert uncontended.simulated_s == pytest.approx(plan.predicted_s, rel=1e-9)
    trace = replay(plan, g, H100)
    assert trace.simulated_s >= plan.predicted_s * (1 - 1e-9)
    device = [r for r in trace.records if r.kind == KERNEL]
    host = [r for r in trace.records if r.kind == HOST]
    assert len(host) == len(plan.host_kernels) and len(device) + len(host) == len(g.kernels)
    backward_end = max(r.end_s for r in device if r.phase == "backward")
    # steps of the parameters whose gradients come first end while the backward pass runs
    assert min(r.end_s for r in host) < backward_end
    assert trace.simulated_s == max(r.end_s for r in trace.records)


def test_zero_infinity_reads_and_writes_the_optimizer_state_on_nvme() -> None:
    plan, psi = made("zero-infinity"), params()
    assert moved(plan, "nvme", "host") == moved(plan, "host", "nvme") == 12 * psi
    assert moved(plan, "device", "host") == moved(plan, "host", "device") == 2 * psi
    g = gpt2()
    for t in g.tensors:
        if t.role is Role.OPTIMIZER_STATE:
            assert plan.initial_tiers[t.name] == ("nvme",)
    # the drive is half duplex: every byte read and written in turn, at its rates
    nvme_s = 12 * psi / 6.5e9 + 12 * psi / 3.5e9
    trace = replay(plan, g, H100)
    assert trace.simulated_s >= nvme_s
    assert trace.simulated_s == pytest.approx(nvme_s, rel=0.05)


def saved(g: Graph) -> set[str]:
    """Tensors made in the forward pass and read in the backward pass."""
    out = set()
    for i, t in enumerate(g.tensors):
        p = int(g.producers[i])
        later = (g.kernels[int(k)].phase for k in g.users(i))
        if p >= 0 and g.kernels[p].phase is Phase.FORWARD and Phase.BACKWARD in later:
            out.add(t.name)
    return out


def test_save_on_cpu_offloads_every_saved_activation_and_nothing_else() -> None:
    plan, g = made("save-on-cpu"), gpt2()
    down = {m.tensor for m in plan.moves if (m.src, m.dst) == ("device", "host")}
    up = {m.tensor for m in plan.moves if (m.src, m.dst) == ("host", "device")}
    assert down == up and not plan.host_kernels
    assert all(m.mode.value == "sync" for m in plan.moves)  # on the compute stream
    # every saved tensor but those read by the kernel right after their producer (the
    # loss's log-probabilities), which are never idle on the device
    kept = saved(g) - down
    assert kept == {"loss.logprobs"}
    assert len(down) > 30 and all(g.tensor(n).role is Role.ACTIVATION for n in down)
    # one pack per backward op that reads it and one unpack before each of them
    for name in down:
        readers = sum(
            g.kernels[int(k)].phase is Phase.BACKWARD for k in g.users(g.tensor_index(name))
        )
        packs = [m for m in plan.moves if m.tensor == name and m.dst == "host"]
        unpacks = sorted(m.kernel for m in plan.moves if m.tensor == name and m.dst == "device")
        assert len(packs) == len(unpacks) == readers
        backward = sorted(
            int(k)
            for k in g.users(g.tensor_index(name))
            if g.kernels[int(k)].phase is Phase.BACKWARD
        )
        assert unpacks == backward
    assert replay(plan, g, H100, level=InterferenceLevel.NONE).simulated_s == pytest.approx(
        plan.predicted_s, rel=1e-9
    )


def test_gh200_offloads_over_nvlink_c2c() -> None:
    plan, psi = made("zero-offload", "gh200"), params()
    assert moved(plan, "device", "host") == moved(plan, "host", "device") == 2 * psi
    assert made("zero-offload", "gh200").predicted_s < made("zero-offload").predicted_s
    made("save-on-cpu", "gh200")


def test_any_optimizer_step_goes_to_the_host() -> None:
    """A momentum SGD step (the CNN zoo's) as well as Adam: the weight is copied up after
    its update, its gradient down, its host copy updated in place."""
    g = tiny_step()
    plan = tmsim.plan(g, H100, "zero-offload")
    assert validate(plan, g, H100).ok and plan.host_kernels == (3,)
    assert {(m.tensor, m.src, m.dst) for m in plan.moves} == {
        ("g", "device", "host"),
        ("w", "host", "device"),
    }
    assert plan.initial_tiers["w"] == ("device", "host") and moved_mb(plan, g) == 40


def moved_mb(plan: Plan, g: Graph) -> int:
    return sum(g.tensor(m.tensor).size_bytes for m in plan.moves) // MB


def test_plans_survive_their_files() -> None:
    for name in RUNTIMES:
        plan = made(name)
        assert plan_from_dict(plan_to_dict(plan)) == plan


def test_where_the_baselines_apply() -> None:
    for p in (H100, GH200):
        assert set(RUNTIMES) <= set(applicable(p))
        # the ZeRO baselines by default where they apply; save_on_cpu by name only
        assert {"zero-offload", "zero-infinity"} <= set(compared_by_default(p))
        assert "save-on-cpu" not in compared_by_default(p)
    for name in ("rtx2080ti-pcie3", "cascadelake-optane", "h100-pcie5"):
        assert not set(RUNTIMES) & set(applicable(tmsim.platform(name)))
    with pytest.raises(TmsimError, match=r"'zero-offload' does not apply .* it needs a host CPU"):
        tmsim.plan(gpt2(), tmsim.platform("rtx2080ti-pcie3"), "zero-offload")
    with pytest.raises(TmsimError, match="zero-infinity: platform 'gh200' has no tier behind"):
        tmsim.plan(gpt2(), GH200, "zero-infinity")
    with pytest.raises(TmsimError, match="has no update phase"):
        tmsim.plan(spill_step(), H100, "zero-offload")


def test_a_plan_that_does_not_fit_is_a_row_error() -> None:
    with pytest.raises(NoPlanError, match="tier 'device' would hold"):
        tmsim.plan(gpt2(), H100, "zero-offload", fast="0.05GB")
    table = tmsim.compare(gpt2(), GH200, ["zero-offload", "zero-infinity"], fast="0.05GB")
    rows = {r["strategy"]: r for _, r in table.iterrows()}
    assert "would hold" in rows["zero-offload"]["error"]
    assert "no tier behind its host tier" in rows["zero-infinity"]["error"]
    assert not rows["zero-offload"]["valid"]
