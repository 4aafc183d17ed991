"""PyTorch models as tmsim graphs: the whole training step, traced without memory.

:func:`import_torch` traces a :class:`torch.nn.Module`'s forward pass, loss and backward pass
on fake tensors (:mod:`~tmsim.workload.torchimport.trace`), reduces PyTorch's joint graph to
storages and ops with FLOPs per ATen op (:mod:`~tmsim.workload.torchimport.flops`), and
appends the optimizer's update (:mod:`~tmsim.workload.torchimport.step`);
:func:`build_model` builds a model named on the command line
(:mod:`~tmsim.workload.torchimport.sources`).

torch is an optional dependency (``pip install 'tmsim[torch]'``): this module imports it only
when a function here runs, and says so in one line when it is missing.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from tmsim.errors import GraphError
from tmsim.workload.graph import Graph
from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.step import Optimizer, step_graph

#: The losses a step may end its forward pass with: cross entropy against class indices
#: (the classes in the output's last dimension), mean squared error against a target of the
#: output's shape, or the sum of the output (no target: a stand-in that saves nothing).
LOSSES = ("cross_entropy", "mse", "sum")
#: The optimizers whose update ends the step: SGD with momentum, Adam, AdamW.
OPTIMIZERS = tuple(o.value for o in Optimizer)
#: What to install when torch is missing.
INSTALL_HINT = "pip install 'tmsim[torch]'"


def require_torch() -> None:
    """Raise :class:`TorchImportError` in one line unless torch can be imported."""
    if importlib.util.find_spec("torch") is None:
        raise TorchImportError(f"importing a PyTorch model needs torch: {INSTALL_HINT}")
    try:
        importlib.import_module("torch")
    except (ImportError, OSError) as exc:
        raise TorchImportError(f"torch is installed but cannot be imported: {exc}") from None


def import_torch(
    module: Any,
    inputs: object,
    *,
    targets: object = None,
    loss: str = "cross_entropy",
    optimizer: str = "sgd",
    name: str | None = None,
    device: str = "cpu",
    math: Mapping[str, str] | None = None,
) -> Graph:
    """The training step of ``module`` as a validated :class:`~tmsim.workload.graph.Graph`:
    forward pass on ``inputs``, ``loss`` (:data:`LOSSES`) against ``targets``, backward pass
    and ``optimizer``'s update (:data:`OPTIMIZERS`), traced on fake tensors.

    - ``module``: a :class:`torch.nn.Module` with real parameters or on the ``meta`` device
      (build it under ``torch.device("meta")`` to allocate nothing); it is neither run nor
      changed: a copy with fake parameters is traced, in training mode.
    - ``inputs``: the example inputs of ``module.forward``, each a shape (in the dtype of
      the module's first floating parameter), a ``(shape, dtype)`` pair or a tensor, whose
      data is never read; one of them, or a list.
    - ``targets``: the same, for the loss; ``None`` takes those the loss needs for the
      model's output (class indices of its shape less the last dimension for cross entropy,
      its shape and dtype for MSE, none for a sum).
    - ``name``: the graph's name; by default the module's class name in lower case and the
      first input's first dimension, the batch: ``"resnet-b32"``.
    - ``device``: the device whose kernels the graph holds, ``cpu`` or ``cuda`` (traced on the
      CPU; an op a GPU dispatches differently takes its GPU kernel's name and output sizes,
      :mod:`~tmsim.workload.torchimport.dispatch`).
    - ``math``: math modes to record in the graph (``conv_fp32`` / ``matmul_fp32`` ->
      ``fp32`` or ``tf32``) over those of the running PyTorch (:func:`framework_math`).

    The model's code runs fenced (:mod:`~tmsim.workload.torchimport.fence`): what it prints
    is dropped, and an exit (``sys.exit``) raises rather than ends the process. Every storage
    is recorded with its shape, a complex one as pairs of floats
    (:mod:`~tmsim.workload.torchimport.reduction`).

    Raises :class:`TorchImportError` (one line) when torch is missing, for an argument of
    the wrong kind, when PyTorch cannot trace the step, with its reason, when the model's
    code exits, for dtypes eager PyTorch would refuse
    (:mod:`~tmsim.workload.torchimport.dtypes`) and for a dtype a graph cannot record.
    """
    from tmsim.workload.torchimport import trace
    from tmsim.workload.torchimport.dispatch import DEVICES

    if device not in DEVICES:
        raise TorchImportError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    given, wanted, name = _prepared(module, inputs, targets, loss, optimizer, name)
    if math is not None and not isinstance(math, Mapping):
        raise TorchImportError(f"math must map math-mode names to modes, got {math!r}")
    modes = {**framework_math(), **(math or {})}
    traced = trace.trace(module, given, wanted, loss, name, device)
    try:
        return step_graph(traced, Optimizer(optimizer), modes)
    except GraphError as exc:
        raise TorchImportError(str(exc)) from None


def framework_math() -> dict[str, str]:
    """The math modes the running PyTorch is set to where they differ from its defaults:
    ``conv_fp32`` ``fp32`` when ``torch.backends.cudnn.allow_tf32`` is off, ``matmul_fp32``
    ``tf32`` when ``torch.get_float32_matmul_precision()`` is not ``highest`` (or
    ``torch.backends.cuda.matmul.allow_tf32`` is on)."""
    import torch

    out = {}
    if not torch.backends.cudnn.allow_tf32:
        out["conv_fp32"] = "fp32"
    if torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32:
        out["matmul_fp32"] = "tf32"
    return out


def measure_torch(
    module: Any,
    inputs: object,
    *,
    targets: object = None,
    loss: str = "cross_entropy",
    optimizer: str = "sgd",
    name: str | None = None,
    device: str = "cpu",
    warmup: int = 2,
    repeats: int = 5,
    progress: Any = None,
) -> Any:
    """The training step of ``module`` (arguments as :func:`import_torch`) with every kernel
    timed on ``device`` after ``warmup`` runs, the median of ``repeats``
    (:func:`~tmsim.workload.torchimport.measure.measure_step`): a
    :class:`~tmsim.workload.torchimport.measure.MeasuredStep`. ``progress(done, total)`` is
    called after each kernel. Raises :class:`TorchImportError` in one line."""
    for label, value in (("warmup", warmup), ("repeats", repeats)):
        low = 0 if label == "warmup" else 1
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 10_000:
            raise TorchImportError(f"{label} must be an integer of {low} to 10000, got {value!r}")
    from tmsim.workload.torchimport import measure

    given, wanted, name = _prepared(module, inputs, targets, loss, optimizer, name)
    return measure.measure_step(
        module,
        given,
        wanted,
        loss,
        Optimizer(optimizer),
        name,
        device=device,
        warmup=warmup,
        repeats=repeats,
        progress=progress,
    )


def _prepared(
    module: Any, inputs: object, targets: object, loss: str, optimizer: str, name: str | None
) -> tuple[Any, Any, str]:
    """The checked arguments of a trace: input specs, target specs (None: the loss's
    default) and the graph's name. Raises :class:`TorchImportError` for a bad one."""
    require_torch()
    import torch

    from tmsim.workload.torchimport import specs

    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if loss not in LOSSES:
        raise TorchImportError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if optimizer not in OPTIMIZERS:
        raise TorchImportError(
            f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}"
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TorchImportError(f"name must be a non-empty string, got {name!r}")
    floating = next((p.dtype for p in module.parameters() if p.is_floating_point()), None)
    default = floating or torch.float32
    given = specs.specs(inputs, "inputs", default)
    wanted: list[specs.Spec] | None = None
    if targets is not None:
        if loss == "sum":
            raise TorchImportError("the sum loss takes no targets")
        wanted = specs.specs(targets, "targets", default)
    if name is None:
        batch = f"-b{given[0].shape[0]}" if given[0].shape else ""
        name = f"{type(module).__name__.lower()}{batch}"
    return given, wanted, name


def build_model(source: str, dtype: str | None = None) -> Any:
    """The :class:`torch.nn.Module` ``source`` names, built on the ``meta`` device (no
    memory) and cast to ``dtype`` (a tmsim dtype name) if given; see
    :func:`tmsim.workload.torchimport.sources.build_model`."""
    require_torch()
    from tmsim.workload.torchimport import sources

    return sources.build_model(source, dtype)


def model_name(source: str) -> str:
    """A short name for the model ``source`` names: ``resnet50`` for
    ``torchvision:resnet50`` or ``models.py:resnet50`` (torch-free)."""
    attr = source.rpartition(":")[2] or source
    return attr.rsplit(".", 1)[-1] or "model"


__all__ = [
    "INSTALL_HINT",
    "LOSSES",
    "OPTIMIZERS",
    "Optimizer",
    "TorchImportError",
    "build_model",
    "import_torch",
    "measure_torch",
    "model_name",
    "require_torch",
    "step_graph",
]
