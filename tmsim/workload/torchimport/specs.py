"""The example inputs and targets of an import, and the dtypes of both worlds.

An input is given by its shape and dtype only: a shape (a tuple of positive integers, in the
model's floating dtype), a ``(shape, dtype)`` pair, or a tensor (of any device, never read).
A dtype is a :class:`torch.dtype`, a tmsim name (``"fp32"``, ``"bf16"``, ``"int64"``) or a
torch name (``"float32"``, ``"long"``). Every bad value raises
:class:`~tmsim.workload.torchimport.errors.TorchImportError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from tmsim.workload.graph import MAX_GRAPH_BYTES
from tmsim.workload.torchimport.errors import TorchImportError

#: tmsim dtype -> torch dtype.
TORCH_DTYPES: Mapping[str, Any] = MappingProxyType(
    {
        "fp64": torch.float64,
        "fp32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
        "fp8": torch.float8_e4m3fn,
        "int64": torch.int64,
        "int32": torch.int32,
        "int8": torch.int8,
        "uint8": torch.uint8,
        "bool": torch.bool,
    }
)
#: The one-byte floats of torch beside ``float8_e4m3fn``, all fp8 to tmsim (those the running
#: torch has).
_FP8 = ("float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
#: torch dtype -> tmsim dtype (every fp8 format is fp8).
TMSIM_DTYPES: Mapping[Any, str] = MappingProxyType(
    {
        **{v: k for k, v in TORCH_DTYPES.items()},
        **{getattr(torch, n): "fp8" for n in _FP8 if hasattr(torch, n)},
    }
)
#: complex torch dtype -> the tmsim dtype of its real and imaginary parts: a complex tensor is
#: recorded as pairs of floats, as :func:`torch.view_as_real` shows it (shape ``(*shape, 2)``).
COMPLEX_PARTS: Mapping[Any, str] = MappingProxyType(
    {torch.complex32: "fp16", torch.complex64: "fp32", torch.complex128: "fp64"}
)


@dataclass(frozen=True, slots=True)
class Spec:
    """An example tensor: its shape and torch dtype."""

    shape: tuple[int, ...]
    dtype: Any

    def empty(self, device: str = "cpu") -> Any:
        """An uninitialised tensor of this shape and dtype on ``device`` (under a fake mode:
        no memory)."""
        return torch.empty(self.shape, dtype=self.dtype, device=device)


def torch_dtype(value: object, what: str) -> Any:
    """The :class:`torch.dtype` ``value`` names (module documentation)."""
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str):
        if value in TORCH_DTYPES:
            return TORCH_DTYPES[value]
        found = getattr(torch, value, None) if value.isidentifier() else None
        if isinstance(found, torch.dtype):
            return found
    raise TorchImportError(
        f"{what}: unknown dtype {_shown(value)}; give one of {', '.join(TORCH_DTYPES)} or a "
        "torch.dtype"
    )


def _is_shape(value: object) -> bool:
    return isinstance(value, tuple | list | torch.Size) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in value
    )


def is_spec(value: object) -> bool:
    """Whether ``value`` is one example tensor (rather than a sequence of them)."""
    if isinstance(value, torch.Tensor):
        return True
    if _is_shape(value):
        return bool(value)  # () is an empty sequence of inputs, not a scalar
    return (
        isinstance(value, tuple | list)
        and len(value) == 2
        and _is_shape(value[0])
        and isinstance(value[1], str | torch.dtype)
    )


def spec(value: object, what: str, default_dtype: Any) -> Spec:
    """The :class:`Spec` of ``value`` (module documentation); a bare shape takes
    ``default_dtype``. Raises :class:`TorchImportError` for anything else, a dimension that
    is not a positive integer, or a tensor of 2**62 bytes or more."""
    if isinstance(value, torch.Tensor):
        shape, dtype = tuple(int(d) for d in value.shape), value.dtype
    elif _is_shape(value):
        shape, dtype = tuple(value), default_dtype  # type: ignore[arg-type]
    elif is_spec(value):
        pair: Sequence[Any] = value  # type: ignore[assignment]
        shape, dtype = tuple(pair[0]), torch_dtype(pair[1], what)
    else:
        raise TorchImportError(
            f"{what} must be a shape such as (2, 3, 224, 224), a (shape, dtype) pair or a "
            f"tensor, got {_shown(value)}"
        )
    if any(d < 1 for d in shape):
        raise TorchImportError(f"{what}: every dimension must be >= 1, got shape {shape}")
    size = dtype.itemsize
    for d in shape:
        size *= d
        if size >= MAX_GRAPH_BYTES:
            raise TorchImportError(f"{what}: shape {shape} holds 2**62 bytes or more")
    return Spec(shape, dtype)


def specs(values: object, what: str, default_dtype: Any) -> list[Spec]:
    """One example tensor or a non-empty sequence of them, as :class:`Spec` values."""
    if is_spec(values):
        return [spec(values, what, default_dtype)]
    if isinstance(values, tuple | list) and values:
        return [spec(v, f"{what}[{i}]", default_dtype) for i, v in enumerate(values)]
    raise TorchImportError(
        f"{what} must be an example tensor's shape, a (shape, dtype) pair or a tensor, or a "
        f"non-empty list of them, got {_shown(values)}"
    )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 and "\n" not in text else f"a {type(value).__name__}"
