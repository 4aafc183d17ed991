"""Training-step graphs: tensors, kernels, validation and liveness.

A :class:`Graph` is an immutable, validated, statically scheduled training step. The kernel
list *is* the execution order. Everything the planners need about lifetimes is derived once,
at construction, with numpy index arrays beside the names, in time near-linear in the graph.

Lifetime rules (the contract every planner and the simulator rely on):

- A tensor with role ``input`` exists when the step starts and is live from kernel 0 to its
  last user (at kernel 0 only if no kernel reads it).
- Weights and optimizer state exist before the step and after it: they are live at every
  kernel. A kernel may overwrite them in place (``Kernel.updates``); nothing else is mutable.
- Every other tensor is live from its producer to its last user, inclusive; a produced tensor
  that no kernel reads is live at its producer only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmsim.errors import GraphError
from tmsim.intervals import occupancy
from tmsim.workload.tensors import (
    DTYPE_BYTES,
    MAX_GRAPH_BYTES,
    MAX_GRAPH_FLOPS,
    PERSISTENT_ROLES,
    PREEXISTING_ROLES,
    Kernel,
    Phase,
    Role,
    Tensor,
    check_kernel_fields,
    check_tensor,
)

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class _Csr:
    """Compressed rows: row ``i`` holds ``index[ptr[i]:ptr[i + 1]]``."""

    ptr: IntArray
    index: IntArray

    def row(self, i: int) -> IntArray:
        return self.index[self.ptr[i] : self.ptr[i + 1]]


def _csr(rows: IntArray, cols: IntArray, n_rows: int) -> _Csr:
    """Group ``cols`` by ``rows`` (stable, so each row keeps the original order)."""
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=n_rows)
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return _Csr(ptr=ptr, index=cols[order].astype(np.int64))


#: The math modes a graph may record and the modes each takes (those of
#: :class:`hwmodels.kernels.MathModes`, which a test holds equal).
MATH_MODES: Mapping[str, tuple[str, ...]] = {
    "conv_fp32": ("fp32", "tf32"),
    "matmul_fp32": ("fp32", "tf32"),
}


def _math(name: str, math: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``math`` as sorted pairs; raises :class:`GraphError` for an unknown key or mode."""
    if not isinstance(math, Mapping):
        raise GraphError(f"graph {name!r}: math must map math-mode names to modes")
    for key, mode in math.items():
        if key not in MATH_MODES:
            raise GraphError(
                f"graph {name!r}: unknown math mode {key!r}; known: {', '.join(MATH_MODES)}"
            )
        if mode not in MATH_MODES[key]:
            raise GraphError(
                f"graph {name!r}: math mode {key} must be one of "
                f"{', '.join(MATH_MODES[key])}, got {mode!r}"
            )
    return tuple(sorted(math.items()))


