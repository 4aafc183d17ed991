"""PyTorch models as training-step graphs (needs the optional ``torch`` extra:
``pip install 'tmsim[torch]'``).

:func:`import_torch` traces a :class:`torch.nn.Module`'s whole training step (forward pass,
loss, backward pass, optimizer update) on fake tensors, without memory for its parameters or
activations, and returns a :class:`~tmsim.workload.graph.Graph` that every planner, the
simulator and :func:`tmsim.save` take; :func:`torch_model` builds a model named as the
command line names it (``tmsim import torchvision:resnet50 --batch 32 --input 3x224x224``).
How the joint graph becomes tensors and kernels: :mod:`tmsim.workload.torchimport`.

Importing this module does not import torch; calling either function without torch raises
:class:`~tmsim.errors.TmsimError` in one line.
"""

from __future__ import annotations

from typing import Any

from tmsim.workload.graph import Graph
from tmsim.workload.torchimport import LOSSES, OPTIMIZERS, TorchImportError, build_model
from tmsim.workload.torchimport import import_torch as _import_torch


def import_torch(
    module: Any,
    inputs: object,
    *,
    targets: object = None,
    loss: str = "cross_entropy",
    optimizer: str = "sgd",
    name: str | None = None,
) -> Graph:
    """The training step of ``module`` on example ``inputs``, ending with ``loss`` (one of
    ``cross_entropy``, ``mse``, ``sum``) and ``optimizer``'s update (``sgd`` with momentum,
    ``adam``, ``adamw``), as a validated graph named ``name``.

    ``inputs`` (and ``targets``) give shapes and dtypes only: a shape such as
    ``(32, 3, 224, 224)`` (in the module's floating dtype), a ``(shape, dtype)`` pair such
    as ``((8, 1024), "int64")``, or a tensor; one, or a list for several. By default the
    targets are those the loss needs (class indices for cross entropy, over the output's last
    dimension) and the name is the module's class and the batch, ``"resnet-b32"``. The module
    may live on the ``meta`` device (build it under ``torch.device("meta")``); it is neither
    run nor changed. Sizes come from the traced tensors, FLOPs from each ATen op's shapes,
    and weights, gradients, activations and optimizer state take their roles.

    Raises :class:`~tmsim.errors.TmsimError` in one line when torch is missing, for a bad
    argument, and when PyTorch cannot trace the step.

    .. code-block:: python

       import torch, torchvision, tmsim

       with torch.device("meta"):
           model = torchvision.models.resnet50()
       g = tmsim.import_torch(model, inputs=(32, 3, 224, 224), optimizer="sgd")
       plan = tmsim.plan(g, tmsim.platform(), "sync", fast="4:1")
    """
    return _import_torch(module, inputs, targets=targets, loss=loss, optimizer=optimizer, name=name)


def torch_model(source: str, dtype: str | None = None) -> Any:
    """The :class:`torch.nn.Module` named ``source``: ``torchvision:NAME`` (built with
    ``weights=None``), ``package.module:ATTR`` or ``path/to/file.py:ATTR``, where ``ATTR``
    is a module or a class or function that builds one with no arguments; built on the
    ``meta`` device (no memory) and cast to ``dtype`` (``fp32``, ``fp16``, ``bf16``,
    ``fp64``) if given. Raises :class:`~tmsim.errors.TmsimError` in one line for a source
    that names no module, and when torch is missing."""
    if not isinstance(source, str):
        raise TorchImportError(f"a model's source must be a string, got {type(source).__name__}")
    return build_model(source, dtype)


__all__ = ["LOSSES", "OPTIMIZERS", "import_torch", "torch_model"]
