"""The values a fluid flow is made of: :class:`Flow`, what to move and through what, and
:class:`FlowResult`, what it did (:class:`tmsim.sim.fluid.FluidModel` runs them)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum


class Role(Enum):
    """What a flow stands for, as far as the cores care (:mod:`tmsim.sim.threads`): a
    kernel's memory traffic, a kernel's compute floor, a CPU copy thread, or anything else."""

    OTHER = "other"
    KERNEL = "kernel"
    FLOOR = "floor"
    THREAD = "thread"


@dataclass(frozen=True, slots=True)
class Flow:
    """Bytes to move through tiers and links (see :mod:`tmsim.sim.fluid`).

    - ``nbytes``: the flow's size (>= 0), the unit of its progress and of its rate; a flow of
      0 bytes completes at once;
    - ``read_bytes``/``write_bytes``: bytes read and written on each tier over the whole flow
      (tuples as long as the model's tier list, >= 0);
    - ``cap_bytes_per_s``: the flow's own rate limit (> 0, ``inf`` for none): a copy engine's
      or copy thread's rate, a kernel's rate at its roofline time;
    - ``links``: ``(link index, bytes carried)`` for each link crossed;
    - ``writers``: concurrent writers the flow presents to each tier it writes (>= 0);
    - ``efficiency``: fraction of the tiers' peak bandwidth its access pattern reaches, in (0, 1];
    - ``role``: a kernel's, a copy thread's or other (:class:`Role`).

    A flow with no bytes on any tier and no link uses no resource: it runs at its cap, which
    is how a kernel's compute floor runs when a copy thread may slow it (role ``FLOOR``;
    ``nbytes`` are then seconds of compute at a cap of 1).
    """

    nbytes: float
    read_bytes: tuple[float, ...]
    write_bytes: tuple[float, ...]
    cap_bytes_per_s: float
    links: tuple[tuple[int, float], ...] = ()
    writers: int = 1
    efficiency: float = 1.0
    role: Role = Role.OTHER


@dataclass(frozen=True, slots=True)
class Losses:
    """Seconds something ran longer than it would have alone, by cause:

    - ``shared_s``: bandwidth shared with other flows (tiers, links, channels);
    - ``blocked_s``: waiting behind writes that drain first (the controller's priority);
    - ``core_s``: a core shared between a copy thread and a kernel;
    - ``latency_s``: a copy thread's loaded latency.
    """

    shared_s: float = 0.0
    blocked_s: float = 0.0
    core_s: float = 0.0
    latency_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The sum of the four."""
        return self.shared_s + self.blocked_s + self.core_s + self.latency_s

    def __add__(self, other: Losses) -> Losses:
        return Losses(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def scaled(self, factor: float) -> Losses:
        """Every cause times ``factor``."""
        return Losses(*(a * factor for a in self.astuple()))

    def astuple(self) -> tuple[float, float, float, float]:
        """``(shared_s, blocked_s, core_s, latency_s)``."""
        return (self.shared_s, self.blocked_s, self.core_s, self.latency_s)


#: The causes of :class:`Losses`, in field order (a trace's ``lost_<cause>_s`` columns).
LOSS_CAUSES = tuple(f.name.removesuffix("_s") for f in fields(Losses))


@dataclass(frozen=True, slots=True)
class FlowResult:
    """What a finished flow did: ``start_s``/``end_s`` in simulated seconds,
    ``moved_bytes``, the integral of its rate over that time (equal to its size to within
    :data:`tmsim.sim.fluid.DONE_REL`), and ``losses``: the time it ran past its size over its
    cap, by cause (their sum is ``end_s - start_s - nbytes / cap``, to rounding)."""

    start_s: float
    end_s: float
    moved_bytes: float
    losses: Losses = Losses()


#: The split of a flow running at its cap: no loss (compared by identity).
NO_LOSS = (0.0, 0.0, 0.0, 0.0)


def loss_split(
    cap: float, core_cap: float, loaded_cap: float, rate: float, unblocked: float
) -> tuple[float, float, float, float]:
    """Per second, the fraction of its cap a flow loses to each cause of :class:`Losses`:
    its ``cap``, lowered to ``core_cap`` by a shared core and to ``loaded_cap`` by loaded
    latency, is shared down to ``unblocked`` (its rate if no write drained first) and then to
    ``rate``. The four sum to ``1 - rate / cap``; an infinite cap loses nothing."""
    if not 0 < cap < float("inf"):
        return NO_LOSS
    blocked = max(0.0, unblocked - rate)
    shared = max(0.0, loaded_cap - rate - blocked)
    return (shared / cap, blocked / cap, (cap - core_cap) / cap, (core_cap - loaded_cap) / cap)


def check_flow(flow: Flow, n_tiers: int, n_links: int) -> None:
    """Raise ``ValueError`` if the byte tuples of ``flow`` do not match ``n_tiers``, a byte
    count or the size is negative, the cap is not positive, the efficiency lies outside
    (0, 1], the writers are negative or a link index is unknown."""
    if len(flow.read_bytes) != n_tiers or len(flow.write_bytes) != n_tiers:
        raise ValueError(f"a flow needs read and write bytes for each of {n_tiers} tiers")
    if not (flow.nbytes >= 0) or min((*flow.read_bytes, *flow.write_bytes), default=0) < 0:
        raise ValueError("flow sizes and byte counts must be >= 0")
    if not (flow.cap_bytes_per_s > 0):
        raise ValueError(f"a flow's cap must be > 0, got {flow.cap_bytes_per_s!r}")
    if not (0 < flow.efficiency <= 1):
        raise ValueError(f"a flow's efficiency must lie in (0, 1], got {flow.efficiency!r}")
    if flow.writers < 0:
        raise ValueError(f"a flow's writers must be >= 0, got {flow.writers!r}")
    for link, nbytes in flow.links:
        if not (0 <= link < n_links) or nbytes < 0:
            raise ValueError(f"unknown link {link} or negative bytes {nbytes!r}")


__all__ = [
    "LOSS_CAUSES",
    "NO_LOSS",
    "Flow",
    "FlowResult",
    "Losses",
    "Role",
    "check_flow",
    "loss_split",
]
