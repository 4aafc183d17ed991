"""The values a graph is made of: tensors, kernels, their roles, phases and dtypes.

Each field check raises :class:`~tmsim.errors.GraphError` naming the tensor or kernel at
fault; :class:`tmsim.workload.graph.Graph` runs them when it is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

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


#: A graph's tensors hold fewer than this many bytes in all, and its kernels do fewer than
#: :data:`MAX_GRAPH_FLOPS` FLOPs in all (:class:`~tmsim.workload.graph.Graph` checks both, and
#: each tensor and kernel alone). 2**62 keeps every sum the planners, the validator and the
#: simulator form over a graph's bytes in 64-bit integers from overflowing (live bytes at a
#: kernel, a tier's occupancy, addresses of a layout, a kernel's bytes read plus written,
#: twice the total), and every size and FLOP count a finite float, so times stay finite.
MAX_GRAPH_BYTES = 2**62
MAX_GRAPH_FLOPS = 2**62
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


def show_int(value: int) -> str:
    """``value`` for a message: its digits, or its order of magnitude when they are too many
    to print on one line (or at all: Python refuses to print more than 4300)."""
    if abs(value) < 10**30:
        return str(value)
    return f"{'-' if value < 0 else ''}about 2**{abs(value).bit_length() - 1}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_count(where: str, field: str, value: object, low: int, bound: int, what: str) -> None:
    """Raise :class:`GraphError` unless ``value`` is an integer from ``low`` to below ``bound``
    (``what``: of what the bound is, for the message)."""
    integer = isinstance(value, int) and not isinstance(value, bool)
    if not isinstance(value, int) or not integer or value < low:
        shown = show_int(value) if isinstance(value, int) and integer else repr(value)
        kind = "a positive" if low == 1 else "a non-negative"
        raise GraphError(f"{where}: {field} must be {kind} integer, got {shown}")
    if value >= bound:
        raise GraphError(
            f"{where}: {field} {show_int(value)} is not below the bound of "
            f"2**{bound.bit_length() - 1} {what}"
        )


def check_tensor(t: Tensor) -> None:
    """Raise :class:`GraphError` naming ``t`` if a field of it is invalid, or if it alone holds
    :data:`MAX_GRAPH_BYTES` bytes or more."""
    where = f"tensor {t.name!r}"
    if not isinstance(t.name, str) or not t.name:
        raise GraphError(f"tensor {t.name!r}: name must be a non-empty string")
    _check_count(
        where, "size_bytes", t.size_bytes, 1, MAX_GRAPH_BYTES, "bytes a graph may hold in all"
    )
    if not isinstance(t.role, Role):
        raise GraphError(f"{where}: unknown role {t.role!r}; expected one of {_names(Role)}")
    if t.dtype not in DTYPE_BYTES:
        raise GraphError(f"{where}: unknown dtype {t.dtype!r}; expected one of {list(DTYPE_BYTES)}")
    if t.shape:
        if any(not _is_int(d) or not 0 < d <= t.size_bytes for d in t.shape):
            shown = ", ".join(show_int(d) if _is_int(d) else repr(d) for d in t.shape)
            raise GraphError(
                f"{where}: shape ({shown}) must hold positive integers that agree with "
                f"size_bytes {t.size_bytes}"
            )
        expected = math.prod(t.shape) * DTYPE_BYTES[t.dtype]  # exact: no 64-bit wrap
        if expected != t.size_bytes:
            raise GraphError(
                f"{where}: size_bytes {t.size_bytes} disagrees with shape {t.shape} of "
                f"{t.dtype} ({show_int(expected)} bytes)"
            )
    elif t.size_bytes % DTYPE_BYTES[t.dtype]:
        raise GraphError(
            f"{where}: size_bytes {t.size_bytes} is not a whole number of {t.dtype} elements"
        )


def check_kernel_fields(k: Kernel) -> None:
    """Raise :class:`GraphError` naming ``k`` if a field of it is invalid, or if it alone does
    :data:`MAX_GRAPH_FLOPS` FLOPs or more."""
    where = f"kernel {k.name!r}"
    if not isinstance(k.name, str) or not k.name:
        raise GraphError(f"kernel {k.name!r}: name must be a non-empty string")
    if not isinstance(k.phase, Phase):
        raise GraphError(f"{where}: unknown phase {k.phase!r}; expected one of {_names(Phase)}")
    _check_count(where, "flops", k.flops, 0, MAX_GRAPH_FLOPS, "FLOPs a graph may do in all")
    if len(set(k.outputs)) != len(k.outputs):
        raise GraphError(f"{where}: lists an output twice")
    if set(k.outputs) & (set(k.inputs) | set(k.updates)):
        raise GraphError(f"{where}: a tensor is both read and produced; use `updates`")


def _names(enum: type[StrEnum]) -> list[str]:
    return [m.value for m in enum]
