"""The kernels a CUDA device runs where the CPU trace records CPU-only ones.

``tmsim import`` traces on the CPU (fake tensors need no GPU; a fake CUDA trace without one
neither picks a GPU's fused-attention backend, falling back to the math path, nor runs its
backward). PyTorch dispatches a few ops differently on a GPU, and for a GPU target
(:data:`DEVICES`) the reduction of the joint graph renames them and gives their outputs the
sizes the GPU kernel allocates, from PyTorch's own rules (ATen's ``sdp_utils`` and the meta
functions in ``torch/_meta_registrations.py``):

- fused attention (``scaled_dot_product_attention``): the CPU runs
  ``_scaled_dot_product_flash_attention_for_cpu``. CUDA tries FlashAttention first, which
  takes fp16 or bf16 with a head dimension of at most 256 that is a multiple of 8 and no
  attention mask; else the memory-efficient kernel (any float, masks too), whose log-sum-exp
  rows are padded to a multiple of 32 queries: ``(batch, heads, ceil(L / 32) * 32)`` fp32
  where FlashAttention's and the CPU's are ``(batch, heads, L)``. The backward follows its
  forward's choice.

Other ops the joint graph holds (batch norm's functional form, matrix products, element-wise
kernels) are the same ATen ops on either device; what differs there is how fast they run,
the cost model's business (math modes, :mod:`hwmodels.kernels`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The devices an import may target.
DEVICES = ("cpu", "cuda")

_CPU_FLASH = "_scaled_dot_product_flash_attention_for_cpu"
_CPU_FLASH_BACKWARD = "_scaled_dot_product_flash_attention_for_cpu_backward"
#: Log-sum-exp rows of the memory-efficient kernel are a multiple of this many queries.
LSE_ALIGN = 32
#: FlashAttention's largest head dimension, and the multiple it must be.
FLASH_MAX_HEAD_DIM, FLASH_HEAD_DIM_MULTIPLE = 256, 8


@dataclass(frozen=True)
class Rewrite:
    """What a GPU runs for one traced op: its ``op`` name (``aten.NAME``) and, where an
    output's size changes, ``output_shapes`` (output index -> shape, same dtype)."""

    op: str
    output_shapes: dict[int, tuple[int, ...]]


def _flash(query: Any, mask: object) -> bool:
    dtype = str(query.dtype).removeprefix("torch.")
    head = int(query.shape[-1])
    return (
        dtype in ("float16", "bfloat16")
        and head <= FLASH_MAX_HEAD_DIM
        and head % FLASH_HEAD_DIM_MULTIPLE == 0
        and mask is None
    )


def gpu_rewrite(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Rewrite | None:
    """What CUDA runs for the traced ATen op ``op`` (its base name) called with ``args`` and
    ``kwargs`` (fake tensors), or None where it runs the same op (module documentation)."""
    if op == _CPU_FLASH:
        query = args[0]
        if _flash(query, kwargs.get("attn_mask")):
            return Rewrite("aten._scaled_dot_product_flash_attention", {})
        batch, heads, length = (int(d) for d in query.shape[:3])
        padded = math.ceil(length / LSE_ALIGN) * LSE_ALIGN
        return Rewrite("aten._scaled_dot_product_efficient_attention", {1: (batch, heads, padded)})
    if op == _CPU_FLASH_BACKWARD:
        if _flash(args[1], kwargs.get("attn_mask")):
            return Rewrite("aten._scaled_dot_product_flash_attention_backward", {})
        return Rewrite("aten._scaled_dot_product_efficient_attention_backward", {})
    return None
