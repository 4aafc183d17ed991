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

import os
from collections.abc import Callable, Mapping
from typing import Any

from hwmodels.platform import Platform
from tmsim.profiles import Profile, write_profile
from tmsim.workload.graph import Graph
from tmsim.workload.torchimport import (
    LOSSES,
    OPTIMIZERS,
    TorchImportError,
    build_model,
    measure_torch,
)
from tmsim.workload.torchimport import import_torch as _import_torch


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
    and weights, gradients, activations and optimizer state take their roles. ``device``
    (``cpu`` or ``cuda``; :func:`target_device` names a platform's) is the device whose kernels
    the graph holds: traced on the CPU, with the ops a GPU dispatches differently (fused
    attention's backend and what it saves) as the GPU runs them. ``math`` (``conv_fp32`` /
    ``matmul_fp32`` -> ``fp32`` or ``tf32``) records the step's math modes, by default those
    the running PyTorch is set to where they differ from its defaults
    (``torch.set_float32_matmul_precision("high")`` before importing records fp32 matrix
    products in TF32); a calibrated kernel model prices the step in them.

    Raises :class:`~tmsim.errors.TmsimError` in one line when torch is missing, for a bad
    argument, and when PyTorch cannot trace the step.

    .. code-block:: python

       import torch, torchvision, tmsim

       with torch.device("meta"):
           model = torchvision.models.resnet50()
       g = tmsim.import_torch(model, inputs=(32, 3, 224, 224), optimizer="sgd")
       plan = tmsim.plan(g, tmsim.platform(), "sync", fast="4:1")
    """
    return _import_torch(
        module,
        inputs,
        targets=targets,
        loss=loss,
        optimizer=optimizer,
        name=name,
        device=device,
        math=math,
    )


def target_device(platform: Platform) -> str:
    """The device PyTorch runs a step on for ``platform``: ``cuda`` for a GPU, whose kernels
    reach a tier that copy paths join to one they do not reach (device memory, host memory
    behind a link) or a tier behind a kernel link (GH200's LPDDR5X), else ``cpu``."""
    reach = set(platform.kernel_tiers)
    behind = any((p.src in reach) != (p.dst in reach) for p in platform.copy_paths)
    return "cuda" if behind or platform.kernel_links else "cpu"


def profile(
    module: Any,
    inputs: object,
    out: str | os.PathLike[str],
    *,
    targets: object = None,
    loss: str = "cross_entropy",
    optimizer: str = "sgd",
    name: str | None = None,
    device: str = "cpu",
    tier: str | None = None,
    warmup: int = 2,
    repeats: int = 5,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Graph, Profile]:
    """Measure every kernel of ``module``'s training step on this machine and write the
    profile ``--profile`` reads to ``out``: the step traced as :func:`import_torch` traces
    it (same arguments), each kernel run on real tensors on ``device`` (``cpu`` or ``cuda``)
    ``warmup`` times, then timed ``repeats`` times, the median kept
    (:mod:`tmsim.workload.torchimport.measure`). Each row puts every operand on ``tier``
    (default: ``device`` on CUDA, ``host`` on the CPU, the kernel tiers of the platforms
    :func:`calibrate` writes). Returns the graph (save it to plan with the profile) and the
    profile read back. ``progress(done, total)`` is called after each kernel.

    Raises :class:`~tmsim.errors.TmsimError` in one line when torch is missing, for a bad
    argument, when the step cannot be traced or run, and when it does not fit on the device.

    .. code-block:: python

       g, prof = tmsim.profile(model, (64, 1024), "mlp.csv", loss="mse")
       tmsim.save(g, "mlp.json")
       plan = tmsim.plan(g, tmsim.platform("host.toml"), "all-fast", profile=prof)
    """
    if tier is not None and (not isinstance(tier, str) or not tier.strip()):
        raise TorchImportError(f"tier must be a tier's name, got {tier!r}")
    measured = measure_torch(
        module,
        inputs,
        targets=targets,
        loss=loss,
        optimizer=optimizer,
        name=name,
        device=device,
        warmup=warmup,
        repeats=repeats,
        progress=progress,
    )
    chosen = tier or ("device" if measured.device.startswith("cuda") else "host")
    return measured.graph, write_profile(out, measured.graph, measured.seconds, chosen)


def torch_model(source: str, dtype: str | None = None) -> Any:
    """The :class:`torch.nn.Module` named ``source``: ``torchvision:NAME`` (built with
    ``weights=None``), ``package.module:ATTR`` or ``path/to/file.py:ATTR``, where ``ATTR``
    is a module or a class or function that builds one with no arguments; built on the
    ``meta`` device (no memory) and, if ``dtype`` is given (``fp32``, ``fp16``, ``bf16``,
    ``fp64``), its floating-point parameters and buffers cast to it (complex ones are kept).
    Raises :class:`~tmsim.errors.TmsimError` in one line for a source that names no module,
    and when torch is missing."""
    if not isinstance(source, str):
        raise TorchImportError(f"a model's source must be a string, got {type(source).__name__}")
    return build_model(source, dtype)


__all__ = ["LOSSES", "OPTIMIZERS", "import_torch", "profile", "target_device", "torch_model"]
