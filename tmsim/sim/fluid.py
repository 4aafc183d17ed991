"""Fluid bandwidth sharing on SimPy: flows of bytes through memory tiers and links.

A :class:`Flow` is a quantity of bytes that moves through some memory tiers (reading and
writing given amounts on each) and some links, at most at its own rate cap. A copy reads its
source tier, writes its destination tier and may cross a link; a kernel's memory traffic is a
flow that reads and writes on the tiers its operands live on. :class:`FluidModel` runs flows on
a :class:`simpy.Environment` and hands back an event per flow that fires when its last byte
has moved.

The resources and what one second of them buys:

- a memory tier is a device with one second of device time per second. A flow moving ``r``
  read and ``w`` written bytes per byte of its progress on that tier costs
  ``(r / read_bw + w / write_bw(n)) / efficiency`` device-seconds per byte
  (:meth:`hwmodels.MemoryTier.write_bw_at`), ``n`` being the writers of all flows writing on
  the tier at the time and ``efficiency`` the fraction of peak bandwidth the flow's access
  pattern reaches. When flows mix reads and writes on a tier, each pays, per byte, the tier's
  mix factor at the *aggregate* read fraction relative to the factor of its own mix, and never
  less than alone: ``max(1, mix(F) / mix(f_own))`` (:meth:`hwmodels.Interference.mix_factor`).
  A flow alone on a tier thus costs exactly what :func:`hwmodels.timing.roofline` charges it,
  and a pure read stream beside a pure write stream pays ``mix(F)`` as
  :meth:`hwmodels.MemoryTier.service_time_s` does for their sum. A flow whose own read/write
  mix must pay the mix factor should be given as a read flow and a write flow.
- a link has a bandwidth in bytes per second; a flow uses it for the bytes it carries there.
- a memory controller shared by a group of tiers (:attr:`hwmodels.Platform.shared_controllers`)
  is one more device with one second per second: a flow uses it for the sum of the
  device-seconds it spends on the group's tiers, so concurrent traffic on DRAM and PMM
  behind one controller takes the sum of their device times, as the cost model charges a
  kernel that uses both.
- the channels of a :class:`hwmodels.controller.MemoryController` (``channel``), one more
  device with one second per second: a flow uses it for its bytes on the controller's tiers
  times their bus-time weights, over its efficiency.

With ``threads`` (:class:`tmsim.sim.threads.ThreadUse`) a copy thread's cap falls with the
load of the resources it uses, and a thread and a kernel sharing a core slow each other.

Concurrent flows share every resource max-min fairly in bytes per second, each capped by its
own limit (:func:`tmsim.sim.sharing.max_min_rates`); with a ``channel`` its arbitration
decides instead (:func:`tmsim.sim.rates.shared_rates`: writes that drain first, shares in
proportion to demand). Because the mix factor and the device-switch cost depend on the
rates, rates on a mixing tier are found as a fixed point of the aggregate read fraction, and
rates on a channel whose device switches cost time as a fixed point of the tiers' shares of
its bytes: a few rounds of plain iteration, then bisection of the bracket those rounds leave
(:mod:`tmsim.sim.fixedpoint`), so the rates converge to the same point whatever the round
cap, even where the iteration would cycle (a flow that drains first taking a tier from a copy
and giving it back). Rates
are recomputed whenever flows start or end (all changes at one instant are handled together),
and the next completion is scheduled from the new rates.
With ``shared=False`` resources are ignored and every flow runs at its own cap: the
uncontended world the cost model assumes.

The model holds no global state; it is deterministic: the same flows started in the same order
at the same times finish at the same times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import simpy

from hwmodels.tiers import MemoryTier
from tmsim.sim.fixedpoint import Bracket
from tmsim.sim.flows import NO_LOSS, Flow, FlowResult, Losses, Role, check_flow, loss_split
from tmsim.sim.rates import ChannelUse, delayed_caps, shared_rates, switch_seconds
from tmsim.sim.running import DONE_REL, Running, TierUse, finished
from tmsim.sim.sharing import max_min_rates
from tmsim.sim.threads import ThreadUse

#: Most rounds of the search for the mixing tiers' read fractions and the channel's byte
#: shares (:mod:`tmsim.sim.fixedpoint`); at least its ``BISECTION_ROUNDS``, which reach the
#: tolerance whatever the rates do, so that the answer does not depend on this cap.
MIX_ROUNDS = 60


class FluidModel:
    """Flows sharing memory tiers and links on ``env`` (see the module documentation).

    ``tiers``: the memory tiers, indexed as the flows' byte tuples; ``link_bw_bytes_per_s``:
    each link's bandwidth (> 0); ``controllers``: groups of tier indices behind one shared
    memory controller (:meth:`hwmodels.Platform.controller_groups`); ``channel``: the
    controller whose channels the tiers share (:meth:`tmsim.sim.rates.ChannelUse.of`), or
    None; ``threads``: the copy thread (:meth:`tmsim.sim.threads.ThreadUse.of`), or None;
    ``shared=False`` runs every flow at its own cap, ignoring resources. Raises
    ``ValueError`` for a link bandwidth that is not positive, a controller group naming an
    unknown tier, or a channel not given for every tier.
    """

    def __init__(
        self,
        env: simpy.Environment,
        tiers: Sequence[MemoryTier],
        link_bw_bytes_per_s: Sequence[float] = (),
        shared: bool = True,
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
        #: controller index of each tier, or -1 for a tier with a controller of its own
        self._controller = [-1] * len(tiers)
        for c, group in enumerate(controllers):
            for t in group:
                self._controller[t] = c
        self._n_controllers = len(controllers)
        self.env = env
        self.tiers = tuple(tiers)
        self.link_bw_bytes_per_s = tuple(float(b) for b in link_bw_bytes_per_s)
        self.shared = shared
        self.channel = channel
        self.threads = threads
        self._active: list[Running] = []
        self._last_s = 0.0
        self._pending = False
        self._wake_gen = 0
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
        #: Rate recomputations so far (a measure of the model's work).
        self.updates = 0

    @property
    def active(self) -> int:
        """Flows currently moving."""
        return len(self._active)

    def current_rates(self) -> list[float]:
        """The rates (bytes per second) of the flows moving now, in the order they started,
        as last set (rates are set at the instant after a change; run the environment past
        it first)."""
        return [a.rate for a in self._active]

    def transfer(self, flow: Flow) -> simpy.Event:
        """Start ``flow`` now; the returned event fires with a :class:`FlowResult` when it ends.

        Raises ``ValueError`` if the byte tuples do not match the tiers, a byte count or the
        size is negative, the cap is not positive, the efficiency lies outside (0, 1], a link
        index is unknown, or (with ``shared=False``) a flow has no finite cap.
        """
        self._check(flow)
        event = self.env.event()
        now = self.env.now
        if flow.nbytes == 0:
            event.succeed(FlowResult(now, now, 0.0))
            return event
        n = float(flow.nbytes)
        uses = []
        for t, (r, w) in enumerate(zip(flow.read_bytes, flow.write_bytes, strict=True)):
            if r > 0 or w > 0:
                own = 1.0
                if self._mixing[t] and r > 0 and w > 0:
                    own = float(self.tiers[t].interference.mix_factor(r / (r + w)))
                uses.append(TierUse(t, r / n, w / n, own))
        channel_s, first = 0.0, False
        on: tuple[tuple[int, float], ...] = ()
        queue, delay = 1.0, 0.0
        if self.channel is not None:
            channel_s = self.channel.seconds_per_byte(flow.read_bytes, flow.write_bytes)
            channel_s /= n * flow.efficiency
            first = self.channel.is_priority(flow.write_bytes)
            bytes_on, queue, delay = self.channel.profile(flow.read_bytes, flow.write_bytes)
            on = tuple((t, b / (n * flow.efficiency)) for t, b in bytes_on)
        running = Running(flow, event, now, uses, channel_s, first, on, queue, delay)
        self._active.append(running)
        self._touch()
        return event

    # ------------------------------------------------------------------ internals
    def _check(self, flow: Flow) -> None:
        check_flow(flow, len(self.tiers), len(self.link_bw_bytes_per_s))
        if math.isinf(flow.cap_bytes_per_s) and flow.nbytes > 0:
            if not self.shared:
                raise ValueError("without sharing a flow needs a finite cap")
            if self.channel is not None and self.channel.demand:
                raise ValueError("sharing in proportion to demand needs a finite cap")

    def _touch(self) -> None:
        """Recompute rates once at this instant, after every change made at it."""
        if not self._pending:
            self._pending = True
            ev = self.env.timeout(0)
            ev.callbacks.append(self._on_touch)

    def _on_touch(self, _: simpy.Event) -> None:
        self._pending = False
        self._update()

    def _on_wake(self, ev: simpy.Event) -> None:
        if ev.value == self._wake_gen:
            self._update()

    def _update(self) -> None:
        now = self.env.now
        dt = now - self._last_s
        if dt > 0:
            for a in self._active:
                moved = a.rate * dt
                a.remaining -= moved
                a.moved += moved
                if a.split is not NO_LOSS:
                    for i, f in enumerate(a.split):
                        a.lost[i] += f * dt
        self._last_s = now
        while True:
            done = [a for a in self._active if finished(a, now)]
            for a in done:
                self._active.remove(a)
                a.event.succeed(FlowResult(a.start_s, now, a.moved, Losses(*a.lost)))
            self._set_rates()
            if not any(finished(a, now) for a in self._active):
                break
        self._wake_gen += 1
        if self._active:
            # A flow held at rate 0 (behind writes that drain first) waits for the next change.
            moving = [now + a.remaining / a.rate for a in self._active if a.rate > 0]
            if not moving:
                raise RuntimeError("every active flow is held at rate 0; nothing can finish")
            next_s = min(moving)
            wake = self.env.timeout(next_s - now, value=self._wake_gen)
            wake.callbacks.append(self._on_wake)

    def _set_rates(self) -> None:
        self.updates += 1
        active = self._active
        if not active:
            return
        if not self.shared:
            for a in active:
                a.rate = a.flow.cap_bytes_per_s
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
        bus = len(capacities)
        if self.channel is not None:
            capacities.append(1.0)
        ch = self.channel
        mixing = [
            t
            for t in range(n_tiers)
            if self._mixing[t] and len(on_tier[t]) > 1 and not self._additive[t]
        ]
        # Tiers whose device-switch cost depends on the channel's byte shares.
        switched = (
            []
            if ch is None or not ch.switching
            else [t for t in range(n_tiers) if ch.switch_s_per_byte[t] > 0]
        )
        share = self._channel_share(caps) if switched else []
        waited = caps
        if ch is not None and ch.delays:
            waited = delayed_caps(caps, [a.channel_s for a in active], [a.delay for a in active])
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
                bus_s = a.channel_s
                if switched and ch is not None:
                    bus_s += switch_seconds(ch, a.channel_on, share)
                bus_use = [(bus, bus_s)] if bus_s > 0 else []
                uses.append(row + links[i] + list(shared.items()) + bus_use)
            if round_ == 0:
                # A channel whose requests wait on each other already slows the copy thread
                # by its queueing delay (delayed_caps): the thread's own rule would count it
                # twice.
                if threads is not None and not (ch is not None and ch.delays):
                    loaded = threads.loaded_caps(caps, roles, uses, capacities, links_at)
                else:
                    loaded = waited
            rates = self._share(loaded, uses, capacities)
            # A search that has converged keeps its guess while the other one moves on.
            shared_done = mixed_done = True
            if switched:
                at = dict(enumerate(share))
                given = dict(enumerate(self._channel_share(rates)))
                shared_done = shares.narrow(at, given)
                if not shared_done:
                    # Damped: the shares swing less than the rates they come from.
                    step = {t: 0.5 * (given[t] + at[t]) for t in switched}
                    guess = shares.next(round_, step)
                    share = [guess.get(t, x) for t, x in enumerate(share)]
            if mixing:
                new = {t: self._read_fraction(t, on_tier[t], rates) for t in mixing}
                # Round 0 ran without mix factors: it gives a first guess, not a bracket.
                mixed_done = bool(fraction) and mixes.narrow(fraction, new)
                if not mixed_done:
                    fraction = mixes.next(round_, new)
            if shared_done and mixed_done:
                break
        unblocked = self._unblocked(loaded, uses, capacities, rates)
        for i, a in enumerate(active):
            a.rate = rates[i]
            cap, r = a.flow.cap_bytes_per_s, rates[i]
            if r >= cap and loaded[i] == cap and unblocked[i] == r:
                a.split = NO_LOSS
            else:
                a.split = loss_split(cap, caps[i], loaded[i], r, unblocked[i])

    def _share(
        self, caps: list[float], uses: list[list[tuple[int, float]]], capacities: list[float]
    ) -> list[float]:
        ch = self.channel
        if ch is None:
            return max_min_rates(caps, uses, capacities)
        return shared_rates(
            caps,
            uses,
            capacities,
            demand=ch.demand,
            priority=[a.priority for a in self._active],
            priority_share=ch.priority_share,
            weights=self._queue_weights(caps, uses, len(capacities) - 1) if ch.queue else None,
        )

    def _queue_weights(
        self, caps: list[float], uses: list[list[tuple[int, float]]], bus: int
    ) -> list[float]:
        """Per flow, the pace of ``queue`` arbitration: requests it keeps queued (threads
        times its queue share) over its channel time per byte, so that a full channel gives
        each flow time in proportion to its requests; a flow off the channel paces at its cap
        (or 1 without one)."""
        out = []
        for a, row, cap in zip(self._active, uses, caps, strict=True):
            bus_s = sum(x for r, x in row if r == bus)
            if bus_s > 0:
                out.append(max(a.flow.writers, 1) * a.queue / bus_s)
            else:
                out.append(cap if math.isfinite(cap) else 1.0)
        return out

    def _channel_share(self, rates: Sequence[float]) -> list[float]:
        """Each tier's share of the bytes on the controller's channels at ``rates`` (all 0
        when nothing moves there)."""
        on = [0.0] * len(self.tiers)
        for a, r in zip(self._active, rates, strict=True):
            if math.isfinite(r):
                for t, b in a.channel_on:
                    on[t] += r * b
        total = sum(on)
        return [x / total for x in on] if total > 0 else on

    def _unblocked(
        self,
        caps: list[float],
        uses: list[list[tuple[int, float]]],
        capacities: list[float],
        rates: list[float],
    ) -> list[float]:
        """The rates if no write drained first (``rates`` when none does, or when every flow
        runs at its cap anyway)."""
        ch = self.channel
        if ch is None or ch.priority_share == 0 or not any(a.priority for a in self._active):
            return rates
        if all(r >= c for r, c in zip(rates, caps, strict=True)):
            return rates
        weights = self._queue_weights(caps, uses, len(capacities) - 1) if ch.queue else None
        return shared_rates(caps, uses, capacities, demand=ch.demand, weights=weights)

    def _read_fraction(self, t: int, flows: list[int], rates: list[float]) -> float:
        read = total = 0.0
        for i in flows:
            for u in self._active[i].tiers:
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


def rates_at_start(
    tiers: Sequence[MemoryTier],
    flows: Sequence[Flow],
    *,
    controllers: Sequence[Sequence[int]] = (),
    channel: ChannelUse | None = None,
) -> list[float]:
    """The rates (bytes per second) ``flows``, started together on a new
    :class:`FluidModel` of ``tiers`` (no links, no copy thread), get at once, in their order.
    Raises what :meth:`FluidModel.transfer` raises."""
    env = simpy.Environment()
    model = FluidModel(env, tiers, controllers=controllers, channel=channel)
    for f in flows:
        model.transfer(f)
    env.run(until=env.now + 1e-12)
    return model.current_rates()


__all__ = ["DONE_REL", "Flow", "FlowResult", "FluidModel", "rates_at_start"]
