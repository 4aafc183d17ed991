"""Read/write mixing on Optane PMM: the write overlap, fitted to a measured thread-mix curve.

Data (fitted): the OptaneStudy repository (NVSL/OptaneStudy, figure data of Izraelevitz et
al., "Basic Performance Measurements of the Intel Optane DC Persistent Memory Module", arXiv
1903.05714, 2019, and Yang et al., FAST 2020), ``graphs/06-bandwidth_thmix.csv``, column
``PM-Optane`` (MB/s): 16 threads on Optane, ``r`` of them reading and ``16 - r`` writing, for
r = 0, 2, ..., 16 (:data:`THREAD_MIX`). Against the straight line between its pure ends the
measured curve lies above on the write-heavy side (+2% to +9% at 4 to 8 readers) and below on
the read-heavy side (-4% to -16% at 10 to 14 readers): a few readers beside many writers use
media the writers leave idle, a few writers among many readers cost the readers more than
their own bytes.

Model: the replay's ``controller`` level (:class:`tmsim.sim.fluid.FluidModel`) on the curve's
machine (:func:`machine`): the PMM tier of ``platform`` with its read bandwidth at the curve's
pure-read end and its write bandwidth at the pure-write end for 16 writers (its many-writer
falloff kept), behind the platform's controller with channels scaled by the same ratio as the
PMM reads (assumed: the curve's machine has fewer DIMMs of the same socket). Each reader is
capped at the pure-read end's rate per thread (assumed: 16 readers are bound by the requests
they keep in flight), each writer at Yang et al.'s one-thread ntstore rate (4.13 GB/s, Fig. 4,
``reference/optane-study/04-bandwidth_thcount_optane.csv``, measured). The readers and the
writers are two flows; the controller's mechanisms (queue arbitration, switches, queueing
delays) are those :mod:`tmsim.calibration.channel_fit` fitted to the PerMA-Bench co-runs, not
refitted here.

Free parameter: the tier's ``write_overlap`` (:class:`hwmodels.tiers.Interference`), the share
of a write's device time that readers may use while it drains from the DIMM's write buffer.
Fit: the least RMS log error of modelled against measured totals at the seven mixed splits
(:func:`fit`, a bounded scalar search, deterministic). 0 (reads and writes take the device in
turn, the queue favouring the writers) puts the splits of 4 to 12 readers 9% to 17% below
their measurements.

(Within one flow's own mix the cost model keeps the tier's mix factor, fitted to the local
mixes of Yang et al. Fig. 17, which do dip: 6.9 GB/s at 1:1 against 14.6 and 13.5 at the pure
ends with 4 threads.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scipy.optimize import minimize_scalar

from hwmodels.platform import Platform
from tmsim.sim.flows import Flow
from tmsim.sim.fluid import rates_at_start
from tmsim.sim.rates import ChannelUse

GB = 1e9

#: 06-bandwidth_thmix.csv, PM-Optane: (reader threads, writer threads, GB/s).
THREAD_MIX = (
    (0, 16, 3.8929),
    (2, 14, 4.6987),
    (4, 12, 5.7064),
    (6, 10, 7.0114),
    (8, 8, 7.7403),
    (10, 6, 7.8562),
    (12, 4, 8.2985),
    (14, 2, 8.3259),
    (16, 0, 10.7146),
)

#: Yang et al. FAST 2020, Fig. 17 (``reference/optane-study/17-numa.csv``, column Optane-4):
#: 4 threads on local Optane, each mixing reads and writes: (read fraction, GB/s). The mix
#: factor of the tier was fitted to these (its TOML says how).
LOCAL_MIX = (
    (1.0, 14.61962891),
    (4 / 5, 13.84111328),
    (3 / 4, 12.74951172),
    (2 / 3, 10.40605469),
    (1 / 2, 6.898730469),
    (0.0, 13.50947266),
)

#: Yang et al. FAST 2020, Fig. 4: one thread's ntstore rate on Optane (GB/s, measured).
WRITER_GBPS = 4.13

#: The result of :func:`fit` on ``cascadelake-optane`` (2 digits), which its preset keeps.
FITTED_OVERLAP = 0.23


@dataclass(frozen=True)
class MixPoint:
    """One split: threads, measured and modelled GB/s, the modelled readers' GB/s, and the
    straight line between the curve's pure ends (GB/s) at this split."""

    readers: int
    writers: int
    measured: float
    modelled: float
    readers_gbps: float
    line: float


