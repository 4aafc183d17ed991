"""The values a graph is made of: tensors, kernels, their roles, phases and dtypes.

Each field check raises :class:`~tmsim.errors.GraphError` naming the tensor or kernel at
fault; :class:`tmsim.workload.graph.Graph` runs them when it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from tmsim.errors import GraphError

#: Bytes per element of every dtype a tensor may have.
DTYPE_BYTES: Mapping[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int64": 8,
    "int32": 4,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


class Role(StrEnum):
    """What a tensor is for; decides its lifetime and whether a kernel may produce it."""

    INPUT = "input"
    ACTIVATION = "activation"
    WEIGHT = "weight"
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"
    WORKSPACE = "workspace"


class Phase(StrEnum):
    """Which part of the training step a kernel belongs to."""

    FORWARD = "forward"
    BACKWARD = "backward"
    UPDATE = "update"


#: Roles whose tensors exist before the step starts and are never produced by a kernel.
PREEXISTING_ROLES = frozenset({Role.INPUT, Role.WEIGHT, Role.OPTIMIZER_STATE})
#: Roles whose tensors persist across steps: live at every kernel, updatable in place.
PERSISTENT_ROLES = frozenset({Role.WEIGHT, Role.OPTIMIZER_STATE})


@dataclass(frozen=True, slots=True)
class Tensor:
    """An immutable buffer of ``size_bytes`` bytes.

    ``shape`` is optional (``()`` when unknown); when given, ``size_bytes`` must equal the
    product of the shape times the dtype's element size. Field checks happen in
    :class:`Graph`, which names the tensor in its error.
    """

    name: str
    size_bytes: int
    role: Role
    dtype: str = "fp32"
    shape: tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        """Number of elements (``size_bytes`` over the dtype's element size)."""
        return self.size_bytes // DTYPE_BYTES[self.dtype]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One operation of the step.

    ``inputs`` are read, ``outputs`` are produced (each tensor by exactly one kernel), and
    ``updates`` are persistent tensors (weights, optimizer state) read and overwritten in
    place. ``flops`` counts floating-point operations (a multiply-add is two).
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    phase: Phase
    flops: int = 0
    updates: tuple[str, ...] = ()

    @property
    def operands(self) -> tuple[str, ...]:
        """Every tensor the kernel touches: inputs, then outputs, then in-place updates."""
        return self.inputs + self.outputs + self.updates


def check_tensor(t: Tensor) -> None:
    """Raise :class:`GraphError` naming ``t`` if a field of it is invalid."""
    where = f"tensor {t.name!r}"
    if not isinstance(t.name, str) or not t.name:
        raise GraphError(f"tensor {t.name!r}: name must be a non-empty string")
    if isinstance(t.size_bytes, bool) or not isinstance(t.size_bytes, int) or t.size_bytes <= 0:
        raise GraphError(f"{where}: size_bytes must be a positive integer, got {t.size_bytes!r}")
    if not isinstance(t.role, Role):
        raise GraphError(f"{where}: unknown role {t.role!r}; expected one of {_names(Role)}")
    if t.dtype not in DTYPE_BYTES:
        raise GraphError(f"{where}: unknown dtype {t.dtype!r}; expected one of {list(DTYPE_BYTES)}")
    if t.shape:
        if any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in t.shape):
            raise GraphError(f"{where}: shape {t.shape!r} must hold positive integers")
        expected = int(np.prod(t.shape, dtype=np.int64)) * DTYPE_BYTES[t.dtype]
        if expected != t.size_bytes:
            raise GraphError(
                f"{where}: size_bytes {t.size_bytes} disagrees with shape {t.shape} of "
                f"{t.dtype} ({expected} bytes)"
            )
    elif t.size_bytes % DTYPE_BYTES[t.dtype]:
        raise GraphError(
            f"{where}: size_bytes {t.size_bytes} is not a whole number of {t.dtype} elements"
        )


def check_kernel_fields(k: Kernel) -> None:
    """Raise :class:`GraphError` naming ``k`` if a field of it is invalid."""
    where = f"kernel {k.name!r}"
    if not isinstance(k.name, str) or not k.name:
        raise GraphError(f"kernel {k.name!r}: name must be a non-empty string")
    if not isinstance(k.phase, Phase):
        raise GraphError(f"{where}: unknown phase {k.phase!r}; expected one of {_names(Phase)}")
    if isinstance(k.flops, bool) or not isinstance(k.flops, int) or k.flops < 0:
        raise GraphError(f"{where}: flops must be a non-negative integer, got {k.flops!r}")
    if len(set(k.outputs)) != len(k.outputs):
        raise GraphError(f"{where}: lists an output twice")
    if set(k.outputs) & (set(k.inputs) | set(k.updates)):
        raise GraphError(f"{where}: a tensor is both read and produced; use `updates`")


def _names(enum: type[StrEnum]) -> list[str]:
    return [m.value for m in enum]
