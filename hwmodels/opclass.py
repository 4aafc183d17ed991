"""What kind of kernel an op name names: the op classes the roofline's efficiencies are
given for (:class:`OpClass`, :func:`op_class`), from PyTorch's exact names or, for any other
name (tmsim's zoo, a user's graph), from words in it."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


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


#: PyTorch's matrix and vector products by exact name (attention aside).
ATEN_PRODUCTS = (
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
                *ATEN_PRODUCTS,
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


__all__ = ["ATEN_PRODUCTS", "OpClass", "op_class"]
