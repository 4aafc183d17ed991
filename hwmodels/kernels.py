"""Kernel families and a compute device's calibrated kernel model.

The class roofline of :mod:`hwmodels.compute` gives every kernel of a class one fraction of
peak. Measured profiles of GPU training steps (an H200: ``calibration/h200/`` in the
repository) say otherwise: what a kernel costs depends on what the framework runs for it. A
:class:`KernelModel` holds those mechanisms for one device:

- **math modes** (:class:`MathModes`): the arithmetic a framework really uses for an fp32
  convolution or matrix product (PyTorch's defaults: convolutions in TF32 on tensor cores,
  matrix products in full fp32), so a kernel's peak is that of its math mode;
- **passes** per :class:`KernelFamily`: how many times a kernel of the family moves its
  operand bytes through memory (batch norm reads its input twice, a masked fill with a
  broadcast mask runs at a fraction of the stream rate), over the device's measured stream
  rate (``stream_bw_bytes_per_s``);
- **width**: a kernel that splits its work into few independent units (a batch norm reduces
  each channel on its own) cannot keep the device's memory busy; below its family's
  ``saturation_units`` its memory time grows by ``saturation_units / units``;
- **a floor per element** for the non-GEMM families: reductions and transcendental-heavy
  kernels (softmax) take as long in bf16 as in fp32, a time per element, not per byte;
- **size**: every kernel pays ``fixed_s`` on the device (ramp up, tail, a reduction's second
  launch), so small kernels stay far from peak, and none ends before the framework has issued
  the next (``dispatch_s``, the host's time to dispatch one op);
- **alignment**: a tensor-core matrix product whose dimensions are not multiples of
  ``tensor_core_multiple`` elements falls back to slower kernels (``unaligned_efficiency`` of
  the math mode's peak).

:mod:`hwmodels.kernel_time` prices kernels with it. Times are seconds, rates bytes or FLOP
per second, as everywhere in :mod:`hwmodels`. Every
number of a preset says whether it was measured, fitted (by ``tmsim.calibration``, rerunnable
from its data) or assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from hwmodels._checks import (
    FACTOR,
    FRACTION,
    LATENCY,
    RATE,
    factor,
    fraction,
    latency,
    member,
    rate,
    shown,
)
from hwmodels.dtypes import canonical_dtype
from hwmodels.errors import HardwareModelError
from hwmodels.opclass import ATEN_PRODUCTS, OpClass, op_class


class KernelFamily(StrEnum):
    """Kernels that share a cost mechanism. GEMM families (:data:`GEMM_FAMILIES`) are bound by
    their math mode's peak, the others by bytes or elements."""

    CONV = "conv"
    CONV_BACKWARD = "conv_backward"
    MATMUL = "matmul"
    BATCH_NORM = "batch_norm"
    BATCH_NORM_BACKWARD = "batch_norm_backward"
    LAYER_NORM = "layer_norm"
    LAYER_NORM_BACKWARD = "layer_norm_backward"
    SOFTMAX = "softmax"
    SOFTMAX_BACKWARD = "softmax_backward"
    DROPOUT = "dropout"
    DROPOUT_BACKWARD = "dropout_backward"
    MASKED_FILL = "masked_fill"
    POOL = "pool"
    POOL_BACKWARD = "pool_backward"
    CONCAT = "concat"
    OPTIMIZER = "optimizer"
    ELEMENTWISE = "elementwise"


#: The fewest passes a family may make (a kernel that moves a hundredth of its operands).
MIN_PASSES = 0.01

#: Families whose compute is matrix arithmetic at the math mode's peak.
GEMM_FAMILIES = frozenset({KernelFamily.CONV, KernelFamily.CONV_BACKWARD, KernelFamily.MATMUL})

