"""Rates of concurrent flows at one instant, under a memory controller's arbitration.

Pure functions, independent of SimPy, so that each rule can be checked by hand.
:func:`shared_rates` generalises :func:`tmsim.sim.sharing.max_min_rates` with the two rules of
:class:`hwmodels.controller.MemoryController`:

- **priority**: the flows marked ``priority`` (those writing to a tier whose writes drain
  first) are first shared among themselves alone; each keeps ``priority_share`` of that rate
  (its reservation), which is taken from the resources and from its cap;
- **demand**: what is left is shared by progressive filling weighted by each flow's remaining
  demand (its cap less its reservation), so flows frozen by one full resource all run at the
  same fraction of their caps; without ``demand`` every flow rises at the same pace
  (max-min).

A flow's rate is its reservation plus its share of the rest. With ``priority_share`` 0 (or no
priority flow) and no ``demand`` the result is :func:`max_min_rates`' exactly.

:class:`ChannelUse` resolves a platform's controller against its tier indices for
:class:`tmsim.sim.fluid.FluidModel`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hwmodels.platform import Platform
from tmsim.sim.sharing import FULL_REL, Uses, max_min_rates


def shared_rates(
    caps: Sequence[float],
    uses: Sequence[Uses],
    capacities: Sequence[float],
    *,
    demand: bool = False,
    priority: Sequence[bool] = (),
    priority_share: float = 0.0,
) -> list[float]:
    """Rates of ``n`` flows (see the module documentation).

    ``caps``, ``uses`` and ``capacities`` as for :func:`max_min_rates`; ``demand``: share in
    proportion to remaining demand (needs every cap finite); ``priority``: per flow, whether
    it is served first (empty: none is); ``priority_share``: in [0, 1]. Every rate lies in
    [0, cap] and no resource is loaded beyond its capacity (up to rounding of
    :data:`~tmsim.sim.sharing.FULL_REL`). Raises ``ValueError`` for arguments of the wrong
    length, a share outside [0, 1], an infinite cap with ``demand``, or what
    :func:`max_min_rates` rejects.
    """
    n = len(caps)
    flags = list(priority) if priority else [False] * n
    if len(flags) != n or len(uses) != n:
        raise ValueError(f"caps has {n} flows, uses {len(uses)}, priority {len(flags)}")
    if not 0.0 <= priority_share <= 1.0:
        raise ValueError(f"priority_share must lie in [0, 1], got {priority_share!r}")
    if demand and any(math.isinf(c) for c in caps):
        raise ValueError("demand sharing needs every flow's cap to be finite")
    first = [f for f in range(n) if flags[f]] if priority_share > 0 else []
    if not demand and not first:
        return max_min_rates(caps, uses, capacities)
    reserved = [0.0] * n
    residual = list(capacities)
    if first:
        got = max_min_rates(
            [caps[f] for f in first],
            [uses[f] for f in first],
            capacities,
            [caps[f] for f in first] if demand else None,
        )
        for f, r in zip(first, got, strict=True):
            reserved[f] = min(caps[f], priority_share * r)
            for res, a in uses[f]:
                residual[res] -= a * reserved[f]
    full = {r for r, c in enumerate(capacities) if residual[r] <= FULL_REL * c}
    rest = [
        f
        for f in range(n)
        if (reserved[f] == 0 or caps[f] - reserved[f] > FULL_REL * caps[f])
        and not any(r in full for r, _ in uses[f])
    ]
    rates = reserved[:]
    if rest:
        left = [caps[f] - reserved[f] for f in rest]
        # Resources only the frozen flows use may be spent; give them any positive capacity.
        room = [c if c > 0 else 1.0 for c in residual]
        got = max_min_rates(left, [uses[f] for f in rest], room, left if demand else None)
        for f, r in zip(rest, got, strict=True):
            rates[f] += r
    return rates


@dataclass(frozen=True, slots=True)
class ChannelUse:
    """A platform's memory controller by tier index (see
    :class:`hwmodels.controller.MemoryController`): per tier, channel-seconds per byte read
    and written (0 for a tier not behind the controller) and whether its writes drain first;
    ``priority_share`` and ``demand`` (arbitration ``"demand"``)."""

    read_s_per_byte: tuple[float, ...]
    write_s_per_byte: tuple[float, ...]
    priority: tuple[bool, ...]
    priority_share: float
    demand: bool

    @classmethod
    def of(cls, platform: Platform) -> ChannelUse | None:
        """The controller of ``platform`` by tier index, or None if it has none."""
        ctl = platform.controller
        if ctl is None:
            return None
        read, write, first = [], [], []
        for name in platform.tier_names:
            w = ctl.weight(name)
            read.append(0.0 if w is None else w.read / ctl.bw_bytes_per_s)
            write.append(0.0 if w is None else w.write / ctl.bw_bytes_per_s)
            first.append(name in ctl.priority_tiers)
        return cls(
            tuple(read), tuple(write), tuple(first), ctl.write_priority, ctl.arbitration == "demand"
        )

    def seconds_per_byte(self, read: Sequence[float], write: Sequence[float]) -> float:
        """Channel-seconds of ``read``/``write`` bytes per tier (sequences over all tiers)."""
        return sum(
            r * a + w * b
            for r, w, a, b in zip(
                read, write, self.read_s_per_byte, self.write_s_per_byte, strict=True
            )
        )

    def is_priority(self, write: Sequence[float]) -> bool:
        """Whether a flow writing ``write`` bytes per tier is served first."""
        return any(w > 0 and p for w, p in zip(write, self.priority, strict=True))


__all__ = ["ChannelUse", "shared_rates"]
