"""Rates of the flows moving at one instant: the resources of a memory system, what each flow
uses of them, and how they are shared (see :mod:`tmsim.sim.fluid` for the resources and the
rules).

:class:`InstantRates` holds a memory system (tiers, links, shared controllers, the channels of
a memory controller, the copy thread) and sets the rates of the flows moving on it; it holds no
flow between calls. :class:`tmsim.sim.fluid.FluidModel` calls it whenever flows start or end.
Where the rates depend on themselves (the aggregate read fraction of a mixing tier, the tiers'
read and write shares of a channel whose device switches cost time) they are found as a fixed
point: a few rounds of plain iteration, then bisection of the bracket those rounds leave
(:mod:`tmsim.sim.fixedpoint`), so the rates converge to the same point whatever the round cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hwmodels.tiers import MemoryTier
from tmsim.sim.fixedpoint import Bracket
from tmsim.sim.flows import NO_LOSS, Role, loss_split
from tmsim.sim.rates import (
    ChannelUse,
    grouped_delayed_caps,
    share_index,
    shared_rates,
    switch_seconds,
)
from tmsim.sim.running import Running
from tmsim.sim.sharing import max_min_rates
from tmsim.sim.threads import ThreadUse

#: Most rounds of the search for the mixing tiers' read fractions and the channel's byte
#: shares (:mod:`tmsim.sim.fixedpoint`); at least its ``BISECTION_ROUNDS``, which reach the
#: tolerance whatever the rates do, so that the answer does not depend on this cap.
MIX_ROUNDS = 60


class InstantRates:
    """The rates of flows on a memory system (see the module documentation): ``tiers``,
    ``link_bw_bytes_per_s`` (each > 0), ``controllers`` (groups of tier indices behind one
    shared controller), ``channel`` and ``threads`` as :class:`tmsim.sim.fluid.FluidModel`
    takes them. Raises ``ValueError`` for a link bandwidth that is not positive, a controller
    group naming an unknown tier, or a channel not given for every tier."""

    def __init__(
        self,
        tiers: Sequence[MemoryTier],
        link_bw_bytes_per_s: Sequence[float] = (),
        controllers: Sequence[Sequence[int]] = (),
        channel: ChannelUse | None = None,
        threads: ThreadUse | None = None,
    ) -> None:
        if channel is not None and len(channel.priority) != len(tiers):
            raise ValueError(
                f"the channel describes {len(channel.priority)} tiers, not {len(tiers)}"
            )
        if any(not (bw > 0) for bw in link_bw_bytes_per_s):
            raise ValueError(f"link bandwidths must be > 0, got {list(link_bw_bytes_per_s)}")
        if any(not 0 <= t < len(tiers) for g in controllers for t in g):
            raise ValueError(f"controller groups name unknown tiers: {list(controllers)}")
        self.tiers = tuple(tiers)
        self.link_bw_bytes_per_s = tuple(float(b) for b in link_bw_bytes_per_s)
        self.channel = channel
        self.threads = threads
        #: controller index of each tier, or -1 for a tier with a controller of its own
        self._controller = [-1] * len(self.tiers)
        for c, group in enumerate(controllers):
            for t in group:
                self._controller[t] = c
        self._n_controllers = len(controllers)
        self._wbw: dict[tuple[int, int], float] = {}
        self._mixing = tuple(t.interference.mix_penalty > 0 for t in self.tiers)
        #: tiers whose flows' reads and writes share the device additively: those behind a
        #: controller that arbitrates by queue, where the controller's mechanisms (switches,
        #: queueing delay) replace the tier's mix factor between flows
        self._additive = tuple(
            channel is not None
            and channel.queue
            and (channel.read_s_per_byte[t] > 0 or channel.write_s_per_byte[t] > 0)
            for t in range(len(self.tiers))
        )
        #: per tier, the share of a write's time other flows' reads may use, and the index
        #: of its write path among the write paths (-1: none)
        #: (only on additive tiers: elsewhere the mix factor prices reads beside writes)
        self._overlap = tuple(
            t.interference.write_overlap if self._additive[i] else 0.0
            for i, t in enumerate(self.tiers)
        )
        overlapping = [t for t, o in enumerate(self._overlap) if o > 0]
        self._path = [-1] * len(self.tiers)
        for j, t in enumerate(overlapping):
            self._path[t] = j
        self._n_paths = len(overlapping)
        #: the channel's byte shares a device-switch cost depends on: every tier's reads and
        #: writes on each group of channels where a tier switches (:func:`share_index`)
        n = len(self.tiers)
        self._switched: tuple[int, ...] = (
            ()
            if channel is None or not channel.switching
            else tuple(
                share_index(n, g, u, d)
                for g in range(channel.groups)
                if any(
                    channel.switch_s_per_byte[t] > 0 and channel.tier_on_group(t, g)
                    for t in range(n)
                )
                for u in range(n)
                if channel.tier_on_group(u, g)
                for d in (False, True)
            )
        )

    def mixing(self, tier: int) -> bool:
        """Whether ``tier`` has a read/write mix factor (a flow's own mix pays it)."""
        return self._mixing[tier]

    def assign(self, active: Sequence[Running]) -> None:
        """Set the rate of every flow of ``active`` (the flows moving now, in the order they
        started) and the split of what it lost to each cause."""
        if not active:
            return
        caps = [a.flow.cap_bytes_per_s for a in active]
        roles = [a.flow.role for a in active] if self.threads is not None else []
        threads = self.threads if Role.THREAD in roles or Role.FLOOR in roles else None
        if threads is not None:
            caps = threads.core_caps(caps, roles)
        n_tiers = len(self.tiers)
        writers = [0] * n_tiers
        on_tier: list[list[int]] = [[] for _ in range(n_tiers)]
        for i, a in enumerate(active):
            for u in a.tiers:
                on_tier[u.tier].append(i)
                if u.write > 0:
                    writers[u.tier] += a.flow.writers
        wbw = [self._write_bw(t, writers[t]) for t in range(n_tiers)]
        base = [
            [
                (u.read / self.tiers[u.tier].read_bw_bytes_per_s + u.write / wbw[u.tier])
                / a.flow.efficiency
                for u in a.tiers
            ]
            for a in active
        ]
        links = [
            [(n_tiers + link, nbytes / a.flow.nbytes) for link, nbytes in a.flow.links if nbytes]
            for a in active
        ]
        capacities = [1.0] * n_tiers + list(self.link_bw_bytes_per_s)
        capacities += [1.0] * self._n_controllers
        first_controller = n_tiers + len(self.link_bw_bytes_per_s)
        # Writes that overlap reads (write_overlap): the device's media carry the rest of
        # their time, a write path of the tier's own carries all of it.
        paths: list[list[tuple[int, float]]] = [[] for _ in active]
        for i, a in enumerate(active):
            for k, u in enumerate(a.tiers):
                overlap = self._overlap[u.tier]
                if overlap > 0 and u.read == 0 and self._additive[u.tier]:
                    paths[i].append((len(capacities) + self._path[u.tier], base[i][k]))
                    base[i][k] *= 1.0 - overlap
        capacities += [1.0] * self._n_paths
        ch = self.channel
        bus = len(capacities)  # the first group of channels; one resource per group
        if ch is not None:
            capacities += [1.0] * ch.groups
        mixing = [
            t
            for t in range(n_tiers)
            if self._mixing[t] and len(on_tier[t]) > 1 and not self._additive[t]
        ]
        switched = self._switched
        share = self._channel_share(active, caps) if switched else []
        waited = caps
        if ch is not None and ch.delays:
            waited = grouped_delayed_caps(
                caps, [a.channel_s for a in active], [a.delay for a in active]
            )
        fraction: dict[int, float] = {}
        # A fixed point of each mixing tier's aggregate read fraction and of each switched
        # tier's channel share (the rates at them give them back), by bracketed search.
        mixes, shares = Bracket(mixing), Bracket(switched)
        rates: list[float] = []
        loaded = caps
        links_at = range(n_tiers, first_controller)
        for round_ in range(MIX_ROUNDS):
            uses = []
            for i, a in enumerate(active):
                row = []
                for u, b in zip(a.tiers, base[i], strict=True):
                    if u.tier in fraction:
                        mix = float(self.tiers[u.tier].interference.mix_factor(fraction[u.tier]))
                        b *= max(1.0, mix / u.own_mix)
                    row.append((u.tier, b))
                shared: dict[int, float] = {}
                for t, b in row:
                    c = self._controller[t]
                    if c >= 0:
                        shared[first_controller + c] = shared.get(first_controller + c, 0.0) + b
                bus_use = []
                for g, bus_s in enumerate(a.channel_s):
                    if switched and ch is not None and bus_s > 0:
                        bus_s += switch_seconds(ch, a.channel_on, share, g)
                    if bus_s > 0:
                        bus_use.append((bus + g, bus_s))
                uses.append(row + links[i] + list(shared.items()) + paths[i] + bus_use)
            if round_ == 0:
                # A channel whose requests wait on each other already slows the copy thread
                # by its queueing delay (delayed_caps): the thread's own rule would count it
                # twice.
                if threads is not None and not (ch is not None and ch.delays):
                    loaded = threads.loaded_caps(caps, roles, uses, capacities, links_at)
                else:
                    loaded = waited
            rates = self._share(active, loaded, uses, capacities)
            # A search that has converged keeps its guess while the other one moves on.
            shared_done = mixed_done = True
            if switched:
                at = dict(enumerate(share))
                given = dict(enumerate(self._channel_share(active, rates)))
                shared_done = shares.narrow(at, given)
                if not shared_done:
                    # Damped: the shares swing less than the rates they come from.
                    step = {t: 0.5 * (given[t] + at[t]) for t in switched}
                    guess = shares.next(round_, step)
                    share = [guess.get(t, x) for t, x in enumerate(share)]
            if mixing:
                new = {t: self._read_fraction(active, t, on_tier[t], rates) for t in mixing}
                # Round 0 ran without mix factors: it gives a first guess, not a bracket.
                mixed_done = bool(fraction) and mixes.narrow(fraction, new)
                if not mixed_done:
                    fraction = mixes.next(round_, new)
            if shared_done and mixed_done:
                break
        unblocked = self._unblocked(active, loaded, uses, capacities, rates)
        for i, a in enumerate(active):
            a.rate = rates[i]
            cap, r = a.flow.cap_bytes_per_s, rates[i]
            if r >= cap and loaded[i] == cap and unblocked[i] == r:
                a.split = NO_LOSS
            else:
                a.split = loss_split(cap, caps[i], loaded[i], r, unblocked[i])

    def _share(
        self,
        active: Sequence[Running],
        caps: list[float],
        uses: list[list[tuple[int, float]]],
        capacities: list[float],
    ) -> list[float]:
        ch = self.channel
        if ch is None:
            return max_min_rates(caps, uses, capacities)
        return shared_rates(
            caps,
            uses,
            capacities,
            demand=ch.demand,
            priority=[a.priority for a in active],
            priority_share=ch.priority_share,
            weights=(
                self._queue_weights(active, caps, uses, self._bus_of(capacities))
                if ch.queue
                else None
            ),
        )

    def _bus_of(self, capacities: list[float]) -> int:
        """The index of the first group of channels among ``capacities`` (they come last)."""
        return len(capacities) - (self.channel.groups if self.channel is not None else 0)

    @staticmethod
    def _queue_weights(
        active: Sequence[Running], caps: list[float], uses: list[list[tuple[int, float]]], bus: int
    ) -> list[float]:
        """Per flow, the pace of ``queue`` arbitration: requests it keeps queued (threads
        times its queue share) over its channel time per byte (on the busiest group of
        channels it uses, from index ``bus`` on), so that a full channel gives each flow time
        in proportion to its requests; a flow off the channel paces at its cap (or 1 without
        one)."""
        out = []
        for a, row, cap in zip(active, uses, caps, strict=True):
            bus_s = max((x for r, x in row if r >= bus), default=0.0)
            if bus_s > 0:
                out.append(max(a.flow.writers, 1) * a.queue / bus_s)
            else:
                out.append(cap if math.isfinite(cap) else 1.0)
        return out

    def _channel_share(self, active: Sequence[Running], rates: Sequence[float]) -> list[float]:
        """Per group of channels, each tier's reads' and writes' share of the bytes on it at
        ``rates``, at :func:`share_index` (all 0 in a group where nothing moves)."""
        ch = self.channel
        n_t = len(self.tiers)
        groups = ch.groups if ch is not None else 1
        on = [0.0] * (2 * groups * n_t)
        for a, r in zip(active, rates, strict=True):
            if math.isfinite(r):
                for t, rb, wb in a.channel_on:
                    spread = ch.tier_spread(t) if ch is not None else 1.0
                    for g in range(groups):
                        if ch is None or ch.tier_on_group(t, g):
                            on[share_index(n_t, g, t, False)] += r * rb * spread
                            on[share_index(n_t, g, t, True)] += r * wb * spread
        out = []
        width = 2 * n_t
        for g in range(groups):
            part = on[g * width : (g + 1) * width]
            total = sum(part)
            out += [x / total for x in part] if total > 0 else part
        return out

    def _unblocked(
        self,
        active: Sequence[Running],
        caps: list[float],
        uses: list[list[tuple[int, float]]],
        capacities: list[float],
        rates: list[float],
    ) -> list[float]:
        """The rates if no write drained first (``rates`` when none does, or when every flow
        runs at its cap anyway)."""
        ch = self.channel
        if ch is None or ch.priority_share == 0 or not any(a.priority for a in active):
            return rates
        if all(r >= c for r, c in zip(rates, caps, strict=True)):
            return rates
        bus = self._bus_of(capacities)
        weights = self._queue_weights(active, caps, uses, bus) if ch.queue else None
        return shared_rates(caps, uses, capacities, demand=ch.demand, weights=weights)

    @staticmethod
    def _read_fraction(
        active: Sequence[Running], t: int, flows: list[int], rates: list[float]
    ) -> float:
        read = total = 0.0
        for i in flows:
            for u in active[i].tiers:
                if u.tier == t:
                    read += rates[i] * u.read
                    total += rates[i] * (u.read + u.write)
        return read / total if total > 0 else 1.0

    def _write_bw(self, tier: int, writers: int) -> float:
        key = (tier, writers)
        bw = self._wbw.get(key)
        if bw is None:
            bw = float(self.tiers[tier].write_bw_at(writers))
            self._wbw[key] = bw
        return bw


__all__ = ["MIX_ROUNDS", "InstantRates"]
