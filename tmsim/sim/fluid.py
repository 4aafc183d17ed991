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
  mix must pay the mix factor should be given as a read flow and a write flow. Behind a
  controller arbitrating by queue, flows' reads and writes add instead (its mechanisms
  price the mix), and a flow that writes a tier without reading it costs the device only
  ``1 - write_overlap`` of its write time, the whole of it going to a write path of the
  tier's own (one second per second): other flows' reads use the rest
  (:class:`hwmodels.tiers.Interference`).
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
own limit (:func:`tmsim.sim.sharing.max_min_rates`); with a ``channel`` its arbitration decides
instead (:func:`tmsim.sim.rates.shared_rates`: writes that drain first, shares in proportion to
demand). Because the mix factor and the device-switch cost depend on the rates, rates on a
mixing tier are found as a fixed point of the aggregate read fraction, and rates on a channel
whose device switches cost time as a fixed point of the tiers' read and write shares of its
bytes: a few rounds of plain iteration, then bisection of the bracket those rounds leave
(:mod:`tmsim.sim.fixedpoint`), so the rates converge to the same point whatever the round cap,
even where the iteration would cycle (a flow that drains first taking a tier from a copy and
giving it back); :class:`tmsim.sim.instant.InstantRates` computes them. Rates are recomputed
whenever flows start or end (all changes at one instant are handled together), and the next
completion is scheduled from the new rates. With ``shared=False`` resources are ignored and
every flow runs at its own cap: the uncontended world the cost model assumes.

The model holds no global state; it is deterministic: the same flows started in the same order
at the same times finish at the same times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import simpy

from hwmodels.tiers import MemoryTier
from tmsim.sim.flows import NO_LOSS, Flow, FlowResult, Losses, check_flow
from tmsim.sim.instant import InstantRates
from tmsim.sim.rates import ChannelUse
from tmsim.sim.running import DONE_REL, Running, TierUse, finished
from tmsim.sim.threads import ThreadUse


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
        self._rates = InstantRates(tiers, link_bw_bytes_per_s, controllers, channel, threads)
        self.env = env
        self.tiers = self._rates.tiers
        self.link_bw_bytes_per_s = self._rates.link_bw_bytes_per_s
        self.shared = shared
        self.channel = channel
        self.threads = threads
        self._active: list[Running] = []
        self._last_s = 0.0
        self._pending = False
        self._wake_gen = 0
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
                if self._rates.mixing(t) and r > 0 and w > 0:
                    own = float(self.tiers[t].interference.mix_factor(r / (r + w)))
                uses.append(TierUse(t, r / n, w / n, own))
        channel_s: tuple[float, ...] = ()
        first = False
        on: tuple[tuple[int, float, float], ...] = ()
        queue, delay = 1.0, 0.0
        if self.channel is not None:
            per = n * flow.efficiency
            groups = self.channel.group_seconds(flow.read_bytes, flow.write_bytes)
            channel_s = tuple(x / per for x in groups)
            first = self.channel.is_priority(flow.write_bytes)
            bytes_on, queue, delay = self.channel.profile(flow.read_bytes, flow.write_bytes)
            on = tuple((t, r / per, w / per) for t, r, w in bytes_on)
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
        if not self.shared:
            for a in self._active:
                a.rate = a.flow.cap_bytes_per_s
            return
        self._rates.assign(self._active)


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
