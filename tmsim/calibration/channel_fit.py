"""The memory controller's channel mechanisms, fitted to measured DRAM/PMM co-runs.

Data (:data:`CORUNS`, GB/s): every row of ``reference/dram-pmm-corun.md``, from the artifact of
PerMA-Bench (Benson, Papke, Rabl, VLDB 2022; hpides/perma-bench, branch ``eval``). On one
Cascade Lake socket (6 channels, each with a DDR4 DIMM and a first-generation Optane PMM) a
thread group on PMM (sequential 4 KiB or 256 B reads, or sequential 512 B or 64 B
non-temporal writes) runs beside a group of DRAM writers (random 64 B ordinary stores), and as
controls a DRAM sequential reader group or a DRAM non-temporal writer group beside the same
writers; each group's rate is measured alone and together. Of the 25 rows, 22 give both sides
and three (one DRAM reader beside 1, 8 or 16 writers) only the reader's.

Model: the replay's ``controller`` level itself (:class:`tmsim.sim.fluid.FluidModel` with a
:class:`hwmodels.controller.MemoryController` arbitrating by ``"queue"``). Each group is one
flow, capped at its rate alone, with its threads as its writers; its bytes per byte of
progress (:data:`TRAFFIC`):

- DRAM reader: a DRAM read; DRAM non-temporal writer: a DRAM write;
- DRAM writers (random 64 B stores): a read for ownership and a write-back per byte stored,
  at the channel efficiency ``store_efficiency`` of random 64 B accesses (a property of the
  benchmark, fitted with the mechanism);
- PMM scan: a PMM read; PMM log: a PMM write.

The channels carry :data:`CHANNEL_GBPS` of DRAM reads. DRAM bytes have the preset's weights
(read 1, write 1.362: Yang et al. FAST 2020, Fig. 4, 104.6 / 76.8), which are not refitted.
The tiers' devices never bind (each group's cap is what its devices gave it alone), so the
fit sees only the channel's mechanisms. Free parameters (:data:`PARAMETERS`, each with a
physical meaning in :class:`hwmodels.controller.BusWeight`): the PMM read and write weights,
the PMM switch cost, the requests a thread keeps queued (DRAM writes, PMM reads, PMM writes;
a DRAM reader's is the unit), the queueing delays (DRAM, PMM reads, PMM writes), and the
store efficiency: ten numbers for 47 measured rates.

Fit: least squares of the log ratio of modelled to measured rates together, over every row,
plus, weighted three times, the rate each group reaches alone (the channel must not hold a
group below what it measured alone: a PMM read weight above 102.39 / 42.44 would), by
:func:`scipy.optimize.least_squares` (deterministic). The PMM queue shares are weakly
identified (above about 1.5 a PMM reader's moves no row), so a weak prior pulls every queue
share toward 1 (:data:`QUEUE_PRIOR`), and :func:`fit_from_starts` runs the fit from
:data:`START` with each pair of first guesses for them in :data:`QUEUE_STARTS` and keeps the
best (eight of the nine reach the same point). The fitted values are :data:`FITTED`;
``python -m tmsim.calibration.channel_fit`` refits (about four minutes on two cores) and
prints every row.

Checked, not fitted: AutoTM's synchronous PMM -> DRAM copy (29 GB/s measured on Yang's
machine, ``copy_check``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from hwmodels.controller import BusWeight, MemoryController
from hwmodels.platform import Platform
from hwmodels.tiers import MemoryTier
from tmsim.sim.flows import Flow
from tmsim.sim.fluid import rates_at_start
from tmsim.sim.rates import ChannelUse

GB = 1e9

#: The PerMA machine's DRAM sequential read at 16 threads (GB/s): its channels, full.
CHANNEL_GBPS = 102.39

#: DRAM bus weights, from the preset (Yang et al. FAST 2020, Fig. 4): read 1, write 104.6 / 76.8.
DRAM_READ_WEIGHT = 1.0
DRAM_WRITE_WEIGHT = 1.362


@dataclass(frozen=True)
class Corun:
    """One measured co-run (GB/s): group ``a`` (``a_kind``, ``a_threads``) beside group ``b``,
    alone and together; ``b_together`` None where only ``a`` was reported."""

    name: str
    a_kind: str
    a_threads: int
    b_kind: str
    b_threads: int
    a_alone: float
    b_alone: float
    a_together: float
    b_together: float | None


#: What each kind of group moves per byte of its progress: (tier, read bytes, write bytes).
TRAFFIC: dict[str, tuple[tuple[str, float, float], ...]] = {
    "dram-read": (("DRAM", 1.0, 0.0),),
    "dram-store": (("DRAM", 1.0, 1.0),),
    "dram-ntstore": (("DRAM", 0.0, 1.0),),
    "pmm-read": (("PMM", 1.0, 0.0),),
    "pmm-ntstore": (("PMM", 0.0, 1.0),),
}

_S = "dram-store"
#: reference/dram-pmm-corun.md, every row. The 256 B scan and 64 B log rows give no rate
#: alone of their own; the 256 B scan takes the 4 KiB scan's (the page: "within a few
#: percent"), the 64 B log its own measured 5.31.
CORUNS = (
    Corun("scan 1/1", "pmm-read", 1, _S, 1, 4.26, 1.98, 3.95, 1.97),
    Corun("scan 1/8", "pmm-read", 1, _S, 8, 4.26, 14.70, 2.49, 14.29),
    Corun("scan 1/16", "pmm-read", 1, _S, 16, 4.26, 25.60, 2.31, 24.81),
    Corun("scan 8/8", "pmm-read", 8, _S, 8, 29.94, 14.70, 20.18, 12.27),
    Corun("scan 8/16", "pmm-read", 8, _S, 16, 29.94, 25.60, 16.18, 18.84),
    Corun("scan 16/8", "pmm-read", 16, _S, 8, 42.44, 14.70, 29.59, 6.67),
    Corun("scan 16/16", "pmm-read", 16, _S, 16, 42.44, 25.60, 25.34, 12.42),
    Corun("scan 256 B 16/16", "pmm-read", 16, _S, 16, 42.44, 25.60, 24.11, 12.67),
    Corun("control 1/1", "dram-read", 1, _S, 1, 12.81, 1.98, 12.74, None),
    Corun("control 1/8", "dram-read", 1, _S, 8, 12.81, 14.70, 11.62, None),
    Corun("control 1/16", "dram-read", 1, _S, 16, 12.81, 25.60, 9.98, None),
    Corun("control 8/8", "dram-read", 8, _S, 8, 85.65, 14.70, 68.24, 10.39),
    Corun("control 8/16", "dram-read", 8, _S, 16, 85.65, 25.60, 43.91, 20.09),
    Corun("control 16/8", "dram-read", 16, _S, 8, 102.39, 14.70, 79.63, 8.73),
    Corun("control 16/16", "dram-read", 16, _S, 16, 102.39, 25.60, 60.20, 16.60),
    Corun("log 8/8", "pmm-ntstore", 8, _S, 8, 16.76, 14.70, 12.66, 12.81),
    Corun("log 8/16", "pmm-ntstore", 8, _S, 16, 16.76, 25.60, 11.89, 21.50),
    Corun("log 16/8", "pmm-ntstore", 16, _S, 8, 16.79, 14.70, 15.37, 12.22),
    Corun("log 16/16", "pmm-ntstore", 16, _S, 16, 16.79, 25.60, 15.27, 20.43),
    Corun("log 1/16", "pmm-ntstore", 1, _S, 16, 2.39, 25.60, 2.18, 24.75),
    Corun("log 64 B 16/16", "pmm-ntstore", 16, _S, 16, 5.31, 25.60, 5.18, 24.89),
    Corun("nt control 8/8", "dram-ntstore", 8, _S, 8, 19.54, 14.70, 19.20, 13.41),
    Corun("nt control 8/16", "dram-ntstore", 8, _S, 16, 19.54, 25.60, 17.06, 22.53),
    Corun("nt control 16/8", "dram-ntstore", 16, _S, 8, 37.13, 14.70, 35.45, 11.86),
    Corun("nt control 16/16", "dram-ntstore", 16, _S, 16, 37.13, 25.60, 30.77, 20.04),
)

#: Groups whose rate alone the fit holds the model to (kind, threads, GB/s): the largest of
#: each kind in :data:`CORUNS`.
ALONE = (
    ("pmm-read", 16, 42.44),
    ("dram-read", 16, 102.39),
    (_S, 16, 25.60),
    ("pmm-ntstore", 16, 16.79),
    ("dram-ntstore", 16, 37.13),
)

#: The free parameters, in the order of :data:`START` and :data:`FITTED`.
PARAMETERS = (
    "store_efficiency",
    "pmm_read",
    "pmm_write",
    "pmm_switch",
    "dram_write_queue",
    "pmm_read_queue",
    "pmm_write_queue",
    "dram_delay",
    "pmm_read_delay",
    "pmm_write_delay",
)

#: The queue shares, which a weak prior pulls toward 1 (one thread, one queue of requests).
QUEUE_SHARES = ("dram_write_queue", "pmm_read_queue", "pmm_write_queue")

#: The prior's weight: residuals ``QUEUE_PRIOR * log(share)`` join the data's in the least
#: squares (assumed). The PMM queue shares are weakly identified: a PMM reader's above about
#: 1.5 moves no row (its groups are held by their rates alone), so without the prior the fit
#: drifts along it and stops anywhere up to 10, where queue arbitration would hand a PMM
#: reader with no such limit most of a channel. Small enough to cost the data's RMS log
#: error less than 0.001.
QUEUE_PRIOR = 0.01

#: Where the fit starts (assumed first guesses): efficiency 0.85; PMM read weight 102.39 /
#: 42.44 (the largest the scan alone allows) rounded down; PMM write weight 3; no switch
#: cost; every queue share 1 (one thread, one queue of requests); queueing delays 0.3 of an
#: idle latency per unit of load for DRAM and 1 for PMM reads (their idle latency is about
#: twice DRAM's: Yang et al. Fig. 2, 169 against 81 ns), 0.3 for posted PMM writes.
START = (0.85, 2.4, 3.0, 0.0, 1.0, 1.0, 1.0, 0.3, 1.0, 0.3)

#: First guesses for the PMM (read, write) queue shares :func:`fit_from_starts` tries, the
#: rest of :data:`START` kept: a grid around one request per thread.
QUEUE_STARTS = tuple((r, w) for r in (0.5, 1.0, 2.0) for w in (0.5, 1.0, 2.0))
LOWER = (0.3, 1.0, 1.0, 0.0, 0.05, 0.05, 0.05, 0.0, 0.0, 0.0)
UPPER = (1.0, 8.0, 10.0, 10.0, 10.0, 10.0, 10.0, 5.0, 10.0, 5.0)

#: The result of :func:`fit_from_starts` (rounded to 3 digits), as the mechanism's defaults
#: use it; it is :func:`fit` from :data:`BEST_START`.
FITTED = (0.832, 2.433, 2.423, 1.946, 0.483, 1.389, 0.866, 0.314, 1.11, 0.189)

#: The first guess of :data:`QUEUE_STARTS` the best fit came from.
BEST_START = (0.85, 2.4, 3.0, 0.0, 1.0, 2.0, 0.5, 0.3, 1.0, 0.3)

#: The share of rows with both sides within this relative error is the headline number.
TOLERANCE = 0.15


def controller(params: Sequence[float], channel_gbps: float = CHANNEL_GBPS) -> MemoryController:
    """The memory controller ``params`` (in the order of :data:`PARAMETERS`) describe, with
    channels of ``channel_gbps`` GB/s of DRAM reads."""
    p = dict(zip(PARAMETERS, params, strict=True))
    dram = BusWeight(
        "DRAM",
        DRAM_READ_WEIGHT,
        DRAM_WRITE_WEIGHT,
        write_queue=p["dram_write_queue"],
        read_delay=p["dram_delay"],
        write_delay=p["dram_delay"],
    )
    pmm = BusWeight(
        "PMM",
        p["pmm_read"],
        p["pmm_write"],
        switch=p["pmm_switch"],
        read_queue=p["pmm_read_queue"],
        write_queue=p["pmm_write_queue"],
        read_delay=p["pmm_read_delay"],
        write_delay=p["pmm_write_delay"],
    )
    return MemoryController(
        channel_gbps * GB,
        (dram, pmm),
        arbitration="queue",
        source="tmsim.calibration.channel_fit: PerMA-Bench co-runs (VLDB 2022)",
    )


def _tiers() -> tuple[MemoryTier, MemoryTier]:
    # Devices that never bind: each group's cap is what its devices gave it alone.
    big = 1e4 * GB
    return (
        MemoryTier("DRAM", 2**40, big, big),
        MemoryTier("PMM", 2**40, big, big),
    )


def _flow(kind: str, threads: int, cap_gbps: float, efficiency: float) -> Flow:
    read, write = [0.0, 0.0], [0.0, 0.0]
    size = 1e15
    for tier, r, w in TRAFFIC[kind]:
        t = 0 if tier == "DRAM" else 1
        read[t] += r * size
        write[t] += w * size
    eff = efficiency if kind == "dram-store" else 1.0
    return Flow(size, tuple(read), tuple(write), cap_gbps * GB, writers=threads, efficiency=eff)


def group_rates(params: Sequence[float], groups: Sequence[tuple[str, int, float]]) -> list[float]:
    """The rates (GB/s) of ``groups`` (kind, threads, rate alone in GB/s) running together at
    the replay's ``controller`` level under ``params``."""
    p = dict(zip(PARAMETERS, params, strict=True))
    channel = ChannelUse.of_controller(("DRAM", "PMM"), controller(params))
    flows = [_flow(k, n, alone, p["store_efficiency"]) for k, n, alone in groups]
    return [r / GB for r in rates_at_start(_tiers(), flows, channel=channel)]


