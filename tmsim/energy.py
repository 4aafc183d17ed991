"""What a replayed step costs in energy, and how long each rated device lasts at its pace.

:func:`step_energy` charges a :class:`~tmsim.sim.trace.Trace` (of a plan's replay, or of a
2LM replay: both carry the bytes each record reads and writes on each tier) with the
platform's :class:`~hwmodels.energy.Energy`:

- compute: every kernel's FLOPs, and those of every recompute, at the J per FLOP of the
  dtype the kernel computes in (:func:`tmsim.kernelwork.kernel_dtype`), on the host CPU's prices
  for the kernels it runs (``host`` records);
- memory: the bytes every record reads and writes on each tier, at that tier's J per byte;
- links: the bytes every move carries from its source to its destination, at the copy
  path's J per byte (beside the read at one end and the write at the other, charged above),
  and the bytes kernels read and write on a tier they reach through a kernel link (a GPU
  loading host memory over NVLink-C2C), at the J per byte of the copy paths between that
  tier and the fastest one, the device's own (:func:`byte_prices`);
- static: what the compute device and each tier draw for the step's simulated time.

Wear: the bytes written on each tier whose endurance is rated, and the years until steps
run back to back write its rated bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hwmodels import Platform
from tmsim.errors import TmsimError
from tmsim.kernelwork import kernel_dtype
from tmsim.sim.trace import HOST, KERNEL, MOVES, RECOMPUTE, Trace
from tmsim.workload.graph import Graph


@dataclass(frozen=True)
class StepEnergy:
    """One step's energy in joules, by part, and the wear of the rated devices.

    ``tier_j`` and ``written_bytes`` are keyed by tier name (every tier), ``link_j`` by
    ``"src->dst"`` (the pairs some move used), ``wear_years`` by the tiers whose endurance
    is rated (``inf`` where the step writes nothing there).
    """

    compute_j: float
    static_j: float
    tier_j: dict[str, float] = field(default_factory=dict)
    link_j: dict[str, float] = field(default_factory=dict)
    written_bytes: dict[str, int] = field(default_factory=dict)
    wear_years: dict[str, float] = field(default_factory=dict)

    @property
    def total_j(self) -> float:
        """Every part together."""
        return (
            self.compute_j + self.static_j + sum(self.tier_j.values()) + sum(self.link_j.values())
        )

    @property
    def least_wear_years(self) -> float:
        """The fewest years any rated device lasts (``inf`` without one, or unwritten)."""
        return min(self.wear_years.values(), default=math.inf)

    @property
    def least_wear_tier(self) -> str:
        """The rated tier that wears out first ("" without one)."""
        if not self.wear_years:
            return ""
        return min(self.wear_years, key=lambda t: self.wear_years[t])


@dataclass(frozen=True)
class BytePrices:
    """J per byte on a platform, per tier index: ``read`` / ``write`` on the tier (by
    anything); ``kernel_read`` / ``kernel_write`` the same for a kernel, with the link it
    crosses where it reaches the tier through a kernel link; ``link`` [src, dst] for a copy
    over that pair's path (0 where the energy model names none)."""

    read: npt.NDArray[np.float64]
    write: npt.NDArray[np.float64]
    kernel_read: npt.NDArray[np.float64]
    kernel_write: npt.NDArray[np.float64]
    link: npt.NDArray[np.float64]


def byte_prices(platform: Platform) -> BytePrices:
    """The :class:`BytePrices` of ``platform``; raises :class:`TmsimError` without an energy
    model. A kernel reaching a tier through a kernel link pays, beside the tier, the copy
    path's energy from that tier to the fastest one for what it reads and back for what it
    writes (the same interconnect)."""
    model = platform.energy
    if model is None:
        raise TmsimError(f"platform {platform.name!r} has no energy model ([energy])")
    names = [t.name for t in platform.tiers]
    n = len(names)
    read, write, link = np.zeros(n), np.zeros(n), np.zeros((n, n))
    for i, name in enumerate(names):
        e = model.tier(name)
        if e is not None:
            read[i], write[i] = e.read_j_per_byte, e.write_j_per_byte
    for k in model.links:
        link[names.index(k.src), names.index(k.dst)] = k.j_per_byte
    kernel_read, kernel_write = read.copy(), write.copy()
    for kl in platform.kernel_links:
        i = names.index(kl.tier)
        kernel_read[i] += link[i, 0]
        kernel_write[i] += link[0, i]
    return BytePrices(read, write, kernel_read, kernel_write, link)


