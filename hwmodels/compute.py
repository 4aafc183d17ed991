"""The compute device: peak FLOP/s by dtype, efficiency by op class, launch overhead."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hwmodels._checks import COUNT, FRACTION, LATENCY, RATE, count, fraction, latency, rate, shown
from hwmodels.errors import HardwareModelError


class OpClass(StrEnum):
    """Kernel classes that reach different fractions of peak compute and bandwidth.

    - ``CONV``: convolutions, forward and backward (dense, usually compute-bound).
    - ``MATMUL``: matrix products (fully connected / linear layers, GEMM, batched GEMM).
    - ``NORM``: normalizations and softmax (reductions over a tensor, then a streaming pass).
    - ``ELEMENTWISE``: everything that streams memory: activations, additions, pooling,
      concatenation, gradient accumulation, optimizer updates. The default for unknown ops.
    """

    CONV = "conv"
    MATMUL = "matmul"
    NORM = "norm"
    ELEMENTWISE = "elementwise"


#: Substrings of an op name that decide its class, tried in this order. Convolution comes
#: first so that e.g. ``conv2d_backward_data`` is a convolution, not something else.
_CLASS_KEYWORDS: tuple[tuple[OpClass, tuple[str, ...]], ...] = (
    (OpClass.CONV, ("conv",)),
    (
        OpClass.MATMUL,
        ("matmul", "gemm", "bmm", "linear", "dense", "fully_connected", "inner_product", "einsum"),
    ),
    (OpClass.NORM, ("norm", "softmax")),
)


def op_class(op: str) -> OpClass:
    """Class of the op named ``op`` (case-insensitive substring match).

    ``conv`` -> CONV; ``matmul``, ``gemm``, ``bmm``, ``linear``, ``dense``,
    ``fully_connected``, ``inner_product``, ``einsum`` -> MATMUL; ``norm``, ``softmax`` -> NORM;
    anything else -> ELEMENTWISE, the documented default: an op we do not recognise is assumed
    to stream memory, which is what most non-GEMM kernels of a training step do.
    """
    name = op.lower()
    for cls, keys in _CLASS_KEYWORDS:
        if any(k in name for k in keys):
            return cls
    return OpClass.ELEMENTWISE


#: Alternative spellings of dtypes, mapped to the canonical short names used in presets.
_DTYPE_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
}


def canonical_dtype(dtype: str) -> str:
    """The preset spelling of ``dtype`` (``float32`` -> ``fp32``, ``bfloat16`` -> ``bf16``)."""
    d = dtype.lower()
    return _DTYPE_ALIASES.get(d, d)


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
      (:func:`canonical_dtype`); each peak 1 to 1e21 FLOP/s, no dtype twice.
    - ``efficiencies``: one :class:`ClassEfficiency` for every :class:`OpClass`.
    - ``launch_overhead_s``: fixed time added to every kernel (0 to 1 s).
    - ``cores``: cores (CPU) or streaming multiprocessors (GPU) a kernel runs on; a kernel
      presents this many concurrent writers to a memory tier (1 to 2**24).
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` naming the field if a value is bad or outside its range
    (the ranges keep every time finite, :mod:`hwmodels._checks`).
    """

    name: str
    peak_flop_per_s: tuple[tuple[str, float], ...]
    efficiencies: tuple[ClassEfficiency, ...]
    launch_overhead_s: float
    cores: int
    source: str = ""

    def __post_init__(self) -> None:
        where = f"compute {self.name!r}"
        if not self.peak_flop_per_s:
            raise HardwareModelError(f"{where}: peak_flop_per_s lists no dtype")
        seen: set[str] = set()
        for dtype, peak in self.peak_flop_per_s:
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
        try:
            key = OpClass(cls)
        except ValueError:
            raise HardwareModelError(
                f"unknown op class {cls!r}; known: {', '.join(c.value for c in OpClass)}"
            ) from None
        for e in self.efficiencies:
            if e.op_class is key:
                return e
        raise AssertionError("validated in __post_init__")  # pragma: no cover
