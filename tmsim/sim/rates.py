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
  (max-min);
- **queue** (``weights``): progressive filling weighted by the given weights instead, which
  :class:`tmsim.sim.fluid.FluidModel` sets to each flow's queued requests over its channel
  time per byte, so that a full channel gives each flow time in proportion to its requests.

A flow's rate is its reservation plus its share of the rest. With ``priority_share`` 0 (or no
priority flow) and no ``demand`` the result is :func:`max_min_rates`' exactly.

:class:`ChannelUse` resolves a platform's controller against its tier indices for
:class:`tmsim.sim.fluid.FluidModel`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hwmodels.controller import MemoryController
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
    weights: Sequence[float] | None = None,
) -> list[float]:
    """Rates of ``n`` flows (see the module documentation).

    ``caps``, ``uses`` and ``capacities`` as for :func:`max_min_rates`; ``demand``: share in
    proportion to remaining demand (needs every cap finite); ``priority``: per flow, whether
    it is served first (empty: none is); ``priority_share``: in [0, 1]; ``weights``: per flow
    the pace of progressive filling (finite, > 0), which replaces ``demand``. Every rate lies in
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
    if demand and weights is None and any(math.isinf(c) for c in caps):
        raise ValueError("demand sharing needs every flow's cap to be finite")
    if weights is not None and len(weights) != n:
        raise ValueError(f"caps has {n} flows, weights {len(weights)}")
    first = [f for f in range(n) if flags[f]] if priority_share > 0 else []
    if weights is not None and not first:
        return max_min_rates(caps, uses, capacities, weights)
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
        pace = [weights[f] for f in rest] if weights is not None else left if demand else None
        got = max_min_rates(left, [uses[f] for f in rest], room, pace)
        for f, r in zip(rest, got, strict=True):
            rates[f] += r
    return rates


@dataclass(frozen=True, slots=True)
class ChannelUse:
    """A platform's memory controller by tier index (see
    :class:`hwmodels.controller.MemoryController`): per tier, channel-seconds per byte read
    and written (0 for a tier not behind the controller), whether its writes drain first,
    its device-switch channel-seconds per byte (``switch_s_per_byte``), requests a thread
    keeps queued per byte read and written (``read_queue``, ``write_queue``) and the waits
    per unit of load (``read_delay``, ``write_delay``); ``priority_share``, ``demand``
    (arbitration ``"demand"``) and ``queue`` (arbitration ``"queue"``).

    The channels fall into ``groups``, the runs of channels that carry the same tiers (one
    when every tier interleaves over every channel): tier ``t`` is on the first ``cover[t]``
    groups and takes ``spread[t]`` times its share of each one's time (the controller's
    channels over the tier's; :meth:`hwmodels.controller.MemoryController.spread`)."""

    read_s_per_byte: tuple[float, ...]
    write_s_per_byte: tuple[float, ...]
    priority: tuple[bool, ...]
    priority_share: float
    demand: bool
    switch_s_per_byte: tuple[float, ...] = ()
    read_queue: tuple[float, ...] = ()
    write_queue: tuple[float, ...] = ()
    read_delay: tuple[float, ...] = ()
    write_delay: tuple[float, ...] = ()
    queue: bool = False
    groups: int = 1
    cover: tuple[int, ...] = ()
    spread: tuple[float, ...] = ()

    @classmethod
    def of(cls, platform: Platform) -> ChannelUse | None:
        """The controller of ``platform`` by tier index, or None if it has none."""
        ctl = platform.controller
        if ctl is None:
            return None
        return cls.of_controller(platform.tier_names, ctl)

    @classmethod
    def of_controller(cls, tier_names: Sequence[str], ctl: MemoryController) -> ChannelUse:
        """``ctl`` by the index of each tier in ``tier_names``."""
        columns: dict[str, list[float]] = {k: [] for k in ("r", "w", "sw", "rq", "wq", "rd", "wd")}
        first = []
        for name in tier_names:
            w = ctl.weight(name)
            bw = ctl.bw_bytes_per_s
            columns["r"].append(0.0 if w is None else w.read / bw)
            columns["w"].append(0.0 if w is None else w.write / bw)
            columns["sw"].append(0.0 if w is None else w.switch / bw)
            columns["rq"].append(1.0 if w is None else w.read_queue)
            columns["wq"].append(1.0 if w is None else w.write_queue)
            columns["rd"].append(0.0 if w is None else w.read_delay)
            columns["wd"].append(0.0 if w is None else w.write_delay)
            first.append(name in ctl.priority_tiers)
        c = {k: tuple(v) for k, v in columns.items()}
        on = {w.tier: w.channels or ctl.channels for w in ctl.weights}
        ends = sorted(set(on.values()))
        cover = tuple(ends.index(on[n]) + 1 if n in on else 0 for n in tier_names)
        spread = tuple(ctl.spread(n) for n in tier_names)
        return cls(
            c["r"],
            c["w"],
            tuple(first),
            ctl.write_priority,
            ctl.arbitration == "demand",
            c["sw"],
            c["rq"],
            c["wq"],
            c["rd"],
            c["wd"],
            ctl.arbitration == "queue",
            len(ends),
            cover,
            spread,
        )

    @property
    def switching(self) -> bool:
        """Whether switching between tiers costs channel time."""
        return any(s > 0 for s in self.switch_s_per_byte)

    @property
    def delays(self) -> bool:
        """Whether flows wait on each other's channel traffic."""
        return any(d > 0 for d in (*self.read_delay, *self.write_delay))

    def seconds_per_byte(self, read: Sequence[float], write: Sequence[float]) -> float:
        """Channel-seconds of ``read``/``write`` bytes per tier (sequences over all tiers)."""
        return sum(
            r * a + w * b
            for r, w, a, b in zip(
                read, write, self.read_s_per_byte, self.write_s_per_byte, strict=True
            )
        )

    def group_seconds(self, read: Sequence[float], write: Sequence[float]) -> tuple[float, ...]:
        """Per group of channels, the seconds of its time ``read``/``write`` bytes per tier
        take (:meth:`seconds_per_byte` with each tier's bytes spread over its groups alone)."""
        cover = self.cover or (1,) * len(read)
        spread = self.spread or (1.0,) * len(read)
        out = [0.0] * self.groups
        for t, (r, w) in enumerate(zip(read, write, strict=True)):
            s = (r * self.read_s_per_byte[t] + w * self.write_s_per_byte[t]) * spread[t]
            if s > 0:
                for g in range(cover[t]):
                    out[g] += s
        return tuple(out)

    def tier_on_group(self, tier: int, group: int) -> bool:
        """Whether ``tier``'s traffic reaches the channels of ``group``."""
        return group < (self.cover[tier] if self.cover else 1)

    def tier_spread(self, tier: int) -> float:
        """:attr:`spread` of ``tier`` (1 where none is given)."""
        return self.spread[tier] if self.spread else 1.0

    def is_priority(self, write: Sequence[float]) -> bool:
        """Whether a flow writing ``write`` bytes per tier is served first."""
        return any(w > 0 and p for w, p in zip(write, self.priority, strict=True))

    def profile(
        self, read: Sequence[float], write: Sequence[float]
    ) -> tuple[tuple[tuple[int, float, float], ...], float, float]:
        """For ``read``/``write`` bytes per tier: ``(channel bytes, queue, delay)``, the bytes
        on each tier behind the controller (tier index, bytes read, bytes written), the
        requests a thread keeps queued and the wait per unit of load, both averaged over the
        traffic's channel time (queue 1 and delay 0 for traffic that does not use the
        channel)."""
        on: list[tuple[int, float, float]] = []
        time = queue = delay = 0.0
        for t, (r, w) in enumerate(zip(read, write, strict=True)):
            a, b = r * self.read_s_per_byte[t], w * self.write_s_per_byte[t]
            if a + b <= 0:
                continue
            on.append((t, r, w))
            time += a + b
            if self.read_queue:
                queue += a * self.read_queue[t] + b * self.write_queue[t]
                delay += a * self.read_delay[t] + b * self.write_delay[t]
        if time <= 0:
            return tuple(on), 1.0, 0.0
        return tuple(on), (queue / time if self.read_queue else 1.0), delay / time


