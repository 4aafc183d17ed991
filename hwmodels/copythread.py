"""A CPU thread that copies beside a kernel: latency-bound, and on a core the kernel may need.

On a CPU an asynchronous copy is one helper thread (AutoTM's nested OpenMP section beside the
kernel's; ``reference/interference-and-solvers.md`` A1 item 4). :class:`CopyThread` describes
it as the replay's ``controller`` interference level uses it (:mod:`tmsim.sim.threads`):

- **idle rate.** One thread keeps a fixed number of cache lines in flight (its line-fill
  buffers), so by Little's law it reads a tier at ``read_bw`` = lines x 64 B / latency and
  writes at ``write_bw``, the single-thread rates a tier reaches (``tiers``). Its reads and
  its non-temporal writes share those buffers, so per byte copied it spends the time of a read
  plus that of a write: ``1 / (1 / read_bw(src) + 1 / write_bw(dst))`` (:meth:`idle_bw`).
  The presets' asynchronous copy rates are these values.
- **loaded latency.** When the other traffic offers a fraction ``rho`` of a resource the copy
  uses (channel, tier), every line it has in flight waits longer:
  ``L(rho) = L0 * min(1 + latency_slope * rho / (1 - rho), max_latency_factor)``, and its rate
  falls by the same factor (:meth:`latency_factor`).
- **core.** ``"shared"``: the thread takes a core one of the kernel's threads runs on (AutoTM's
  24 kernel threads pinned one per core, plus the copy). While both run, the copy gets
  ``1 / (1 + core_slowdown)`` of its rate and the kernel, ended by its slowest statically
  partitioned thread, ``1 / (1 + core_slowdown * straggler)`` of its own.
  ``"dedicated"``: the copy has a core of its own, taken from the kernels' pool, so every
  kernel's compute takes ``cores / (cores - 1)`` of its time while the plan copies beside
  kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import RATE, in_range, is_number, rate, shown
from hwmodels.errors import HardwareModelError

#: Where the copy thread's core comes from (see the module documentation).
CORES = ("shared", "dedicated")

#: Largest loaded-latency slope and latency factor: beyond any measured memory system, and
#: small enough that every time stays finite.
MAX_SLOPE = 1e3
MAX_LATENCY_FACTOR = 1e3


@dataclass(frozen=True, slots=True)
class ThreadRates:
    """What one thread reaches on ``tier`` alone: ``read_bw_bytes_per_s`` and
    ``write_bw_bytes_per_s`` (rates, 1 to 1e21)."""

    tier: str
    read_bw_bytes_per_s: float
    write_bw_bytes_per_s: float

    def __post_init__(self) -> None:
        where = f"copy_thread: tiers.{self.tier}"
        if not (isinstance(self.tier, str) and self.tier.strip()):
            raise HardwareModelError("copy_thread: a tier entry must name a tier")
        for name in ("read_bw_bytes_per_s", "write_bw_bytes_per_s"):
            value = getattr(self, name)
            if not rate(value):
                raise HardwareModelError(f"{where}: {name} must be {RATE}, got {shown(value)}")


@dataclass(frozen=True, slots=True)
class CopyThread:
    """A CPU copy thread (see the module documentation).

    - ``tiers``: single-thread rates of each tier the thread copies between (one or more, each
      once);
    - ``latency_slope``: ``a`` in the loaded-latency rule, in [0, 1e3];
    - ``max_latency_factor``: the most the loaded latency exceeds the idle one, in [1, 1e3];
    - ``core``: one of :data:`CORES`;
    - ``core_slowdown``: ``s``, how much longer a thread takes on a core it shares, in [0, 1e3];
    - ``straggler``: ``sigma``, the fraction of the slowed thread's delay the kernel waits for
      (1: static partitioning, the kernel ends with its slowest thread; 1/cores: dynamic), in
      [0, 1];
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` as ``copy_thread: <field> ...`` for a bad value. Whether
    the tiers exist is checked by :class:`hwmodels.Platform`.
    """

    tiers: tuple[ThreadRates, ...]
    latency_slope: float = 0.0
    max_latency_factor: float = 1.0
    core: str = "shared"
    core_slowdown: float = 0.0
    straggler: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        where = "copy_thread"
        names = [t.tier for t in self.tiers]
        if not names:
            raise HardwareModelError(f"{where}: tiers must name one or more tiers")
        if len(set(names)) != len(names):
            raise HardwareModelError(f"{where}: tiers name a tier twice")
        bounds = {
            "latency_slope": (0.0, MAX_SLOPE),
            "max_latency_factor": (1.0, MAX_LATENCY_FACTOR),
            "core_slowdown": (0.0, MAX_SLOPE),
            "straggler": (0.0, 1.0),
        }
        for name, (low, high) in bounds.items():
            value = getattr(self, name)
            if not (is_number(value) and in_range(value, low, high)):
                raise HardwareModelError(
                    f"{where}: {name} must be a number in [{low:g}, {high:g}], got {shown(value)}"
                )
        if self.core not in CORES:
            raise HardwareModelError(
                f"{where}: core must be one of {', '.join(CORES)}, got {self.core!r}"
            )
        if not isinstance(self.source, str):
            raise HardwareModelError(f"{where}: source must be a string")

    @property
    def tier_names(self) -> tuple[str, ...]:
        """The tiers the thread copies between, in the order of ``tiers``."""
        return tuple(t.tier for t in self.tiers)

    def rates(self, tier: str) -> ThreadRates | None:
        """The single-thread rates of ``tier``, or None for a tier the thread does not copy."""
        for t in self.tiers:
            if t.tier == tier:
                return t
        return None

    def copies(self, src: str, dst: str) -> bool:
        """Whether a copy from ``src`` to ``dst`` is this thread's (both tiers listed)."""
        return self.rates(src) is not None and self.rates(dst) is not None

    def idle_bw(self, src: str, dst: str) -> float:
        """Bytes per second one thread copies from ``src`` to ``dst`` on an idle machine:
        ``1 / (1 / read_bw(src) + 1 / write_bw(dst))``. Raises :class:`HardwareModelError`
        for a tier the thread does not copy."""
        a, b = self.rates(src), self.rates(dst)
        if a is None or b is None:
            missing = src if a is None else dst
            raise HardwareModelError(f"copy_thread: tiers has no entry for {missing!r}")
        return 1.0 / (1.0 / a.read_bw_bytes_per_s + 1.0 / b.write_bw_bytes_per_s)

    def latency_factor(self, utilisation: float) -> float:
        """How many times its idle latency a line waits when other traffic fills the fraction
        ``utilisation`` of a resource: ``min(1 + a * u / (1 - u), max_latency_factor)``, 1 at
        ``u <= 0`` or ``a = 0``, and ``max_latency_factor`` at ``u >= 1`` (with ``a > 0``)."""
        u = min(max(float(utilisation), 0.0), 1.0)
        if self.latency_slope == 0 or u <= 0:
            return 1.0
        if u >= 1.0:
            return float(self.max_latency_factor)
        return min(1.0 + self.latency_slope * u / (1.0 - u), float(self.max_latency_factor))

    def kernel_core_factor(self) -> float:
        """The factor a kernel's rate takes while a copy thread shares one of its cores."""
        return 1.0 / (1.0 + self.core_slowdown * self.straggler)

    def thread_core_factor(self) -> float:
        """The factor a copy thread's rate takes while it shares a core with a kernel."""
        return 1.0 / (1.0 + self.core_slowdown)


__all__ = ["CORES", "CopyThread", "ThreadRates"]
