"""The memory controller's PMM read weight, fitted to measured DRAM/PMM co-runs.

Data: PerMA-Bench (Benson, Papke, Rabl, VLDB 2022; artifact hpides/perma-bench, branch
``eval``, ``reference/dram-pmm-corun.md``): on one Cascade Lake socket (6 channels, each with a
DDR4 DIMM and a first-generation Optane PMM), a PMM thread group scanning sequentially with
4 KiB reads beside a DRAM thread group storing 64 B at random, and as a control the same
writers beside a DRAM sequential reader group. :data:`CORUNS` has every rate, in GB/s.

Model: the ``controller`` level's sharing rule (:func:`tmsim.sim.rates.shared_rates`, demand
arbitration, no priority: nothing writes to PMM) on one resource, the channels, of
:data:`CHANNEL_GBPS` (the machine's DRAM read at 16 threads, taken as the channels full).
Each group is a flow capped at its measured rate alone. A byte of DRAM read holds the channel
1 unit, a byte of PMM read ``pmm_read`` units, and a byte the writers store ``(1 +
dram_write) / efficiency`` units: a read for ownership and a write-back, ``dram_write`` being
the preset's DRAM write weight and ``efficiency`` the channel efficiency of random 64 B
accesses, a property of the benchmark fitted with ``pmm_read``.

Fit: least squares of the log ratio of modelled to measured co-run rates over the 16/16 row
(four rates); the 8/8 row is held out. :func:`fit` returns the free fit and the fit with
``pmm_read`` bounded by AutoTM's measured synchronous PMM -> DRAM copy, which must still reach
its rate alone (``channel / sync - dram_write``). ``python -m tmsim.calibration.controller_fit``
prints both with their errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hwmodels.platform import Platform
from tmsim.sim.rates import shared_rates

#: The PerMA machine's DRAM sequential read at 16 threads (GB/s): its channels, full.
CHANNEL_GBPS = 102.39


@dataclass(frozen=True)
class Corun:
    """One measured co-run (GB/s): group ``a`` and group ``b`` alone and together."""

    name: str
    a: str
    b: str
    a_alone: float
    b_alone: float
    a_together: float
    b_together: float


#: PerMA-Bench co-runs (reference/dram-pmm-corun.md): "pmm" scan vs DRAM "writers", and the
#: control, a DRAM "reader" vs the same writers, at 8 and 16 threads per group.
CORUNS = (
    Corun("8/8", "pmm", "writers", 29.94, 14.70, 20.18, 12.27),
    Corun("8/8 control", "reader", "writers", 85.65, 14.70, 68.24, 10.39),
    Corun("16/16", "pmm", "writers", 42.44, 25.60, 25.34, 12.42),
    Corun("16/16 control", "reader", "writers", 102.39, 25.60, 60.20, 16.60),
)
FITTED = ("16/16", "16/16 control")
HELD_OUT = ("8/8", "8/8 control")

#: Search grid: PMM read weight and writers' efficiency (deterministic, 0.01 and 0.005 steps).
PMM_READ_GRID = np.round(np.arange(1.0, 4.0 + 1e-9, 0.01), 2)
EFFICIENCY_GRID = np.round(np.arange(0.5, 1.0 + 1e-9, 0.005), 3)


@dataclass(frozen=True)
class Fit:
    """A fitted ``pmm_read`` and ``efficiency``, the RMS log error over the fitted rates, and
    per co-run the modelled rates together (GB/s, ``a`` then ``b``)."""

    pmm_read: float
    efficiency: float
    rms_log_error: float
    modelled: dict[str, tuple[float, float]]

    def errors(self, name: str) -> tuple[float, float]:
        """(modelled - measured) / measured of co-run ``name``'s two rates."""
        run = next(c for c in CORUNS if c.name == name)
        a, b = self.modelled[name]
        return (a - run.a_together) / run.a_together, (b - run.b_together) / run.b_together