def share_index(n_tiers: int, group: int, tier: int, write: bool) -> int:
    """Where the share of ``group``'s channel bytes that are ``tier``'s reads (``write``
    False) or writes lies in a share vector (:func:`switch_seconds`)."""
    return 2 * (group * n_tiers + tier) + int(write)


def switch_seconds(
    channel: ChannelUse,
    on: Sequence[tuple[int, float, float]],
    share: Sequence[float],
    group: int = 0,
) -> float:
    """Seconds of ``group``'s channel time that device switches take per byte of a flow with
    ``on`` bytes read and written per tier (:meth:`ChannelUse.profile`), when
    ``share[share_index(n, group, u, d)]`` of the group's bytes are tier ``u``'s reads or
    writes (``n`` tiers): ``sum_t spread_t * switch_t * (read_t * W_t + write_t * R_t)`` over
    the tiers on the group, ``W_t`` and ``R_t`` the shares written and read on the other
    tiers (a switch turns the bus around between devices and directions)."""
    if not channel.switch_s_per_byte:
        return 0.0
    n = len(channel.switch_s_per_byte)
    first = share_index(n, group, 0, False)
    reads = sum(share[first : first + 2 * n : 2])
    writes = sum(share[first + 1 : first + 2 * n : 2])
    total = 0.0
    for t, r, w in on:
        if channel.tier_on_group(t, group) and channel.switch_s_per_byte[t] > 0:
            other_w = writes - share[share_index(n, group, t, True)]
            other_r = reads - share[share_index(n, group, t, False)]
            total += (
                channel.tier_spread(t) * channel.switch_s_per_byte[t] * (r * other_w + w * other_r)
            )
    return total


