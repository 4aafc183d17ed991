"""The compute device: peak FLOP/s by dtype, efficiency by op class, launch overhead."""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import (
    COUNT,
    FRACTION,
    LATENCY,
    RATE,
    count,
    fraction,
    latency,
    member,
    rate,
    shown,
)
from hwmodels.dtypes import canonical_dtype, unknown_peak_dtype
from hwmodels.errors import HardwareModelError
from hwmodels.kernels import KernelModel
from hwmodels.opclass import OpClass


@dataclass(frozen=True, slots=True)
class ClassEfficiency:
    """Fractions of peak an op class reaches: ``compute`` of FLOP/s, ``memory`` of bandwidth.

    Both in [1e-6, 1] (a smaller fraction would let a time grow past any bound,
    :mod:`hwmodels._checks`). Raises :class:`HardwareModelError` otherwise.
    """

    op_class: OpClass
    compute: float
    memory: float

    def __post_init__(self) -> None:
        for name in ("compute", "memory"):
            value = getattr(self, name)
            if not fraction(value):
                raise HardwareModelError(
                    f"compute efficiency {self.op_class.value}: {name} must be {FRACTION}, "
                    f"got {shown(value)}"
                )


@dataclass(frozen=True, slots=True)
class Compute:
    """A compute device.

    - ``peak_flop_per_s``: ``(dtype, FLOP/s)`` pairs, dtypes in canonical spelling
      (:func:`canonical_dtype`) and among :data:`~hwmodels.dtypes.PEAK_DTYPES` (those kernels
      compute in, and tf32); each peak 1 to 1e21 FLOP/s, no dtype twice.
    - ``efficiencies``: one :class:`ClassEfficiency` for every :class:`OpClass`.
    - ``launch_overhead_s``: fixed time added to every kernel (0 to 1 s).
    - ``cores``: cores (CPU) or streaming multiprocessors (GPU) a kernel runs on; a kernel
      presents this many concurrent writers to a memory tier (1 to 2**24).
    - ``source``: where the numbers come from.
    - ``kernels``: the calibrated kernel model (:class:`~hwmodels.kernels.KernelModel`) that
      prices kernels in place of the class efficiencies where given (its GEMMs' peaks are
      ``peak_flop_per_s``, which may then list ``tf32``); None: the class roofline.

    Raises :class:`HardwareModelError` naming the field if a value is bad or outside its range
    (the ranges keep every time finite, :mod:`hwmodels._checks`).
    """

    name: str
    peak_flop_per_s: tuple[tuple[str, float], ...]
    efficiencies: tuple[ClassEfficiency, ...]
    launch_overhead_s: float
    cores: int
    source: str = ""
    kernels: KernelModel | None = None

    def __post_init__(self) -> None:
        where = f"compute {self.name!r}"
        if not self.peak_flop_per_s:
            raise HardwareModelError(f"{where}: peak_flop_per_s lists no dtype")
        seen: set[str] = set()
        for dtype, peak in self.peak_flop_per_s:
            if not isinstance(dtype, str) or unknown_peak_dtype(dtype):
                why = unknown_peak_dtype(dtype) if isinstance(dtype, str) else "not a string"
                raise HardwareModelError(f"{where}: peak_flop_per_s: {why}")
            if dtype != canonical_dtype(dtype):
                raise HardwareModelError(
                    f"{where}: dtype {dtype!r} should be spelled {canonical_dtype(dtype)!r}"
                )
            if dtype in seen:
                raise HardwareModelError(f"{where}: dtype {dtype!r} listed twice")
            seen.add(dtype)
            if not rate(peak):
                raise HardwareModelError(
                    f"{where}: peak_flop_per_s[{dtype}] must be {RATE}, got {shown(peak)}"
                )
        classes = [e.op_class for e in self.efficiencies]
        missing = [c.value for c in OpClass if c not in classes]
        if missing or len(classes) != len(set(classes)):
            raise HardwareModelError(
                f"{where}: efficiencies must list each op class once "
                f"({', '.join(c.value for c in OpClass)}); missing {missing or 'none'}, "
                f"given {[c.value for c in classes]}"
            )
        if not latency(self.launch_overhead_s):
            raise HardwareModelError(
                f"{where}: launch_overhead_s must be {LATENCY}, got {shown(self.launch_overhead_s)}"
            )
        if not count(self.cores):
            raise HardwareModelError(f"{where}: cores must be {COUNT}, got {shown(self.cores)}")
        if self.kernels is not None and not isinstance(self.kernels, KernelModel):
            raise HardwareModelError(f"{where}: kernels must be a KernelModel or None")

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes with a peak, in the order given."""
        return tuple(d for d, _ in self.peak_flop_per_s)

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (any spelling :func:`canonical_dtype` knows).

        Raises :class:`HardwareModelError` if the device has no peak for it.
        """
        d = canonical_dtype(dtype)
        for name, value in self.peak_flop_per_s:
            if name == d:
                return float(value)
        raise HardwareModelError(
            f"compute {self.name!r}: no peak FLOP/s for dtype {dtype!r}; "
            f"known: {', '.join(self.dtypes)}"
        )

    def efficiency(self, cls: OpClass | str) -> ClassEfficiency:
        """Efficiencies of op class ``cls``. Raises :class:`HardwareModelError` if unknown."""
        key = member(OpClass, cls, "op class")
        for e in self.efficiencies:
            if e.op_class is key:
                return e
        raise AssertionError("validated in __post_init__")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class HostCompute:
    """The host's CPU beside a platform's compute device (a GPU's host), which may run some
    kernels itself (an optimizer step offloaded to the host, as in ZeRO-Offload).

    - ``compute``: the CPU as a :class:`Compute` (its peaks, efficiencies, launch overhead and
      cores, which a kernel presents as writers to a tier);
    - ``kernel_tiers``: names of the tiers it reads and writes directly (its own memory),
      at their own rates (no kernel link): at least one, none twice. Whether they are tiers
      of the platform is :class:`~hwmodels.platform.Platform`'s check.

    Raises :class:`HardwareModelError` for a ``compute`` that is not a :class:`Compute` or a
    tier list that is empty, names a tier twice or holds something other than names.
    """

    compute: Compute
    kernel_tiers: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.compute, Compute):
            raise HardwareModelError("host_compute: compute must be a Compute")
        tiers = self.kernel_tiers
        if not isinstance(tiers, tuple) or not all(isinstance(t, str) for t in tiers):
            raise HardwareModelError("host_compute: kernel_tiers must be a tuple of tier names")
        if not tiers:
            raise HardwareModelError("host_compute: kernel_tiers is empty")
        if len(set(tiers)) != len(tiers):
            raise HardwareModelError("host_compute: kernel_tiers lists a tier twice")

    def check_tiers(self, where: str, tier_names: tuple[str, ...], hidden: str | None) -> None:
        """Raise :class:`HardwareModelError` (prefixed ``where``) unless every tier of
        ``kernel_tiers`` is one of ``tier_names`` and none is ``hidden`` (a 2LM cache tier)."""
        for t in self.kernel_tiers:
            if t not in tier_names:
                raise HardwareModelError(
                    f"{where}: host_compute: kernel_tiers names unknown tier {t!r}; tiers are "
                    f"{', '.join(tier_names)}"
                )
            if t == hidden:
                raise HardwareModelError(
                    f"{where}: host_compute: the cache tier {t!r} is hidden in memory mode"
                )