def machine(platform: Platform, overlap: float | None = None) -> Platform:
    """The curve's machine (see the module documentation) from ``platform``, with the PMM
    tier's ``write_overlap`` set to ``overlap`` (None: kept). Raises ``ValueError`` if the
    platform has no memory controller, :class:`hwmodels.errors.HardwareModelError` if it has
    no PMM tier or ``overlap`` lies outside [0, 1]."""
    ctl = platform.controller
    if ctl is None:
        raise ValueError(f"platform {platform.name!r} has no memory controller")
    pmm = platform.tier("PMM")
    read_bw = THREAD_MIX[-1][2] * GB
    writers = THREAD_MIX[0][1]
    write_bw = THREAD_MIX[0][2] * GB * float(pmm.interference.write_slowdown(writers))
    inter = pmm.interference
    if overlap is not None:
        inter = replace(inter, write_overlap=overlap)
    tier = replace(
        pmm, read_bw_bytes_per_s=read_bw, write_bw_bytes_per_s=write_bw, interference=inter
    )
    scale = read_bw / pmm.read_bw_bytes_per_s
    tiers = tuple(tier if t.name == "PMM" else t for t in platform.tiers)
    return replace(
        platform, tiers=tiers, controller=replace(ctl, bw_bytes_per_s=ctl.bw_bytes_per_s * scale)
    )


def group_gbps(platform: Platform, groups: Sequence[tuple[str, bool, int, float]]) -> list[float]:
    """The GB/s of thread groups moving together on ``platform``'s ``controller`` level, each
    ``(tier, reads, threads, cap in GB/s)``: one flow that reads (``reads``) or writes the
    tier, its threads as its writers; a group of no threads moves nothing (0)."""
    names = platform.tier_names
    size = 1e15
    flows = []
    for tier, reads, threads, cap_gbps in groups:
        if threads == 0:
            continue
        moved = [0.0] * len(names)
        moved[names.index(platform.tier(tier).name)] = size  # the tier must exist
        none = (0.0,) * len(names)
        read, write = (tuple(moved), none) if reads else (none, tuple(moved))
        flows.append(Flow(size, read, write, cap_gbps * GB, writers=threads))
    rates = iter(
        rates_at_start(
            platform.tiers,
            flows,
            controllers=platform.controller_groups(),
            channel=ChannelUse.of(platform),
        )
    )
    return [next(rates) / GB if g[2] else 0.0 for g in groups]


def thread_mix(platform: Platform, overlap: float | None = None) -> list[MixPoint]:
    """The curve of :data:`THREAD_MIX` modelled on :func:`machine` ``(platform, overlap)``."""
    mach = machine(platform, overlap)
    total = THREAD_MIX[0][1]
    read_per_thread = THREAD_MIX[-1][2] / total
    write_per_thread = THREAD_MIX[0][2] / total
    out = []
    for readers, writers, measured in THREAD_MIX:
        read_gbps, write_gbps = group_gbps(
            mach,
            (
                ("PMM", True, readers, readers * read_per_thread),
                ("PMM", False, writers, writers * WRITER_GBPS),
            ),
        )
        line = readers * read_per_thread + writers * write_per_thread
        out.append(MixPoint(readers, writers, measured, read_gbps + write_gbps, read_gbps, line))
    return out


@dataclass(frozen=True)
class SplitPoint:
    """One split of 16 reader threads between DRAM and PMM: threads on each, the modelled
    GB/s of each group, and the straight line between the split's pure ends (GB/s)."""

    dram_threads: int
    pmm_threads: int
    dram_gbps: float
    pmm_gbps: float
    line: float

    @property
    def total(self) -> float:
        """Both groups' GB/s together."""
        return self.dram_gbps + self.pmm_gbps