def modelled(params: Sequence[float], run: Corun) -> tuple[float, float]:
    """Both groups' modelled rates together (GB/s)."""
    a, b = group_rates(
        params,
        ((run.a_kind, run.a_threads, run.a_alone), (run.b_kind, run.b_threads, run.b_alone)),
    )
    return a, b


def _residuals(params: Sequence[float]) -> np.ndarray:
    out = []
    for run in CORUNS:
        a, b = modelled(params, run)
        out.append(math.log(a / run.a_together))
        if run.b_together is not None:
            out.append(math.log(b / run.b_together))
    for kind, threads, alone in ALONE:
        (got,) = group_rates(params, ((kind, threads, alone),))
        out.append(3.0 * math.log(got / alone))
    return np.asarray(out)


@dataclass(frozen=True)
class Fit:
    """Fitted parameters (:data:`PARAMETERS` order), the RMS log error over every fitted
    rate, and per co-run the modelled rates together (GB/s, ``a`` then ``b``)."""

    params: tuple[float, ...]
    rms_log_error: float
    rows: dict[str, tuple[float, float]]

    def errors(self, name: str) -> tuple[float, float | None]:
        """(modelled - measured) / measured of co-run ``name``'s rates (None: not measured)."""
        run = next(c for c in CORUNS if c.name == name)
        a, b = self.rows[name]
        eb = None if run.b_together is None else (b - run.b_together) / run.b_together
        return (a - run.a_together) / run.a_together, eb

    def within(self, tolerance: float = TOLERANCE) -> int:
        """Rows whose every measured side is within ``tolerance`` (relative)."""
        return sum(
            all(e is None or abs(e) <= tolerance for e in self.errors(run.name)) for run in CORUNS
        )


