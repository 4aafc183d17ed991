"""A traced training step as plain values, and the tmsim graph it becomes.

The tracer (:mod:`tmsim.workload.torchimport.trace`) reduces PyTorch's joint forward and
backward graph to a :class:`TracedStep`: the *storages* (a tensor of tmsim is one storage of
PyTorch: views and aliases of it are not tensors of their own) and the *ops* that read and
create them, in execution order. :func:`step_graph` turns that into a
:class:`~tmsim.workload.graph.Graph` and appends the optimizer's update:

- roles: parameters are weights; module buffers (batch-norm running statistics) are
  persistent state that the step updates in place, and tmsim's roles give persistent state
  that is no parameter one name, ``optimizer_state``; the model's inputs and targets are
  inputs; what an op of the forward pass and the loss creates is an activation, what an op of
  the backward pass creates a gradient;
- phases: ops up to the one that computes the loss are forward, the rest backward, and the
  optimizer's kernels update;
- the update: one kernel per parameter that received a gradient, after the backward pass
  (as ``optimizer.step()`` after ``loss.backward()``), which reads the gradient and updates
  the parameter and its state in place. The state is that of :mod:`torch.optim` in the
  parameter's dtype: SGD with momentum keeps ``momentum_buffer``, Adam and AdamW keep
  ``exp_avg`` and ``exp_avg_sq`` (their per-parameter step count, a scalar, is left out).

Optimizer FLOPs per parameter follow :mod:`torch.optim`'s algorithms (weight decay and
dampening off): SGD with momentum ``b = mu*b + g; p = p - lr*b`` is 4 (the zoo's
:data:`~tmsim.workload.training.SGD_FLOPS_PER_PARAM`); Adam (Kingma and Ba, ICLR 2015,
Algorithm 1, as :class:`torch.optim.Adam` computes it) ``m = lerp(m, g, 1-b1)`` 3,
``v = b2*v + (1-b2)*g*g`` 4, ``d = sqrt(v)/c2 + eps`` 3, ``p = p - s*m/d`` 3: 13; AdamW's
decoupled decay ``p = p*(1 - lr*wd)`` adds 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from tmsim.workload.graph import DTYPE_BYTES, Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.training import SGD_FLOPS_PER_PARAM

Shape = tuple[int, ...]


class Kind(StrEnum):
    """Where a storage comes from."""

    PARAMETER = "parameter"
    BUFFER = "buffer"
    INPUT = "input"
    VALUE = "value"  # created by an op of the step


class Optimizer(StrEnum):
    """The optimizer whose update ends the step."""

    SGD = "sgd"  # with momentum
    ADAM = "adam"
    ADAMW = "adamw"


#: The state :mod:`torch.optim` keeps per parameter, by the names of its ``state`` dicts.
OPTIMIZER_STATE: Mapping[Optimizer, tuple[str, ...]] = MappingProxyType(
    {
        Optimizer.SGD: ("momentum_buffer",),
        Optimizer.ADAM: ("exp_avg", "exp_avg_sq"),
        Optimizer.ADAMW: ("exp_avg", "exp_avg_sq"),
    }
)
ADAM_FLOPS_PER_PARAM = 13
ADAMW_FLOPS_PER_PARAM = ADAM_FLOPS_PER_PARAM + 1
#: FLOPs per parameter of one update (module documentation).
OPTIMIZER_FLOPS_PER_PARAM: Mapping[Optimizer, int] = MappingProxyType(
    {
        Optimizer.SGD: SGD_FLOPS_PER_PARAM,
        Optimizer.ADAM: ADAM_FLOPS_PER_PARAM,
        Optimizer.ADAMW: ADAMW_FLOPS_PER_PARAM,
    }
)
#: The op name of each optimizer's kernel (elementwise to the cost model).
OPTIMIZER_OPS: Mapping[Optimizer, str] = MappingProxyType(
    {
        Optimizer.SGD: "sgd_momentum",
        Optimizer.ADAM: "adam",
        Optimizer.ADAMW: "adamw",
    }
)


@dataclass(frozen=True, slots=True)
class Storage:
    """One storage of the step: ``size_bytes`` bytes of ``dtype`` (a tmsim dtype name),
    ``shape`` when one tensor covers it whole (else ``()``)."""

    name: str
    size_bytes: int
    dtype: str
    shape: Shape
    kind: Kind


@dataclass(frozen=True, slots=True)
class TracedOp:
    """One op of the traced step: storages it ``reads``, storages it ``creates`` and
    persistent storages (parameters, buffers) it ``updates`` in place; ``op`` is the PyTorch
    operator's name, ``aten.NAME``."""

    name: str
    op: str
    reads: tuple[str, ...]
    creates: tuple[str, ...]
    updates: tuple[str, ...]
    flops: int


