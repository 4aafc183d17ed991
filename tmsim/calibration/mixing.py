"""Read/write mixing on Optane PMM: measured curves against the replay's ``controller`` level.

Data (checked, not fitted): the OptaneStudy repository (NVSL/OptaneStudy, Yang et al., FAST
2020, figure data), ``graphs/06-bandwidth_thmix.csv``, column ``PM-Optane`` (MB/s): 16
threads on Optane, ``r`` of them reading and ``16 - r`` writing, for r = 0, 2, ..., 16
(:data:`THREAD_MIX`). The series sits beside emulated-PM columns (PM-LDRAM, PM-RDRAM,
PM-PMEP), which places it with the earlier report of the same group (Izraelevitz et al.,
"Basic Performance Measurements of the Intel Optane DC Persistent Memory Module", arXiv
1903.05714, 2019). The measured curve rises steadily and concavely from the all-writer to the
all-reader end, above the straight line between them.

Model: the readers and the writers are two flows on the PMM tier of ``platform`` at the
``controller`` level (:class:`tmsim.sim.fluid.FluidModel`), each thread at the rate its group
reaches per thread at its pure end (the ends are measured; they are the model's only input),
so the curve shows what the mechanisms do to a mix: device time, channel time, device
switches and queueing delays. (Within one thread's own mix the cost model keeps the tier's mix
factor, fitted to the local mixes of Yang et al. Fig. 17, which do dip: 6.9 GB/s at 1:1
against 14.6 and 13.5 at the pure ends with 4 threads.)
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class MixPoint:
    """One split: threads, measured and modelled GB/s, and the straight line between the
    curve's pure ends (GB/s) at this split."""

    readers: int
    writers: int
    measured: float
    modelled: float
    line: float


def thread_mix(platform: Platform) -> list[MixPoint]:
    """The curve of :data:`THREAD_MIX` modelled on ``platform``'s PMM tier at the
    ``controller`` level (see the module documentation)."""
    names = platform.tier_names
    pmm = names.index("PMM")
    n_t = len(names)
    total = THREAD_MIX[0][1]
    read_per_thread = THREAD_MIX[-1][2] / total
    write_per_thread = THREAD_MIX[0][2] / total
    out = []
    for readers, writers, measured in THREAD_MIX:
        size = 1e15
        flows = []
        for threads, per_thread, read in (
            (readers, read_per_thread, True),
            (writers, write_per_thread, False),
        ):
            if threads == 0:
                continue
            r, w = [0.0] * n_t, [0.0] * n_t
            (r if read else w)[pmm] = size
            cap = threads * per_thread * GB
            flows.append(Flow(size, tuple(r), tuple(w), cap, writers=threads))
        rates = rates_at_start(
            platform.tiers,
            flows,
            controllers=platform.controller_groups(),
            channel=ChannelUse.of(platform),
        )
        got = sum(rates) / GB
        line = readers * read_per_thread + writers * write_per_thread
        out.append(MixPoint(readers, writers, measured, got, line))
    return out


__all__ = ["THREAD_MIX", "MixPoint", "thread_mix"]
