"""The dtypes eager PyTorch refuses in a traced step, where fake tensors let them through.

Fake tensors run an op's meta function, which computes the output's shape and dtype but, for
several ops, checks no dtype: ``aten.addmm`` of an int64 input and an fp32 weight traces
(``Linear`` on ``--input 16:int64``) where eager PyTorch refuses it ("mat1 and mat2 must have
the same dtype"). :func:`check_dtypes` walks the traced joint graph in execution order and
raises for the first op eager PyTorch would refuse, by the rules it keeps on every device
(checked against eager PyTorch 2.x on the CPU):

- matrix products, convolutions and fused attention (:data:`PRODUCTS`): the tensors at the
  listed positions (operands, bias; attention's query, key and value) share one dtype, and
  none is ``bool``;
- batch, layer and group norm (:data:`NORMS`): the input is a float of
  :data:`NORM_INPUTS`, and its weight and bias are of the input's dtype, or fp32 under an
  fp16 or bf16 input (mixed precision).

Integer and fp8 operands of one dtype are left to the device: the CPU multiplies integer
matrices, where a GPU's kernels refuse them. Other ops are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch

from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.specs import TMSIM_DTYPES

_ATTENTION = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention",
)
#: Ops (base names) whose tensors at these argument positions must share one dtype, not bool.
PRODUCTS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {
        **dict.fromkeys(("mm", "bmm", "mv", "dot", "vdot", "matmul"), (0, 1)),
        **dict.fromkeys(("addmm", "baddbmm", "addbmm", "addmv", "addr"), (0, 1, 2)),
        **dict.fromkeys(("convolution", "_convolution", "convolution_backward"), (0, 1, 2)),
        **dict.fromkeys(_ATTENTION, (0, 1, 2)),
    }
)
#: Normalizations (base names): the position of the input and those of its parameters.
NORMS: Mapping[str, tuple[int, tuple[int, ...]]] = MappingProxyType(
    {
        "native_layer_norm": (0, (2, 3)),
        "native_group_norm": (0, (1, 2)),
        **dict.fromkeys(
            (
                "native_batch_norm",
                "_native_batch_norm_legit",
                "_native_batch_norm_legit_functional",
                "_native_batch_norm_legit_no_training",
            ),
            (0, (1, 2)),
        ),
    }
)
#: The inputs a normalization takes, and those whose parameters may be fp32 (mixed precision).
NORM_INPUTS = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_MIXED = (torch.float16, torch.bfloat16)


def dtype_name(dtype: Any) -> str:
    """``dtype`` by its tmsim name (``int64``, ``fp32``), else torch's (``complex64``)."""
    return TMSIM_DTYPES.get(dtype) or str(dtype).removeprefix("torch.")


def _dtype_at(node: Any, i: int) -> Any:
    """The dtype of the tensor at argument position ``i`` of ``node`` (None if none)."""
    arg = node.args[i] if i < len(node.args) else None
    value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return value.dtype if isinstance(value, torch.Tensor) else None


def _refusal(op: str, node: Any) -> str:
    """Why eager PyTorch refuses ``node`` (running op ``op``, its base name) ("" if not)."""
    if op in PRODUCTS:
        dtypes = [d for i in PRODUCTS[op] if (d := _dtype_at(node, i)) is not None]
        distinct = list(dict.fromkeys(dtypes))
        if len(distinct) > 1:
            shown = " and ".join(dtype_name(d) for d in distinct)
            return f"takes operands of one dtype, got {shown}"
        if torch.bool in distinct:
            return "takes no bool operands"
        return ""
    at, params = NORMS[op]
    given = _dtype_at(node, at)
    if given is None:
        return ""
    if given not in NORM_INPUTS:
        known = ", ".join(dtype_name(d) for d in NORM_INPUTS)
        return f"takes an input of {known}, got {dtype_name(given)}"
    allowed = (given, torch.float32) if given in _MIXED else (given,)
    other = next((d for i in params if (d := _dtype_at(node, i)) not in (None, *allowed)), None)
    if other is None:
        return ""
    return (
        f"takes parameters of its input's dtype (or fp32 under fp16 and bf16), got input "
        f"{dtype_name(given)} and parameters {dtype_name(other)}"
    )


def check_dtypes(gm: Any, name: str) -> None:
    """Raise :class:`TorchImportError` in one line naming the op and the dtypes for the first
    op of the joint graph ``gm`` (of the step ``name``) that eager PyTorch refuses for its
    dtypes (module documentation)."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            continue
        full = str(schema.name).replace("::", ".")
        op = full.rpartition(".")[2]
        if op not in PRODUCTS and op not in NORMS:
            continue
        why = _refusal(op, node)
        if why:
            raise TorchImportError(
                f"cannot trace {name}: {full} {why}, which eager PyTorch refuses (give inputs "
                "in the dtype the model computes in)"
            )