#: Op names (namespace and overload left out) of each family: PyTorch's ATen names as an
#: eager profile records them and as ``tmsim import`` traces them (the decomposed joint
#: graph), tmsim's optimizer kernels and the zoo's pools and concatenations. Any other name
#: takes its family from its roofline class (:func:`_family_by_class`).
_FAMILY_OPS: Mapping[KernelFamily, tuple[str, ...]] = {
    KernelFamily.CONV: (
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "cudnn_convolution",
        "mkldnn_convolution",
        "_slow_conv2d_forward",
        "_conv_depthwise2d",
    ),
    KernelFamily.CONV_BACKWARD: ("convolution_backward", "_slow_conv2d_backward"),
    KernelFamily.MATMUL: ATEN_PRODUCTS,
    KernelFamily.BATCH_NORM: (
        "batch_norm",
        "cudnn_batch_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional",
        "_native_batch_norm_legit_no_training",
    ),
    KernelFamily.BATCH_NORM_BACKWARD: (
        "cudnn_batch_norm_backward",
        "native_batch_norm_backward",
        "batch_norm_backward",
    ),
    KernelFamily.LAYER_NORM: ("layer_norm", "native_layer_norm", "native_group_norm"),
    KernelFamily.LAYER_NORM_BACKWARD: ("native_layer_norm_backward", "native_group_norm_backward"),
    KernelFamily.SOFTMAX: ("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"),
    KernelFamily.SOFTMAX_BACKWARD: ("_softmax_backward_data", "_log_softmax_backward_data"),
    KernelFamily.DROPOUT: ("dropout", "native_dropout"),
    KernelFamily.DROPOUT_BACKWARD: ("native_dropout_backward", "dropout_backward"),
    KernelFamily.MASKED_FILL: ("masked_fill", "masked_fill_"),
    KernelFamily.POOL: (
        "max_pool2d",
        "max_pool2d_with_indices",
        "avg_pool2d",
        "max_pool",
        "avg_pool",
    ),
    KernelFamily.POOL_BACKWARD: (
        "max_pool2d_with_indices_backward",
        "avg_pool2d_backward",
        "max_pool_backward",
        "avg_pool_backward",
    ),
    KernelFamily.CONCAT: ("cat", "stack", "concat", "concat_backward"),
    KernelFamily.OPTIMIZER: ("sgd_momentum", "adam", "adamw"),
}
_FAMILY_OF: Mapping[str, KernelFamily] = MappingProxyType(
    {name: fam for fam, names in _FAMILY_OPS.items() for name in names}
)


def _pytorch_spelled(name: str) -> bool:
    """Whether the lower-case op name is spelled as PyTorch's: ``aten::``, ``aten.``,
    ``prims.``."""
    return "::" in name or name.startswith(("aten.", "prims."))


def base_op_name(op: str) -> str:
    """``op`` without its namespace and overload: ``aten::add_``, ``aten.add_.Tensor`` and
    ``add_`` all give ``add_``."""
    name = op.strip().lower()
    if "::" in name:
        name = name.rpartition("::")[2]
    elif _pytorch_spelled(name):
        name = name.partition(".")[2].partition(".")[0]
    return name


#: Prefixes of PyTorch's multi-tensor and fused optimizer kernels (``_foreach_addcdiv_``,
#: ``_fused_adamw_``), which an eager profile records for the update.
_OPTIMIZER_PREFIXES = ("_foreach_", "_fused_")


def family_of(op: str) -> KernelFamily:
    """The family of the op named ``op``: :func:`base_op_name` looked up in a table of ATen
    and tmsim names (multi-tensor and fused updates are OPTIMIZER), else the family its
    roofline class gives (:func:`_family_by_class`), so that a name nobody listed (the zoo's
    ``conv2d_backward_data`` or ``flash_attention_bmm``, a user's graph) is timed as the
    kind of kernel it is. An unlisted PyTorch name (``aten::``, ``aten.``, ``prims.``) is
    ELEMENTWISE: words mislead there (``convert_element_type`` holds "conv")."""
    name = base_op_name(op)
    if name.startswith(_OPTIMIZER_PREFIXES):
        return KernelFamily.OPTIMIZER
    family = _FAMILY_OF.get(name)
    if family is not None:
        return family
    if _pytorch_spelled(op.strip().lower()):
        return KernelFamily.ELEMENTWISE  # PyTorch's names: the table is exact for them
    return _family_by_class(name)


