"""The values a fluid flow is made of: :class:`Flow`, what to move and through what, and
:class:`FlowResult`, what it did (:class:`tmsim.sim.fluid.FluidModel` runs them)."""

from __future__ import annotations

from dataclasses import dataclass


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
    - ``efficiency``: fraction of the tiers' peak bandwidth its access pattern reaches, in (0, 1].
    """

    nbytes: float
    read_bytes: tuple[float, ...]
    write_bytes: tuple[float, ...]
    cap_bytes_per_s: float
    links: tuple[tuple[int, float], ...] = ()
    writers: int = 1
    efficiency: float = 1.0


@dataclass(frozen=True, slots=True)
class FlowResult:
    """What a finished flow did: ``start_s``/``end_s`` in simulated seconds, and
    ``moved_bytes``, the integral of its rate over that time (equal to its size to within
    :data:`tmsim.sim.fluid.DONE_REL`)."""

    start_s: float
    end_s: float
    moved_bytes: float


__all__ = ["Flow", "FlowResult"]