def reader_split(platform: Platform, threads: int = 16) -> list[SplitPoint]:
    """``threads`` readers split between DRAM and PMM (2 at a time) on ``platform``'s
    ``controller`` level, each group offered more than the machine can give, so that only
    the devices and the channels' mechanisms hold it. No measurement exists for this curve
    (no co-run puts DRAM readers beside PMM readers); it checks that the mechanisms fitted to
    other mixes do not make one up: the bus does not turn around between two devices' reads,
    so only the channel time a PMM byte holds (its weight) and the queue shares shape it.
    Raises :class:`hwmodels.errors.HardwareModelError` if a DRAM or PMM tier is missing."""
    offered_gbps = 1e6
    splits = range(0, threads + 1, 2)
    rates = [
        group_gbps(
            platform, (("DRAM", True, d, offered_gbps), ("PMM", True, threads - d, offered_gbps))
        )
        for d in splits
    ]
    pure_pmm, pure_dram = rates[0][1], rates[-1][0]
    return [
        SplitPoint(d, threads - d, a, b, pure_pmm + (pure_dram - pure_pmm) * d / threads)
        for d, (a, b) in zip(splits, rates, strict=True)
    ]


def local_mix(platform: Platform) -> list[tuple[float, float, float]]:
    """:data:`LOCAL_MIX` modelled: (read fraction, measured GB/s, modelled GB/s), the PMM
    tier of ``platform`` at the figure's pure-mode rates (its read and write ends) with its
    mix factor and 4 writers (:meth:`hwmodels.tiers.MemoryTier.effective_bw_bytes_per_s`).
    Raises :class:`hwmodels.errors.HardwareModelError` if it has no PMM tier."""
    ends = dict(LOCAL_MIX)
    tier = replace(
        platform.tier("PMM"),
        read_bw_bytes_per_s=ends[1.0] * GB,
        write_bw_bytes_per_s=ends[0.0] * GB,
    )
    return [
        (f, gbps, float(tier.effective_bw_bytes_per_s(f, n_writers=4)) / GB)
        for f, gbps in LOCAL_MIX
    ]


def rms_log_error(points: list[MixPoint]) -> float:
    """RMS of ``log(modelled / measured)`` over the mixed splits (both groups present)."""
    mixed = [p for p in points if p.readers and p.writers]
    return math.sqrt(sum(math.log(p.modelled / p.measured) ** 2 for p in mixed) / len(mixed))


def fit(platform: Platform) -> float:
    """The ``write_overlap`` in [0, 1] with the least :func:`rms_log_error` on ``platform``
    (bounded scalar search to 1e-4; deterministic)."""
    got = minimize_scalar(
        lambda o: rms_log_error(thread_mix(platform, float(o))),
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-4},
    )
    return float(got.x)


def main() -> None:
    from hwmodels.presets import load_preset
    from tmsim.calibration.channel_fit import calibrated

    platform = calibrated(load_preset("cascadelake-optane"))
    overlap = fit(platform)
    points = thread_mix(platform, overlap)
    print(f"write_overlap {overlap:.3f}; RMS log error {rms_log_error(points):.3f}")
    for p in points:
        print(
            f"  {p.readers:2d}/{p.writers:2d}: {p.modelled:5.2f} GB/s (measured {p.measured:5.2f},"
            f" {p.modelled / p.measured - 1:+.1%}; line {p.line:5.2f})"
        )


if __name__ == "__main__":
    main()


__all__ = [
    "FITTED_OVERLAP",
    "LOCAL_MIX",
    "THREAD_MIX",
    "WRITER_GBPS",
    "MixPoint",
    "SplitPoint",
    "fit",
    "group_gbps",
    "local_mix",
    "machine",
    "reader_split",
    "rms_log_error",
    "thread_mix",
]