def step_energy(trace: Trace, graph: Graph, platform: Platform) -> StepEnergy:
    """The energy of the step ``trace`` replayed of ``graph`` on ``platform``.

    Raises :class:`TmsimError` when the platform has no energy model, when the trace's
    tiers are not the platform's, or when it names a kernel or tensor the graph lacks.
    """
    model = platform.energy
    if model is None:
        raise TmsimError(f"platform {platform.name!r} has no energy model ([energy])")
    names = tuple(t.name for t in platform.tiers)
    if tuple(trace.tier_names) != names:
        raise TmsimError(
            f"the trace's tiers {list(trace.tier_names)} are not those of platform "
            f"{platform.name!r} {list(names)}"
        )
    prices = byte_prices(platform)
    read = np.zeros(len(names), dtype=np.int64)
    written = np.zeros(len(names), dtype=np.int64)
    compute_j = 0.0
    link_j: dict[str, float] = {}
    for rec in trace.records:
        r = np.asarray(rec.read_bytes, dtype=np.int64)
        w = np.asarray(rec.write_bytes, dtype=np.int64)
        read += r
        written += w
        if rec.kind == HOST:  # the host CPU's kernel, on the tiers it reaches directly
            k = _kernel_of(KERNEL, rec.kernel, rec.name, graph)
            compute_j += graph.kernels[k].flops * model.j_per_flop(kernel_dtype(graph, k), True)
        elif rec.kind in (KERNEL, RECOMPUTE):
            k = _kernel_of(rec.kind, rec.kernel, rec.name, graph)
            compute_j += graph.kernels[k].flops * model.j_per_flop(kernel_dtype(graph, k))
            for kl in platform.kernel_links:  # what crossed the link to reach the tier
                i = names.index(kl.tier)
                for src, dst, nbytes in ((i, 0, r[i]), (0, i, w[i])):
                    if nbytes:
                        key = f"{names[src]}->{names[dst]}"
                        link_j[key] = link_j.get(key, 0.0) + nbytes * prices.link[src, dst]
        elif rec.kind in MOVES:
            s, d = names.index(rec.src), names.index(rec.dst)
            key = f"{rec.src}->{rec.dst}"
            link_j[key] = link_j.get(key, 0.0) + r[s] * prices.link[s, d]
    step_s = trace.simulated_s
    static_j = step_s * (model.compute_static_w + sum(t.static_w for t in model.tiers))
    tier_j: dict[str, float] = {}
    wear: dict[str, float] = {}
    for j, tier in enumerate(platform.tiers):
        e = model.tier(tier.name)
        tier_j[tier.name] = float(read[j] * prices.read[j] + written[j] * prices.write[j])
        if e is not None and e.lifetime_bytes(tier.capacity_bytes) is not None and step_s > 0:
            wear[tier.name] = e.years_to_wear(tier.capacity_bytes, int(written[j]), step_s)
    return StepEnergy(
        compute_j=compute_j,
        static_j=static_j,
        tier_j=tier_j,
        link_j=link_j,
        written_bytes={name: int(b) for name, b in zip(names, written, strict=True)},
        wear_years=wear,
    )


def energy_fields(trace: Trace, graph: Graph, platform: Platform) -> dict[str, Any]:
    """The energy and wear columns of a comparison's row (:class:`tmsim.comparison.Row`) for
    the replayed step ``trace``: ``energy_j``, and where a device's endurance is rated the
    one that wears out first (``wear_tier``), what the step writes there
    (``wear_written_bytes``) and the years until steps back to back wear it out
    (``wear_years``, ``nan`` where nothing is written); no fields without an energy model."""
    if platform.energy is None:
        return {}
    e = step_energy(trace, graph, platform)
    out: dict[str, Any] = {"energy_j": e.total_j}
    if e.wear_years:
        tier = e.least_wear_tier
        years = e.wear_years[tier]
        out.update(
            wear_tier=tier,
            wear_written_bytes=float(e.written_bytes[tier]),
            wear_years=years if math.isfinite(years) else math.nan,  # tables hold no inf
        )
    return out


def _kernel_of(kind: str, kernel: int, name: str, graph: Graph) -> int:
    """The kernel a kernel record ran, or the producer a recompute record ran again."""
    if kind == KERNEL:
        if not 0 <= kernel < len(graph.kernels):
            raise TmsimError(f"the trace runs kernel {kernel}; the graph has {len(graph.kernels)}")
        return kernel
    try:
        producer = int(graph.producers[graph.tensor_index(name)])
    except KeyError:
        producer = -1
    if producer < 0:
        raise TmsimError(f"the trace recomputes {name!r}, which no kernel of the graph makes")
    return producer


__all__ = ["BytePrices", "StepEnergy", "byte_prices", "energy_fields", "step_energy"]