@dataclass(frozen=True, slots=True)
class TracedStep:
    """A traced step: its ``storages``, its ``ops`` in execution order, of which the first
    ``forward_ops`` are the forward pass and the loss, and each parameter's gradient
    (parameter name -> the storage holding its gradient) for those that receive one."""

    name: str
    storages: tuple[Storage, ...]
    ops: tuple[TracedOp, ...]
    forward_ops: int
    gradients: Mapping[str, str]


_ROLES: Mapping[Kind, Role] = MappingProxyType(
    {Kind.PARAMETER: Role.WEIGHT, Kind.BUFFER: Role.OPTIMIZER_STATE, Kind.INPUT: Role.INPUT}
)


def step_graph(
    step: TracedStep, optimizer: Optimizer, math: Mapping[str, str] | None = None
) -> Graph:
    """The training-step graph of ``step`` with ``optimizer``'s update appended (module
    documentation), named ``step.name``, recording the math modes ``math``.

    Raises :class:`~tmsim.errors.GraphError` if the result is not a valid graph (a storage
    read before any op creates it, an op that creates a parameter), which for a step traced
    by :mod:`tmsim.workload.torchimport.trace` is a fault of the tracer.
    """
    storages = {s.name: s for s in step.storages}
    phase_of: dict[str, Phase] = {}
    kernels: list[Kernel] = []
    for i, op in enumerate(step.ops):
        phase = Phase.FORWARD if i < step.forward_ops else Phase.BACKWARD
        for name in op.creates:
            phase_of[name] = phase
        reads = tuple(r for r in dict.fromkeys(op.reads) if r not in op.updates)
        kernels.append(
            Kernel(op.name, op.op, reads, op.creates, phase, op.flops, tuple(op.updates))
        )
    tensors = []
    for s in step.storages:
        if s.kind is Kind.VALUE:
            role = Role.ACTIVATION if phase_of.get(s.name) is Phase.FORWARD else Role.GRADIENT
        else:
            role = _ROLES[s.kind]
        tensors.append(Tensor(s.name, s.size_bytes, role, s.dtype, s.shape))
    taken = {t.name for t in tensors}
    per_param = OPTIMIZER_FLOPS_PER_PARAM[optimizer]
    for param, grad in step.gradients.items():
        p = storages[param]
        state = []
        for suffix in OPTIMIZER_STATE[optimizer]:
            name = _free(f"{param}.{suffix}", taken)
            tensors.append(Tensor(name, p.size_bytes, Role.OPTIMIZER_STATE, p.dtype, p.shape))
            state.append(name)
        elements = p.size_bytes // DTYPE_BYTES[p.dtype]
        kernels.append(
            Kernel(
                f"{param}.{optimizer.value}",
                OPTIMIZER_OPS[optimizer],
                (grad,),
                (),
                Phase.UPDATE,
                per_param * elements,
                (param, *state),
            )
        )
    return Graph(step.name, tensors, kernels, math)


def _free(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with the first suffix ``#2``, ``#3`` ... not in ``taken``; the
    name returned is added to ``taken``."""
    chosen, n = name, 1
    while chosen in taken:
        n += 1
        chosen = f"{name}#{n}"
    taken.add(chosen)
    return chosen
