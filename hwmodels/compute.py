"""The compute device: peak FLOP/s by dtype, efficiency by op class, launch overhead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

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


#: PyTorch's operators by exact name (``torch.ops.aten.NAME``, the overload left out) and
#: their classes. Substrings mislead on these names (``addmm`` and ``mm`` name no "matmul";
#: ``prims.convert_element_type`` holds "conv"), so an op spelled ``aten.NAME`` or
#: ``prims.NAME`` is looked up here and is ELEMENTWISE when absent. Fused attention
#: (``_scaled_dot_product_*``) is two or more matrix products per head: MATMUL.
_ATEN_CLASSES: Mapping[str, OpClass] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                "convolution",
                "convolution_backward",
                "_convolution",
                "conv1d",
                "conv2d",
                "conv3d",
                "conv_transpose1d",
                "conv_transpose2d",
                "conv_transpose3d",
                "cudnn_convolution",
                "cudnn_convolution_transpose",
                "mkldnn_convolution",
                "_slow_conv2d_forward",
                "_slow_conv2d_backward",
                "_conv_depthwise2d",
            ),
            OpClass.CONV,
        ),
        **dict.fromkeys(
            (
                "mm",
                "addmm",
                "bmm",
                "baddbmm",
                "addbmm",
                "matmul",
                "linear",
                "mv",
                "addmv",
                "dot",
                "einsum",
                "_scaled_mm",
                "scaled_dot_product_attention",
                "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_flash_attention_backward",
                "_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_flash_attention_for_cpu_backward",
                "_scaled_dot_product_efficient_attention",
                "_scaled_dot_product_efficient_attention_backward",
                "_scaled_dot_product_cudnn_attention",
                "_scaled_dot_product_cudnn_attention_backward",
                "_flash_attention_forward",
                "_flash_attention_backward",
                "_efficient_attention_forward",
                "_efficient_attention_backward",
            ),
            OpClass.MATMUL,
        ),
        **dict.fromkeys(
            (
                "native_batch_norm",
                "native_batch_norm_backward",
                "_native_batch_norm_legit",
                "_native_batch_norm_legit_functional",
                "_native_batch_norm_legit_no_training",
                "batch_norm_backward",
                "cudnn_batch_norm",
                "cudnn_batch_norm_backward",
                "native_layer_norm",
                "native_layer_norm_backward",
                "native_group_norm",
                "native_group_norm_backward",
                "_fused_rms_norm",
                "_fused_rms_norm_backward",
                "_softmax",
                "_softmax_backward_data",
                "_log_softmax",
                "_log_softmax_backward_data",
                "_safe_softmax",
            ),
            OpClass.NORM,
        ),
    }
)
#: The namespaces whose op names :data:`_ATEN_CLASSES` decides.
_ATEN_NAMESPACES = ("aten", "prims")


def op_class(op: str) -> OpClass:
    """Class of the op named ``op`` (case-insensitive).

    A PyTorch operator spelled ``aten.NAME`` or ``prims.NAME`` (an overload such as
    ``.default`` may follow) takes its class from an exact table of names: convolutions and
    their backward -> CONV; ``mm``, ``addmm``, ``bmm``, ``baddbmm``, fused attention ->
    MATMUL; batch, layer and group norm, softmax and their backward -> NORM; any other ->
    ELEMENTWISE. Any other op name is matched by substring: ``conv`` -> CONV; ``matmul``,
    ``gemm``, ``bmm``, ``linear``, ``dense``, ``fully_connected``, ``inner_product``,
    ``einsum`` -> MATMUL; ``norm``, ``softmax`` -> NORM; anything else -> ELEMENTWISE, the
    documented default: an op we do not recognise is assumed to stream memory, which is what
    most non-GEMM kernels of a training step do.
    """
    name = op.lower()
    namespace, _, rest = name.partition(".")
    if namespace in _ATEN_NAMESPACES and rest:
        return _ATEN_CLASSES.get(rest.partition(".")[0], OpClass.ELEMENTWISE)
    for cls, keys in _CLASS_KEYWORDS:
        if any(k in name for k in keys):
            return cls
    return OpClass.ELEMENTWISE


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