def evaluate(params: Sequence[float]) -> Fit:
    """The model at ``params`` on every co-run row."""
    res = _residuals(params)
    rows = {run.name: modelled(params, run) for run in CORUNS}
    return Fit(tuple(float(x) for x in params), float(np.sqrt(np.mean(res**2))), rows)


def _objective(params: Sequence[float]) -> np.ndarray:
    """The residuals the fit minimises: the data's (:func:`_residuals`), then the prior's,
    :data:`QUEUE_PRIOR` times the log of each queue share."""
    shares = [params[PARAMETERS.index(name)] for name in QUEUE_SHARES]
    return np.concatenate([_residuals(params), QUEUE_PRIOR * np.log(shares)])


def fit(start: Sequence[float] = START) -> Fit:
    """Least squares from ``start`` (see the module documentation); deterministic."""
    got = least_squares(_objective, np.asarray(start, dtype=float), bounds=(LOWER, UPPER))
    return evaluate(tuple(float(x) for x in got.x))


def fit_from_starts() -> Fit:
    """The best :func:`fit` (least RMS log error; the first on a tie) from :data:`START` with
    each pair of PMM queue shares of :data:`QUEUE_STARTS` (see the module documentation)."""
    i_read, i_write = PARAMETERS.index("pmm_read_queue"), PARAMETERS.index("pmm_write_queue")
    best: Fit | None = None
    for read, write in QUEUE_STARTS:
        start = list(START)
        start[i_read], start[i_write] = read, write
        got = fit(start)
        if best is None or got.rms_log_error < best.rms_log_error:
            best = got
    assert best is not None
    return best