def corun_rates(
    run: Corun, pmm_read: float, dram_write: float, efficiency: float, demand: bool = True
) -> tuple[float, float]:
    """The two groups' rates together (GB/s) under the model of the module documentation
    (``demand=False``: max-min arbitration instead)."""
    weight = {"pmm": pmm_read, "reader": 1.0, "writers": (1.0 + dram_write) / efficiency}
    caps = [run.a_alone, run.b_alone]
    uses = [[(0, weight[run.a] / CHANNEL_GBPS)], [(0, weight[run.b] / CHANNEL_GBPS)]]
    a, b = shared_rates(caps, uses, [1.0], demand=demand)
    return a, b


def _score(pmm_read: float, dram_write: float, efficiency: float) -> float:
    total = 0.0
    for run in CORUNS:
        if run.name in FITTED:
            a, b = corun_rates(run, pmm_read, dram_write, efficiency)
            total += math.log(a / run.a_together) ** 2 + math.log(b / run.b_together) ** 2
    return total


def fit(dram_write: float, pmm_read_max: float = math.inf) -> Fit:
    """The grid point of least squared log error on :data:`FITTED`, ``pmm_read`` at most
    ``pmm_read_max`` (ties: the smaller weight, then the smaller efficiency)."""
    best = (math.inf, 0.0, 0.0)
    for k in PMM_READ_GRID:
        if k > pmm_read_max:
            break
        for e in EFFICIENCY_GRID:
            score = _score(float(k), dram_write, float(e))
            if score < best[0]:
                best = (score, float(k), float(e))
    score, k, e = best
    n = 2 * len(FITTED)
    modelled = {run.name: corun_rates(run, k, dram_write, e) for run in CORUNS}
    return Fit(k, e, math.sqrt(score / n), modelled)


def sync_bound(platform: Platform, src: str = "PMM", dst: str = "DRAM") -> float:
    """The largest read weight of ``src`` at which ``platform``'s synchronous ``src`` ->
    ``dst`` copy still reaches its rate alone on the controller's channels."""
    ctl = platform.controller
    if ctl is None:
        raise ValueError(f"platform {platform.name!r} has no controller")
    w_dst = ctl.weight(dst)
    if w_dst is None:
        raise ValueError(f"tier {dst!r} is not behind the controller")
    sync = platform.copy_path(src, dst).sync_bw_bytes_per_s
    return ctl.bw_bytes_per_s / sync - w_dst.write


def main() -> None:
    from hwmodels.presets import load_preset

    platform = load_preset("cascadelake-optane")
    ctl = platform.controller
    assert ctl is not None
    dram = ctl.weight("DRAM")
    assert dram is not None
    bound = sync_bound(platform)
    fits = (("free", fit(dram.write)), (f"pmm_read <= {bound:.3f}", fit(dram.write, bound)))
    for label, got in fits:
        print(
            f"{label}: pmm_read {got.pmm_read:.2f}, efficiency {got.efficiency:.3f}, "
            f"RMS log error {got.rms_log_error:.3f}"
        )
        for run in CORUNS:
            ea, eb = got.errors(run.name)
            a, b = got.modelled[run.name]
            tag = "fitted" if run.name in FITTED else "held out"
            print(
                f"  {run.name:14s} {tag:8s} {run.a} {a:6.2f} ({run.a_together}, {ea:+.1%}), "
                f"{run.b} {b:6.2f} ({run.b_together}, {eb:+.1%})"
            )
    got = fits[1][1]
    for run in CORUNS:
        a, b = corun_rates(run, got.pmm_read, dram.write, got.efficiency, demand=False)
        print(f"  max-min {run.name:14s} {run.a} {a:6.2f}, {run.b} {b:6.2f}")


if __name__ == "__main__":
    main()


__all__ = ["CHANNEL_GBPS", "CORUNS", "Corun", "Fit", "corun_rates", "fit", "sync_bound"]