class Graph:
    """An immutable, validated training step: tensors and the kernels in execution order.

    Construction validates the graph and raises :class:`~tmsim.errors.GraphError` naming the
    kernel or tensor at fault for: an empty graph; duplicate tensor or kernel names; a size
    that is not a positive integer; tensors of :data:`MAX_GRAPH_BYTES` (2**62) bytes or more
    in all, or kernels of :data:`MAX_GRAPH_FLOPS` (2**62) FLOPs or more in all, which keeps
    every 64-bit sum over the graph's bytes and every time computed from it finite; an
    unknown role or dtype; a shape that disagrees with the size; a kernel operand that is not
    a declared tensor; a kernel that reads a tensor that is neither pre-existing nor produced
    earlier; a tensor produced twice; a kernel producing a pre-existing tensor; an in-place
    update of a non-persistent tensor; a declared tensor that is never produced and is not
    pre-existing.

    ``math`` records the math modes the step's framework was set to where they differ from
    PyTorch's defaults (:data:`MATH_MODES`: ``conv_fp32`` / ``matmul_fp32`` -> ``fp32`` or
    ``tf32``); a calibrated kernel model prices the step in them
    (:class:`hwmodels.kernels.MathModes`). Raises :class:`GraphError` for another key or mode.

    Two graphs are equal when their names, tensors, kernels and math modes are equal.
    """

    __slots__ = (
        "_first",
        "_index",
        "_kernel_operands",
        "_last",
        "_live_bytes",
        "_producer",
        "_size",
        "_users",
        "kernels",
        "math",
        "name",
        "tensors",
    )
    name: str
    tensors: tuple[Tensor, ...]
    kernels: tuple[Kernel, ...]
    math: tuple[tuple[str, str], ...]
    _index: dict[str, int]
    _size: IntArray
    _producer: IntArray
    _first: IntArray
    _last: IntArray
    _users: _Csr
    _kernel_operands: _Csr
    _live_bytes: IntArray

    def __init__(
        self,
        name: str,
        tensors: Iterable[Tensor],
        kernels: Iterable[Kernel],
        math: Mapping[str, str] | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "tensors", tuple(tensors))
        set_(self, "kernels", tuple(kernels))
        set_(self, "math", _math(name, math or {}))
        self._derive()

    # ------------------------------------------------------------------ construction
    def _derive(self) -> None:
        set_ = object.__setattr__
        tensors, kernels = self.tensors, self.kernels
        if not kernels:
            raise GraphError(f"graph {self.name!r} has no kernels")
        index: dict[str, int] = {}
        total_bytes = 0
        for i, tensor in enumerate(tensors):
            check_tensor(tensor)
            if tensor.name in index:
                raise GraphError(f"tensor {tensor.name!r}: declared twice")
            index[tensor.name] = i
            total_bytes += tensor.size_bytes
            if total_bytes >= MAX_GRAPH_BYTES:
                raise GraphError(
                    f"tensor {tensor.name!r}: brings the graph's bytes to {total_bytes}, not "
                    "below the bound of 2**62 bytes in all"
                )
        n_t, n_k = len(tensors), len(kernels)
        roles = [t.role for t in tensors]
        producer = np.full(n_t, -1, dtype=np.int64)
        read_k: list[int] = []
        read_t: list[int] = []
        op_k: list[int] = []
        op_t: list[int] = []
        seen_kernels: set[str] = set()
        total_flops = 0
        for k, kern in enumerate(kernels):
            if kern.name in seen_kernels:
                raise GraphError(f"kernel {kern.name!r}: name used twice")
            seen_kernels.add(kern.name)
            check_kernel_fields(kern)
            total_flops += kern.flops
            if total_flops >= MAX_GRAPH_FLOPS:
                raise GraphError(
                    f"kernel {kern.name!r}: brings the graph's FLOPs to {total_flops}, not "
                    "below the bound of 2**62 in all"
                )
            for name in kern.operands:
                if name not in index:
                    raise GraphError(f"kernel {kern.name!r}: operand {name!r} is not a tensor")
            for name in dict.fromkeys(kern.inputs + kern.updates):
                t = index[name]
                if roles[t] not in PREEXISTING_ROLES and producer[t] < 0:
                    raise GraphError(
                        f"kernel {kern.name!r}: reads tensor {name!r} before any kernel "
                        "produces it, and it is not a graph input"
                    )
                read_k.append(k)
                read_t.append(t)
            for name in kern.updates:
                if roles[index[name]] not in PERSISTENT_ROLES:
                    raise GraphError(
                        f"kernel {kern.name!r}: updates tensor {name!r} in place, but only "
                        "weights and optimizer state may be updated"
                    )
            for name in kern.outputs:
                t = index[name]
                if roles[t] in PREEXISTING_ROLES:
                    raise GraphError(
                        f"kernel {kern.name!r}: produces tensor {name!r}, whose role "
                        f"{roles[t].value!r} exists before the step; use `updates`"
                    )
                if producer[t] >= 0:
                    earlier = kernels[int(producer[t])].name
                    raise GraphError(
                        f"kernel {kern.name!r}: produces tensor {name!r}, already produced "
                        f"by kernel {earlier!r}"
                    )
                producer[t] = k
            for name in dict.fromkeys(kern.operands):
                op_k.append(k)
                op_t.append(index[name])
        for i, tensor in enumerate(tensors):
            if roles[i] not in PREEXISTING_ROLES and producer[i] < 0:
                raise GraphError(
                    f"tensor {tensor.name!r}: role {roles[i].value!r} but no kernel produces it"
                )

        rk = np.asarray(read_k, dtype=np.int64)
        rt = np.asarray(read_t, dtype=np.int64)
        users = _csr(rt, rk, n_t)
        last_use = np.full(n_t, -1, dtype=np.int64)
        np.maximum.at(last_use, rt, rk)
        persistent = np.fromiter((r in PERSISTENT_ROLES for r in roles), bool, count=n_t)
        first = np.where(producer >= 0, producer, 0)
        last = np.maximum(last_use, first)
        first[persistent] = 0
        last[persistent] = n_k - 1
        size = np.fromiter((t.size_bytes for t in tensors), np.int64, count=n_t)
        live = occupancy(first, last, size, n_k)

        set_(self, "_index", index)
        set_(self, "_size", size)
        set_(self, "_producer", producer)
        set_(self, "_first", first)
        set_(self, "_last", last)
        set_(self, "_users", users)
        set_(
            self,
            "_kernel_operands",
            _csr(np.asarray(op_k, np.int64), np.asarray(op_t, np.int64), n_k),
        )
        set_(self, "_live_bytes", live)
        ops = self._kernel_operands
        for arr in (size, producer, first, last, live, users.ptr, users.index, ops.ptr, ops.index):
            arr.flags.writeable = False

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Graph is immutable; cannot set {name!r}")

    def __repr__(self) -> str:
        return (
            f"Graph({self.name!r}, {len(self.tensors)} tensors, {len(self.kernels)} kernels, "
            f"peak {self.peak_live_bytes} B)"
        )

    # ------------------------------------------------------------------ equality
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return (self.name, self.tensors, self.kernels, self.math) == (
            other.name,
            other.tensors,
            other.kernels,
            other.math,
        )

    def __hash__(self) -> int:
        return hash((self.name, len(self.tensors), len(self.kernels)))

    # ------------------------------------------------------------------ lookups
    def tensor_index(self, name: str) -> int:
        """Index of tensor ``name``; raises ``KeyError`` if there is none."""
        return self._index[name]

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``; raises ``KeyError`` if there is none."""
        return self.tensors[self._index[name]]

    @property
    def sizes_bytes(self) -> IntArray:
        """Size of every tensor in bytes, indexed like :attr:`tensors` (read-only)."""
        return self._size

    @property
    def producers(self) -> IntArray:
        """Producing kernel index of every tensor, ``-1`` for pre-existing tensors."""
        return self._producer

    @property
    def live_first(self) -> IntArray:
        """First kernel index at which each tensor occupies memory (inclusive)."""
        return self._first

    @property
    def live_last(self) -> IntArray:
        """Last kernel index at which each tensor occupies memory (inclusive)."""
        return self._last

    def users(self, tensor: str | int) -> IntArray:
        """Kernel indices that read ``tensor`` (inputs or in-place updates), in order."""
        t = self._index[tensor] if isinstance(tensor, str) else tensor
        return self._users.row(t)

    def kernel_operands(self, kernel: int) -> IntArray:
        """Distinct tensor indices kernel ``kernel`` touches, in operand order."""
        return self._kernel_operands.row(kernel)

    @property
    def operand_csr(self) -> tuple[IntArray, IntArray]:
        """``(ptr, index)``: kernel ``k``'s distinct operands are ``index[ptr[k]:ptr[k + 1]]``."""
        return self._kernel_operands.ptr, self._kernel_operands.index

    def live_range(self, tensor: str) -> tuple[int, int]:
        """``(first, last)`` kernel indices, inclusive, at which ``tensor`` is live."""
        t = self._index[tensor]
        return int(self._first[t]), int(self._last[t])

    # ------------------------------------------------------------------ liveness
    @property
    def live_bytes(self) -> IntArray:
        """Bytes of live tensors at every kernel (length ``len(kernels)``, read-only)."""
        return self._live_bytes

    @property
    def peak_live_bytes(self) -> int:
        """Maximum over kernels of :attr:`live_bytes`."""
        return int(self._live_bytes.max())

    def live_set(self, kernel: int) -> IntArray:
        """Indices of the tensors live while kernel ``kernel`` runs, ascending.

        Raises ``IndexError`` when ``kernel`` is outside ``[0, len(kernels))``.
        """
        if not 0 <= kernel < len(self.kernels):
            raise IndexError(f"kernel index {kernel} outside [0, {len(self.kernels)})")
        mask = (self._first <= kernel) & (self._last >= kernel)
        return np.flatnonzero(mask).astype(np.int64)

    # ------------------------------------------------------------------ totals
    @property
    def flops(self) -> int:
        """Total floating-point operations of the step."""
        return sum(k.flops for k in self.kernels)

    @property
    def params(self) -> int:
        """Number of trainable parameters: elements of every weight tensor."""
        return sum(t.elements for t in self.tensors if t.role is Role.WEIGHT)

    def bytes_by_role(self) -> dict[Role, int]:
        """Total declared bytes per role (every role present, zero where none)."""
        out = dict.fromkeys(Role, 0)
        for t in self.tensors:
            out[t.role] += t.size_bytes
        return out


__all__ = [
    "DTYPE_BYTES",
    "MAX_GRAPH_BYTES",
    "MAX_GRAPH_FLOPS",
    "PERSISTENT_ROLES",
    "PREEXISTING_ROLES",
    "Graph",
    "Kernel",
    "Phase",
    "Role",
    "Tensor",
]