def copy_check(
    params: Sequence[float] = FITTED, channel_gbps: float = 104.6, pmm_read_gbps: float = 37.6
) -> float:
    """The rate (GB/s) a many-threaded PMM -> DRAM copy reaches alone under ``params`` on Yang
    et al.'s machine (channels of 104.6 GB/s, PMM read 37.6 GB/s: FAST 2020, Fig. 4): the
    channels and the PMM read bandwidth bound it. AutoTM measured 29 GB/s
    (``cpu_pmem_dram_sync``) on a Cascade Lake machine of the same kind."""
    ctl = controller(params, channel_gbps)
    ch = ChannelUse.of_controller(("DRAM", "PMM"), ctl)
    size = 1e15
    copy = Flow(size, (0.0, size), (size, 0.0), pmm_read_gbps * GB, writers=24)
    return rates_at_start(_tiers(), [copy], channel=ch)[0] / GB


def calibrated(platform: Platform, params: Sequence[float] = FITTED) -> Platform:
    """``platform`` with its memory controller replaced by the fitted mechanisms (``params``)
    at its own channel bandwidth and channels (each tier on the channels it was on), no write
    priority and ``"queue"`` arbitration. Raises
    ``ValueError`` if it has no controller; :class:`hwmodels.errors.HardwareModelError` if
    it lacks a DRAM or PMM tier."""
    ctl = platform.controller
    if ctl is None:
        raise ValueError(f"platform {platform.name!r} has no memory controller")
    fitted = controller(params, ctl.bw_bytes_per_s / GB)
    weights = tuple(
        replace(w, channels=old.channels) if (old := ctl.weight(w.tier)) is not None else w
        for w in fitted.weights
    )
    fitted = replace(
        fitted, weights=weights, channels=ctl.channels, source=f"{fitted.source}; {ctl.source}"
    )
    return replace(platform, controller=fitted)


