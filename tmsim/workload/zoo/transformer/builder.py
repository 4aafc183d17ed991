"""A mixed-precision training step, written forward only: kernels, a tape, gradients, Adam.

:class:`StepBuilder` records forward kernels in order; each forward helper also puts on a
tape what its backward kernels read and produce. :meth:`StepBuilder.build` then runs the
tape backward from the loss's gradient, adds one Adam kernel per parameter tensor and
returns the validated :class:`~tmsim.workload.graph.Graph`.

Gradients: every backward kernel produces the gradients of the values (or weights) it
differentiates. Where one already has a partial gradient (a value read by several kernels:
the residual stream, the input of separate Q, K and V projections, GPT-2's tied token
table), the kernel reads that partial and writes the sum, as a GEMM with ``beta = 1`` or a
layer-norm backward fused with the residual's gradient does, so no partial outlives the
kernel that adds to it. A gradient that passes through unchanged (a residual addition) is
the same tensor, with no kernel; were it to meet an earlier partial, an ``accumulate``
kernel adds the two.

Precision (ZeRO, Rajbhandari et al., SC'20, Section 3.1: 2 + 2 + 12 = 16 bytes per
parameter): each parameter is a 16-bit weight (role ``weight``) with a 16-bit gradient; the
optimizer state is an fp32 master copy and Adam's two fp32 moments (role
``optimizer_state``). In ``fp32`` the weight is its own master copy, and the 4-byte weight,
gradient and two moments again make 16 bytes. The Adam kernel of a parameter reads its
gradient and updates the master weight and both moments in place and writes the 16-bit copy
(listed in ``updates``, the graph's only way to overwrite a persistent tensor, so the cost
model also charges reading it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tmsim.workload.graph import DTYPE_BYTES, Graph, Kernel, Phase, Role, Tensor

Shape = tuple[int, ...]
#: FLOPs per parameter of one Adam step: the first moment (3), the second (4), the
#: bias-corrected update with its square root and division (5).
ADAM_FLOPS_PER_PARAM = 12
#: Element type of the master weights, Adam's moments and the normalizations' statistics.
STATE_DTYPE = "fp32"
#: Element type of dropout masks: one byte per element, as Korthikanti et al. count them.
MASK_DTYPE = "uint8"


class StepBuilder:
    """Mutable builder of one training step in element type ``dtype`` (16-bit: mixed
    precision with fp32 master weights; ``fp32``: single precision).

    Names must be unique; :meth:`build` raises :class:`~tmsim.errors.GraphError` (from the
    graph's own validation) if they are not, which would be a bug of the model code.
    """

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.mixed = dtype != STATE_DTYPE
        self.tensors: dict[str, Tensor] = {}
        self.kernels: list[Kernel] = []
        self.weights: list[str] = []
        self.grad: dict[str, str] = {}
        self._tape: list[Callable[[], None]] = []
        self._partials: dict[str, int] = {}

    # ------------------------------------------------------------------ tensors
    def tensor(self, name: str, shape: Shape, role: Role, dtype: str | None = None) -> str:
        """Declare tensor ``name`` of ``shape`` (element type ``dtype``, default the step's)."""
        dt = dtype or self.dtype
        self.tensors[name] = Tensor(name, math.prod(shape) * DTYPE_BYTES[dt], role, dt, shape)
        return name

    def value(self, name: str, shape: Shape, dtype: str | None = None) -> str:
        """Declare an activation (element type ``dtype``, default the step's)."""
        return self.tensor(name, shape, Role.ACTIVATION, dtype)

    def param(self, name: str, shape: Shape) -> str:
        """Declare a parameter: its weight, and its master copy (mixed precision) and Adam
        moments as optimizer state."""
        self.tensor(name, shape, Role.WEIGHT)
        for suffix in self._state_suffixes():
            self.tensor(f"{name}.{suffix}", shape, Role.OPTIMIZER_STATE, STATE_DTYPE)
        self.weights.append(name)
        return name

    def shape(self, name: str) -> Shape:
        """Shape of tensor ``name``."""
        return self.tensors[name].shape

    def elements(self, name: str) -> int:
        """Elements of tensor ``name``."""
        return math.prod(self.tensors[name].shape)

    # ------------------------------------------------------------------ kernels
    def forward(
        self,
        name: str,
        op: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        flops: int,
        backward: Callable[[], None] | None = None,
    ) -> None:
        """Append forward kernel ``name``; ``backward`` (if any) runs when the tape is run
        backward, after the backward of every later forward kernel."""
        self.kernels.append(Kernel(name, op, tuple(inputs), tuple(outputs), Phase.FORWARD, flops))
        if backward is not None:
            self._tape.append(backward)

    def backward(
        self, name: str, op: str, inputs: Sequence[str], targets: Sequence[str], flops: int
    ) -> None:
        """Append backward kernel ``name`` reading ``inputs`` and producing the gradient of
        each of ``targets``; a target with a partial gradient already is read too and the
        sum written (one more FLOP per element)."""
        reads = list(inputs)
        outs = []
        for target in targets:
            prior = self.grad.get(target)
            if prior is not None:
                reads.append(prior)
                flops += self.elements(target)
            outs.append(self._new_gradient(target))
        self.kernels.append(Kernel(name, op, tuple(reads), tuple(outs), Phase.BACKWARD, flops))

    def pass_gradient(self, gradient: str, target: str) -> None:
        """``gradient`` is also ``target``'s (a residual addition): the same tensor, or, if
        ``target`` has a partial gradient already, an ``accumulate`` kernel's sum."""
        prior = self.grad.get(target)
        if prior is None:
            self.grad[target] = gradient
            return
        total = self._new_gradient(target)
        self.kernels.append(
            Kernel(
                f"{total}.accumulate",
                "accumulate",
                (prior, gradient),
                (total,),
                Phase.BACKWARD,
                self.elements(target),
            )
        )

    def gradient(self, value: str) -> str | None:
        """The gradient of ``value`` so far (None if nothing has produced one)."""
        return self.grad.get(value)

    def _new_gradient(self, target: str) -> str:
        count = self._partials.get(target, 0) + 1
        self._partials[target] = count
        name = f"{target}.grad" if count == 1 else f"{target}.grad{count}"
        self.tensor(name, self.shape(target), Role.GRADIENT, self.tensors[target].dtype)
        self.grad[target] = name
        return name

    def _state_suffixes(self) -> tuple[str, ...]:
        return ("master", "adam_m", "adam_v") if self.mixed else ("adam_m", "adam_v")

    # ------------------------------------------------------------------ result
    def build(self, name: str) -> Graph:
        """Run the tape backward, add the Adam step of every parameter that received a
        gradient (in declaration order) and return the validated graph ``name``."""
        for step in reversed(self._tape):
            step()
        self._tape.clear()
        for w in self.weights:
            g = self.grad.get(w)
            if g is None:
                continue  # a parameter that does not reach the loss is not updated
            state = tuple(f"{w}.{suffix}" for suffix in self._state_suffixes())
            self.kernels.append(
                Kernel(
                    f"{w}.adam",
                    "adam",
                    (g,),
                    (),
                    Phase.UPDATE,
                    ADAM_FLOPS_PER_PARAM * self.elements(w),
                    updates=(*state, w),
                )
            )
        return Graph(name, self.tensors.values(), self.kernels)


__all__ = ["ADAM_FLOPS_PER_PARAM", "MASK_DTYPE", "STATE_DTYPE", "StepBuilder"]
