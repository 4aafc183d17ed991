"""The state of a flow while :class:`tmsim.sim.fluid.FluidModel` runs it: its fixed demands
per byte, its progress, its rate and what it has lost, and when it counts as finished."""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from tmsim.sim.flows import NO_LOSS, Flow

#: A flow whose remaining bytes fall below this fraction of its size is complete. Rounding in
#: ``remaining -= rate * dt`` leaves residues of about 1e-16; this bounds the time error a
#: completion can make to this fraction of the flow's duration.
DONE_REL = 1e-9


class Running:
    """A running flow: its fixed per-byte demands (``tiers``, ``channel_s``, ``priority``),
    its mutable progress and rate, and the seconds it has lost to each cause."""

    __slots__ = (
        "channel_on",
        "channel_s",
        "delay",
        "event",
        "flow",
        "lost",
        "moved",
        "priority",
        "queue",
        "rate",
        "remaining",
        "split",
        "start_s",
        "tiers",
    )

    def __init__(
        self,
        flow: Flow,
        event: simpy.Event,
        start_s: float,
        tiers: list[TierUse],
        channel_s: tuple[float, ...] = (),
        priority: bool = False,
        channel_on: tuple[tuple[int, float, float], ...] = (),
        queue: float = 1.0,
        delay: float = 0.0,
    ):
        self.flow = flow
        self.event = event
        self.start_s = start_s
        self.tiers = tiers
        #: per group of channels carrying the same tiers, the group's channel-seconds per byte
        #: of progress (all 0, or empty: the flow does not use the channel;
        #: :meth:`tmsim.sim.rates.ChannelUse.group_seconds`)
        self.channel_s = channel_s
        self.priority = priority
        #: channel bytes read and written per byte of progress on each tier behind the
        #: controller (``(tier, read, write)``), the requests
        #: one of its threads keeps queued there and its wait per unit of channel load
        #: (:meth:`tmsim.sim.rates.ChannelUse.profile`)
        self.channel_on = channel_on
        self.queue = queue
        self.delay = delay
        self.remaining = float(flow.nbytes)
        self.moved = 0.0
        self.rate = 0.0
        #: per second, the fraction of its cap lost to each cause (:func:`loss_split`)
        self.split = NO_LOSS
        #: seconds lost so far to each cause
        self.lost = [0.0, 0.0, 0.0, 0.0]


@dataclass(frozen=True, slots=True)
class TierUse:
    """Per byte of a flow's progress: ``read``/``write`` bytes on ``tier``, and the tier's
    mix factor at the flow's own read fraction."""

    tier: int
    read: float
    write: float
    own_mix: float


def finished(a: Running, now: float) -> bool:
    if a.remaining <= DONE_REL * a.flow.nbytes:
        return True
    # A rate too high for the remaining bytes to take a representable time past ``now``.
    return a.rate > 0 and now + a.remaining / a.rate <= now


__all__ = ["DONE_REL", "Running", "TierUse", "finished"]