def main() -> None:
    got = fit_from_starts()
    print("fitted:", ", ".join(f"{n} {v:.3f}" for n, v in zip(PARAMETERS, got.params, strict=True)))
    print(f"RMS log error {got.rms_log_error:.3f}; rows within 15%: {got.within()}/{len(CORUNS)}")
    for run in CORUNS:
        a, b = got.rows[run.name]
        ea, eb = got.errors(run.name)
        side_b = "" if eb is None else f"{b:6.2f} ({run.b_together}, {eb:+.1%})"
        print(f"  {run.name:18s} {a:6.2f} ({run.a_together}, {ea:+.1%})  {side_b}")
    print(f"AutoTM sync PMM -> DRAM copy: {copy_check(got.params):.1f} GB/s (measured 29)")


if __name__ == "__main__":
    main()


__all__ = [
    "ALONE",
    "BEST_START",
    "CHANNEL_GBPS",
    "CORUNS",
    "FITTED",
    "PARAMETERS",
    "QUEUE_PRIOR",
    "QUEUE_SHARES",
    "QUEUE_STARTS",
    "START",
    "TOLERANCE",
    "Corun",
    "Fit",
    "calibrated",
    "controller",
    "copy_check",
    "evaluate",
    "fit",
    "fit_from_starts",
    "group_rates",
    "modelled",
]
