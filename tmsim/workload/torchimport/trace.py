"""Tracing a PyTorch training step with fake tensors; :mod:`~tmsim.workload.torchimport.reduction`
reduces the joint graph to storages and ops.

How (PyTorch 2.x, on the CPU, with no memory for parameters or activations):

1. The module is copied with every parameter and buffer replaced by a *fake* tensor of the
   same shape, strides and dtype (:class:`torch._subclasses.fake_tensor.FakeTensorMode`):
   fake tensors carry metadata only, so a model of any size traces in a few seconds, and
   the caller's module, real or on the ``meta`` device, is never touched. The copy is put
   in training mode.
2. A wrapper computes the loss from the model's output (the first tensor it returns) and
   the targets, and :func:`torch._functorch.aot_autograd.aot_export_module` with
   ``trace_joint=True`` records the *joint* graph: forward, loss and backward as one
   functional ATen FX graph, every value's fake tensor in ``node.meta["val"]``, and a
   signature saying which placeholders are parameters, buffers and user inputs, which
   outputs are the parameters' gradients and which are buffers' new values. The model's
   code runs fenced (:mod:`~tmsim.workload.torchimport.fence`), and the graph's dtypes are
   checked where fake tensors do not check them (:mod:`~tmsim.workload.torchimport.dtypes`).
3. Each distinct storage of those fake tensors becomes one storage of the step: views and
   aliases (``view``, ``t``, ``alias``, ``getitem``, ``_unsafe_view``...) share their
   base's storage, so they hold no memory of their own and are no ops of the step. An op
   that creates a storage is an op; what it reads is every storage under its arguments. A
   buffer's new value (batch-norm running statistics, ``num_batches_tracked``) is written
   in place: its op updates the buffer. A storage of zero bytes is left out.

The joint graph lists the forward pass and the loss first, then the backward pass, in the
order PyTorch's tracer ran them; that order is the step's. Ops up to the one creating the
loss are forward.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch._functorch.aot_autograd import aot_export_module
from torch._subclasses.fake_tensor import FakeTensorMode

from tmsim.errors import one_line
from tmsim.workload.torchimport.dtypes import check_dtypes
from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.fence import fenced
from tmsim.workload.torchimport.reduction import Joint, reduce_joint
from tmsim.workload.torchimport.specs import Spec
from tmsim.workload.torchimport.step import TracedStep


class _Step(torch.nn.Module):  # type: ignore[misc]
    """The model and its loss: ``forward(*inputs, *targets) -> (loss,)``."""

    def __init__(self, model: Any, loss: str, n_inputs: int) -> None:
        super().__init__()
        self.model = model
        self.loss = loss
        self.n_inputs = n_inputs

    def forward(self, *args: Any) -> tuple[Any]:
        out = first_tensor(self.model(*args[: self.n_inputs]))
        targets = args[self.n_inputs :]
        if self.loss == "cross_entropy":
            logits = out.reshape(-1, out.shape[-1]) if out.dim() != 2 else out
            return (F.cross_entropy(logits, targets[0].reshape(-1)),)
        if self.loss == "mse":
            return (F.mse_loss(out, targets[0]),)
        return (out.sum(),)


def first_tensor(out: object) -> Any:
    """The model's output tensor: ``out`` itself, or the first item of a tuple or list (as
    torchvision's GoogLeNet returns with its auxiliary heads); raises
    :class:`TorchImportError` otherwise."""
    if isinstance(out, tuple | list) and out:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise TorchImportError(
            f"the model's forward returned {type(out).__name__}; it must return a tensor, or a "
            "tuple whose first item is one"
        )
    return out


def fake_copy(module: Any, mode: FakeTensorMode, device: str = "cpu") -> Any:
    """A copy of ``module`` in training mode whose parameters and buffers are fake tensors
    of ``mode`` (same shapes, strides, dtypes, ``requires_grad``) on ``device``."""
    memo: dict[int, Any] = {}
    with mode:
        for t in itertools.chain(module.parameters(), module.buffers()):
            if id(t) in memo:
                continue
            fake = torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=device)
            if isinstance(t, torch.nn.Parameter):
                fake = torch.nn.Parameter(fake, requires_grad=t.requires_grad)
            memo[id(t)] = fake
    copied = copy.deepcopy(module, memo)
    return copied.train()


def default_targets(
    model: Any, inputs: Sequence[Spec], loss: str, mode: FakeTensorMode, device: str = "cpu"
) -> list[Spec]:
    """The targets ``loss`` needs for the model's output, found by a forward pass on fake
    tensors: class indices (int64) of the output's shape less its last dimension (the
    classes) for cross entropy, the output's shape and dtype for MSE, none for a sum."""
    if loss == "sum":
        return []
    with mode, torch.no_grad():
        out = first_tensor(model(*(s.empty(device) for s in inputs)))
    shape = tuple(int(d) for d in out.shape)
    if loss == "mse":
        return [Spec(shape, out.dtype)]
    if not shape:
        raise TorchImportError("cross entropy needs an output with a class dimension, got a scalar")
    return [Spec(shape[:-1], torch.int64)]


def export_joint(
    module: Any,
    inputs: Sequence[Spec],
    targets: Sequence[Spec] | None,
    loss: str,
    name: str,
    device: str = "cpu",
) -> Joint:
    """The joint graph of ``module``'s training step on ``inputs`` (and ``targets``, by
    default those of :func:`default_targets`) with ``loss`` (module documentation), its fake
    tensors on ``device``: the CPU for an import; the GPU itself when a step is measured on
    one (a fake CUDA trace needs the device: without it the autograd engine cannot run the
    backward, and fused attention falls back to its math path). Raises
    :class:`TorchImportError` with PyTorch's message on one line when the model cannot be
    traced (a shape the model refuses, data-dependent control flow, a trainable parameter that
    receives no gradient...), when its code exits, and for dtypes eager PyTorch refuses where
    fake tensors do not (:func:`~tmsim.workload.torchimport.dtypes.check_dtypes`). The model's
    code runs fenced (:func:`~tmsim.workload.torchimport.fence.fenced`): what it prints and
    PyTorch's fake-tensor log are dropped."""
    mode = FakeTensorMode()
    with fenced(f"cannot trace {name}"):
        try:
            model = fake_copy(module, mode, device)
            if targets is None:
                targets = default_targets(model, inputs, loss, mode, device)
            step = _Step(model, loss, len(inputs))
            with mode:
                args = tuple(s.empty(device) for s in (*inputs, *targets))
                gm, sig = aot_export_module(step, args, trace_joint=True, output_loss_index=0)
        except TorchImportError:
            raise
        except Exception as exc:
            text = str(exc).strip().splitlines()
            reason = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
            if "did not receive a gradient" in reason:
                reason += " (freeze what the loss does not reach: requires_grad_(False))"
            raise TorchImportError(one_line(f"cannot trace {name}: {reason}")) from None
    check_dtypes(gm, name)
    return Joint(gm, sig, step, len(inputs), len(targets))


def trace(
    module: Any,
    inputs: Sequence[Spec],
    targets: Sequence[Spec] | None,
    loss: str,
    name: str,
    device: str = "cpu",
) -> TracedStep:
    """The training step of ``module`` as a :class:`TracedStep` named ``name``, as ``device``
    runs it: :func:`export_joint` (on the CPU), then :func:`reduce_joint`."""
    return reduce_joint(export_joint(module, inputs, targets, loss, name), name, device)