def _family_by_class(name: str) -> KernelFamily:
    """The family of an unlisted op: convolutions (their backward where the name says
    ``backward``) and matrix products by :func:`hwmodels.opclass.op_class`; its norms as
    batch norm, softmax (a cross-entropy loss is one) or otherwise layer norm, forward or
    backward; anything else ELEMENTWISE."""
    cls = op_class(name)
    backward = "backward" in name
    if cls is OpClass.CONV:
        return KernelFamily.CONV_BACKWARD if backward else KernelFamily.CONV
    if cls is OpClass.MATMUL:
        return KernelFamily.MATMUL
    if cls is OpClass.NORM:
        if "batch_norm" in name:
            pair = (KernelFamily.BATCH_NORM, KernelFamily.BATCH_NORM_BACKWARD)
        elif "softmax" in name:
            pair = (KernelFamily.SOFTMAX, KernelFamily.SOFTMAX_BACKWARD)
        else:
            pair = (KernelFamily.LAYER_NORM, KernelFamily.LAYER_NORM_BACKWARD)
        return pair[backward]
    return KernelFamily.ELEMENTWISE


class MathMode(StrEnum):
    """How an fp32 GEMM computes: ``FP32`` on the vector units, ``TF32`` on tensor cores."""

    FP32 = "fp32"
    TF32 = "tf32"


@dataclass(frozen=True, slots=True)
class MathModes:
    """The math mode of fp32 convolutions and fp32 matrix products; PyTorch's defaults:
    ``torch.backends.cudnn.allow_tf32 = True`` (convolutions in TF32) and
    ``torch.backends.cuda.matmul.allow_tf32 = False`` (``float32_matmul_precision`` =
    "highest": matrix products in fp32)."""

    conv_fp32: MathMode = MathMode.TF32
    matmul_fp32: MathMode = MathMode.FP32

    def __post_init__(self) -> None:
        for name in ("conv_fp32", "matmul_fp32"):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, MathMode(value))
            except ValueError:
                raise HardwareModelError(
                    f"math mode {name} must be one of {', '.join(m.value for m in MathMode)}, "
                    f"got {value!r}"
                ) from None

    def peak_dtype(self, family: KernelFamily, dtype: str) -> str:
        """The peak a GEMM of ``family`` in ``dtype`` runs at: ``tf32`` for an fp32 GEMM whose
        mode is TF32, else ``dtype`` (canonical)."""
        d = canonical_dtype(dtype)
        if d != "fp32":
            return d
        conv = family in (KernelFamily.CONV, KernelFamily.CONV_BACKWARD)
        mode = self.conv_fp32 if conv else self.matmul_fp32
        return mode.value


@dataclass(frozen=True, slots=True)
class FamilyCost:
    """What a kernel of ``family`` costs beside the device's fixed cost.

    - ``passes``: bytes moved over the operand bytes (memory time = passes x bytes / the
      stream rate); :data:`MIN_PASSES` to 1e6.
    - ``compute_efficiency``: GEMM families: fraction of the math mode's peak, in (1e-6, 1].
    - ``element_s``: other families: seconds per element of the largest operand, a floor
      that does not depend on the dtype; 0 to 1 s.
    - ``fixed_s``: the family's own fixed device time per kernel (0 to 1 s; a convolution
      runs several kernels, layout transforms among them), or None: the device's.
    - ``saturation_units``: the independent units of work (a batch norm's channels, one
      reduction each) a kernel of the family needs to reach its memory rate; a kernel with
      fewer, ``u``, moves its bytes ``saturation_units / u`` times slower. 0 to 1e9; 0: no
      such limit.
    """

    family: KernelFamily
    passes: float
    compute_efficiency: float = 1.0
    element_s: float = 0.0
    fixed_s: float | None = None
    saturation_units: float = 0.0

    def __post_init__(self) -> None:
        where = f"kernel family {self.family.value}"
        if not (factor(self.passes) and self.passes >= MIN_PASSES):
            raise HardwareModelError(
                f"{where}: passes must be {FACTOR} and at least {MIN_PASSES}, got "
                f"{shown(self.passes)}"
            )
        if not fraction(self.compute_efficiency):
            raise HardwareModelError(
                f"{where}: compute_efficiency must be {FRACTION}, got "
                f"{shown(self.compute_efficiency)}"
            )
        if not latency(self.element_s):
            raise HardwareModelError(
                f"{where}: element_s must be {LATENCY}, got {shown(self.element_s)}"
            )
        if self.fixed_s is not None and not latency(self.fixed_s):
            raise HardwareModelError(
                f"{where}: fixed_s must be {LATENCY} or None, got {shown(self.fixed_s)}"
            )
        units = self.saturation_units
        if isinstance(units, bool) or not isinstance(units, int | float) or not 0 <= units <= 1e9:
            raise HardwareModelError(
                f"{where}: saturation_units must be a number in [0, 1e9], got {shown(units)}"
            )


