"""A memory controller whose channels several tiers share: bus time, arbitration, write drains.

On a Cascade Lake socket the DRAM DIMM and the Optane PMM of each channel share its bus, and the
integrated memory controller arbitrates between their transactions (Intel, "Intel Optane
persistent memory BIOS settings", the arbitration profiles; ``reference/interference-and-
solvers.md`` A1). :class:`MemoryController` describes that controller as the replay's
``controller`` interference level uses it (:mod:`tmsim.sim.rates`):

- **channel time.** The channels carry ``bw_bytes_per_s`` bytes per second of the reference
  traffic (DRAM reads). A byte of another kind holds the channel ``weight`` times as long: a
  flow moving ``r_t`` read and ``w_t`` written bytes per byte of its progress on tier ``t``
  uses ``sum_t (r_t * read_t + w_t * write_t) / bw`` channel-seconds per byte (divided by its
  access efficiency, as device time is). All traffic on the controller's tiers shares one
  second of channel time per second.
- **write drains first.** Writes to a tier in ``priority_tiers`` (a full write-pending queue is
  drained before reads are served: FairHym and Imamura & Yoshida, HPC Asia 2020, find PMM
  writes block DRAM accesses and not the reverse) are served first: a flow that writes to such a
  tier gets ``write_priority`` (0 to 1) of the rate it would get if only such flows ran, before
  every flow shares what is left.
- **arbitration.** ``"demand"``: what is left is shared in proportion to each flow's demand,
  its uncontended rate (the requests it keeps outstanding at its own latency), so every flow on
  a full resource slows by the same factor and a 24-thread kernel is not held to the rate of a
  one-thread copy beside it; ``"max-min"``: equal rates, as the ``bandwidth`` level shares;
  ``"queue"``: a full channel serves the requests queued at it in turn, so each flow gets
  channel *time* in proportion to the requests it keeps queued there: its threads times the
  ``read_queue``/``write_queue`` of its traffic (requests per thread, relative to a DRAM
  reader's; a processor-sharing server's share, by Little's law).
- **device switches.** The DRAM DIMM and the PMM of a channel speak different protocols on one
  bus (DDR4 and DDR-T); turning the bus around between one device's reads and the other's
  writes costs bus time (the write-to-read and read-to-write turnarounds, and the DDR-T
  handshake), which is why the controller has arbitration profiles that decide how often it
  switches. A byte read on tier ``t`` holds the channel ``switch`` reference bytes longer per
  unit of the share of channel bytes written on other tiers, a byte written per unit of the
  share read on other tiers: nothing when one device has the bus alone, nothing between two
  devices' reads (their data flow the same way; assumed, no co-run measures it), most when
  one device's reads and the other's writes split the bus evenly. Summed over both sides this
  is ``2 * s * a * b / (a + b)`` for a read stream ``a`` and a write stream ``b``, the rate
  at which randomly interleaved streams alternate. The PerMA-Bench co-runs do not tell this
  apart from a cost of every change of device (both fit them to the same error,
  :mod:`tmsim.calibration.channel_fit`); this one leaves reads on both devices free of it.
- **queueing delay.** A thread keeps a fixed number of requests in flight, so its rate falls
  as their latency grows (Little's law). Each request waits behind the other flows' traffic:
  a flow's rate limit is divided by ``1 + delay * u``, ``u`` the share of the channels the
  other flows offer (their channel time at their own rate limits, at most 1) and ``delay``
  the ``read_delay``/``write_delay`` of its traffic (the wait per unit of load, in units of
  its idle latency). A PMM read waits longest: it is a DDR-T request whose data the PMM
  returns when the controller grants it the bus, after the DRAM traffic queued there. The
  factor is finite, so no reader is ever held at rate 0.

- **interleaving over the channels.** The controller has ``channels`` channels (1: the
  channels taken as one pool, which is exact when every tier interleaves over all of them).
  A tier's DIMMs may sit on fewer of them (``BusWeight.channels``: the first ``k``); its
  traffic interleaves over those alone, so each of them carries ``channels / k`` times its
  share, while a tier on every channel (DRAM) spreads its traffic over all and moves at the
  pace of its busiest one. Channels that carry the same tiers are one resource; the switch
  cost, the queueing delay and the queue's pace are taken per such group (a flow waits on the
  busiest group it uses).

With ``max-min`` arbitration, no priority and a channel no flow fills, the controller adds
nothing to the ``bandwidth`` level (a property the tests check).
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import RATE, count, in_range, is_number, rate, shown
from hwmodels.errors import HardwareModelError

#: Sharing rules :attr:`MemoryController.arbitration` may name.
ARBITRATIONS = ("demand", "max-min", "queue")

#: Largest bus-time weight: a byte that holds the channel a thousand times as long as a DRAM
#: read is beyond any device we model, and keeps every time finite (:mod:`hwmodels._checks`).
MAX_WEIGHT = 1e3

#: Most channels a controller may have (a bound for validation, far above any socket's).
MAX_CHANNELS = 1024


#: The optional fields of :class:`BusWeight` with their ranges and neutral defaults: with
#: every one at its default the controller behaves as it did before they existed.
MECHANISM_FIELDS: dict[str, tuple[float, float, float]] = {
    "switch": (0.0, MAX_WEIGHT, 0.0),
    "read_queue": (1 / MAX_WEIGHT, MAX_WEIGHT, 1.0),
    "write_queue": (1 / MAX_WEIGHT, MAX_WEIGHT, 1.0),
    "read_delay": (0.0, MAX_WEIGHT, 0.0),
    "write_delay": (0.0, MAX_WEIGHT, 0.0),
}


@dataclass(frozen=True, slots=True)
class BusWeight:
    """What the traffic of ``tier`` does on the channels (see the module documentation):

    - ``read``, ``write``: channel time per byte read and written, in reference bytes (DRAM
      reads), in [1e-3, 1e3];
    - ``switch``: extra channel time per byte per unit of the share of channel bytes going the
      other way on other tiers, in [0, 1e3] (0: switching devices is free);
    - ``read_queue``, ``write_queue``: requests a thread keeps queued at the channel, relative
      to a DRAM reader's, in [1e-3, 1e3] (used by ``"queue"`` arbitration);
    - ``read_delay``, ``write_delay``: how much a flow's rate falls per unit of channel load
      offered by the other flows, in [0, 1e3] (0: it does not wait on them);
    - ``channels``: how many of the controller's channels the tier's DIMMs sit on (the first
      ones; 0: all of them), an integer checked against the controller's ``channels``.
    """

    tier: str
    read: float
    write: float
    switch: float = 0.0
    read_queue: float = 1.0
    write_queue: float = 1.0
    read_delay: float = 0.0
    write_delay: float = 0.0
    channels: int = 0

    def summary(self) -> str:
        """``PMM read 2.4 write 2.3 switch 0.97 ...``: the weights, then each channel
        mechanism that is not at its neutral value (:data:`MECHANISM_FIELDS`)."""
        extra = "".join(
            f" {name.replace('_', ' ')} {getattr(self, name):g}"
            for name, (_, _, neutral) in MECHANISM_FIELDS.items()
            if getattr(self, name) != neutral
        )
        spread = f" on {self.channels} channels" if self.channels else ""
        return f"{self.tier} read {self.read:g} write {self.write:g}{extra}{spread}"

    def __post_init__(self) -> None:
        where = f"controller: weights.{self.tier}"
        if not (isinstance(self.tier, str) and self.tier.strip()):
            raise HardwareModelError("controller: a weight must name a tier")
        for name in ("read", "write"):
            value = getattr(self, name)
            if not (is_number(value) and in_range(value, 1 / MAX_WEIGHT, MAX_WEIGHT)):
                raise HardwareModelError(
                    f"{where}: {name} must be a number in [{1 / MAX_WEIGHT:g}, {MAX_WEIGHT:g}], "
                    f"got {shown(value)}"
                )
        for name, (low, high, _) in MECHANISM_FIELDS.items():
            value = getattr(self, name)
            if not (is_number(value) and in_range(value, low, high)):
                raise HardwareModelError(
                    f"{where}: {name} must be a number in [{low:g}, {high:g}], got {shown(value)}"
                )
        if not (count(self.channels, minimum=0) and self.channels <= MAX_CHANNELS):
            raise HardwareModelError(
                f"{where}: channels must be an integer of 0 to {MAX_CHANNELS}, "
                f"got {shown(self.channels)}"
            )


@dataclass(frozen=True, slots=True)
class MemoryController:
    """The channels some tiers share (see the module documentation).

    - ``bw_bytes_per_s``: reference bytes the channels carry per second (a rate, 1 to 1e21);
    - ``weights``: one :class:`BusWeight` per tier behind the controller (two or more tiers,
      each once);
    - ``arbitration``: one of :data:`ARBITRATIONS`;
    - ``write_priority``: in [0, 1], the share of their priority-only rate that flows writing to
      a ``priority_tiers`` tier get first (0: no priority; 1: strict);
    - ``priority_tiers``: tiers (among ``weights``) whose writes drain first;
    - ``channels``: how many channels carry ``bw_bytes_per_s`` between them (1 to
      :data:`MAX_CHANNELS`; every tier's ``channels`` at most this);
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` as ``controller: <field> ...`` for a bad value. Whether
    the tiers exist is checked by :class:`hwmodels.Platform`.
    """

    bw_bytes_per_s: float
    weights: tuple[BusWeight, ...]
    arbitration: str = "demand"
    write_priority: float = 0.0
    priority_tiers: tuple[str, ...] = ()
    source: str = ""
    channels: int = 1

    def __post_init__(self) -> None:
        where = "controller"
        if not rate(self.bw_bytes_per_s):
            raise HardwareModelError(
                f"{where}: channel_bw must be {RATE}, got {shown(self.bw_bytes_per_s)}"
            )
        names = [w.tier for w in self.weights]
        if len(names) < 2:
            raise HardwareModelError(f"{where}: weights must name two or more tiers")
        if len(set(names)) != len(names):
            raise HardwareModelError(f"{where}: weights name a tier twice")
        if self.arbitration not in ARBITRATIONS:
            raise HardwareModelError(
                f"{where}: arbitration must be one of {', '.join(ARBITRATIONS)}, "
                f"got {self.arbitration!r}"
            )
        share = self.write_priority
        if not (is_number(share) and in_range(share, 0.0, 1.0)):
            raise HardwareModelError(
                f"{where}: write_priority must lie in [0, 1], got {shown(share)}"
            )
        for t in self.priority_tiers:
            if t not in names:
                raise HardwareModelError(
                    f"{where}: priority_tiers names {t!r}, which has no weights "
                    f"(weights: {', '.join(names)})"
                )
        if len(set(self.priority_tiers)) != len(self.priority_tiers):
            raise HardwareModelError(f"{where}: priority_tiers names a tier twice")
        if not isinstance(self.source, str):
            raise HardwareModelError(f"{where}: source must be a string")
        if not (count(self.channels) and self.channels <= MAX_CHANNELS):
            raise HardwareModelError(
                f"{where}: channels must be an integer of 1 to {MAX_CHANNELS}, "
                f"got {shown(self.channels)}"
            )
        for w in self.weights:
            if w.channels > self.channels:
                raise HardwareModelError(
                    f"{where}: weights.{w.tier}: channels {w.channels} exceeds the "
                    f"controller's {self.channels}"
                )

    @property
    def tiers(self) -> tuple[str, ...]:
        """The tiers behind the controller, in the order of ``weights``."""
        return tuple(w.tier for w in self.weights)

    def spread(self, tier: str) -> float:
        """How many times its share of the channels' time a byte on ``tier`` takes from each
        channel it uses: ``channels / k`` for a tier on ``k`` of them (1 on all of them)."""
        w = self.weight(tier)
        if w is None or not w.channels:
            return 1.0
        return self.channels / w.channels

    def weight(self, tier: str) -> BusWeight | None:
        """The bus weights of ``tier``, or None for a tier not behind the controller."""
        for w in self.weights:
            if w.tier == tier:
                return w
        return None


__all__ = [
    "ARBITRATIONS",
    "MAX_CHANNELS",
    "MAX_WEIGHT",
    "MECHANISM_FIELDS",
    "BusWeight",
    "MemoryController",
]