def delayed_caps(
    caps: Sequence[float], channel_s: Sequence[float], delay: Sequence[float]
) -> list[float]:
    """Each flow's cap over ``1 + delay * u``, ``u`` the channel time per second the other
    flows offer at their caps (``channel_s`` per byte times cap; at most 1, an infinite cap
    filling the channel). A flow that waits on nothing keeps its cap; no cap falls to 0."""
    return grouped_delayed_caps(caps, [(s,) for s in channel_s], delay)


def grouped_delayed_caps(
    caps: Sequence[float], channel_s: Sequence[Sequence[float]], delay: Sequence[float]
) -> list[float]:
    """:func:`delayed_caps` over groups of channels: ``channel_s[f][g]`` is flow ``f``'s time
    per byte on group ``g``, and a flow waits on the busiest group it uses (the most channel
    time per second the other flows offer there, at most 1)."""
    n_g = max((len(s) for s in channel_s), default=0)
    offered = [
        [min(1.0, c * x) if x > 0 else 0.0 for x in (*s, *(0.0,) * (n_g - len(s)))]
        for c, s in zip(caps, channel_s, strict=True)
    ]
    total = [sum(o[g] for o in offered) for g in range(n_g)]
    out = list(caps)
    for f, (c, d) in enumerate(zip(caps, delay, strict=True)):
        used = [g for g, x in enumerate(channel_s[f]) if x > 0]
        if d > 0 and used:
            load = max(min(1.0, total[g] - offered[f][g]) for g in used)
            out[f] = c / (1.0 + d * load)
    return out


__all__ = [
    "ChannelUse",
    "delayed_caps",
    "grouped_delayed_caps",
    "share_index",
    "shared_rates",
    "switch_seconds",
]