@dataclass(frozen=True, slots=True)
class KernelModel:
    """A compute device's calibrated kernel model (module documentation).

    - ``stream_bw_bytes_per_s``: the rate a streaming kernel reaches on the device's memory
      (one pass: bytes read plus written over time);
    - ``fixed_s``: device time every kernel pays but the optimizer's (PyTorch's multi-tensor
      update runs one kernel for many parameters);
    - ``dispatch_s``: the host's time to issue one kernel (the framework's dispatch): the
      host issues kernels one after another and the device waits where it falls behind
      (:func:`dispatch_waits`);
    - ``tensor_core_multiple``, ``unaligned_efficiency``: a tensor-core GEMM with a dimension
      not a multiple of that many elements runs at that fraction of its peak;
    - ``math``: :class:`MathModes`; ``families``: one :class:`FamilyCost` for every
      :class:`KernelFamily`; ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` naming the field for a value outside its range or a
    family missing or listed twice.
    """

    stream_bw_bytes_per_s: float
    fixed_s: float
    dispatch_s: float
    families: tuple[FamilyCost, ...]
    math: MathModes = MathModes()
    tensor_core_multiple: int = 8
    unaligned_efficiency: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        where = "compute kernels"
        if not rate(self.stream_bw_bytes_per_s):
            raise HardwareModelError(
                f"{where}: stream_bw must be {RATE}, got {shown(self.stream_bw_bytes_per_s)}"
            )
        for name in ("fixed_s", "dispatch_s"):
            if not latency(getattr(self, name)):
                raise HardwareModelError(
                    f"{where}: {name} must be {LATENCY}, got {shown(getattr(self, name))}"
                )
        if not fraction(self.unaligned_efficiency):
            raise HardwareModelError(
                f"{where}: unaligned_efficiency must be {FRACTION}, got "
                f"{shown(self.unaligned_efficiency)}"
            )
        multiple = self.tensor_core_multiple
        if isinstance(multiple, bool) or not isinstance(multiple, int) or not 1 <= multiple <= 1024:
            raise HardwareModelError(
                f"{where}: tensor_core_multiple must be an integer in [1, 1024], got "
                f"{shown(multiple)}"
            )
        if not isinstance(self.math, MathModes):
            raise HardwareModelError(f"{where}: math must be MathModes")
        given = [f.family for f in self.families]
        missing = [f.value for f in KernelFamily if f not in given]
        if missing or len(given) != len(set(given)):
            raise HardwareModelError(
                f"{where}: families must list each kernel family once; missing "
                f"{', '.join(missing) or 'none'}, given {[f.value for f in given]}"
            )

    def family(self, family: KernelFamily | str) -> FamilyCost:
        """The cost of ``family``; raises :class:`HardwareModelError` for an unknown one."""
        key = member(KernelFamily, family, "kernel family")
        return next(f for f in self.families if f.family is key)
