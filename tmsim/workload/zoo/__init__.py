"""The model zoo: the AutoTM paper's networks and GPT-2/LLaMA training steps, by name.

Two kinds of entry share one namespace (:data:`NAMES`):

- :data:`MODELS`: forward models of the CNNs, each a function ``(batch, image_hw=...,
  dtype="fp32", classes=1000) -> ForwardModel`` that
  :func:`~tmsim.workload.training.training_graph` turns into a training step (SGD with
  momentum); :func:`model` looks one up.
- :data:`TRANSFORMERS`: decoder-only transformers, each a function ``(batch, seq_len=...,
  dtype="fp16", attention=..., layers=None) -> Graph`` building its whole mixed-precision
  step with Adam (:mod:`tmsim.workload.zoo.transformer`).

:func:`entry` gives either kind by name (its signature lists the arguments a build takes),
:func:`build` the training step of any entry with any of its arguments, and
:func:`training_graph_of` the step with every argument but the batch and dtype at its
default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tmsim.errors import GraphError
from tmsim.workload.graph import Graph
from tmsim.workload.layers import ForwardModel
from tmsim.workload.training import training_graph
from tmsim.workload.zoo.densenet import densenet121, densenet264
from tmsim.workload.zoo.inception import inception_v4
from tmsim.workload.zoo.resnet import resnet50, resnet200
from tmsim.workload.zoo.transformer import TRANSFORMERS, TransformerFn
from tmsim.workload.zoo.vgg import vgg19, vgg416


class ModelFn(Protocol):
    """Signature shared by every CNN entry of the zoo."""

    def __call__(
        self, batch: int, image_hw: tuple[int, int] = ..., dtype: str = ..., classes: int = ...
    ) -> ForwardModel: ...


MODELS: Mapping[str, ModelFn] = {
    "vgg19": vgg19,
    "vgg416": vgg416,
    "resnet50": resnet50,
    "resnet200": resnet200,
    "inception_v4": inception_v4,
    "densenet121": densenet121,
    "densenet264": densenet264,
}

#: Every zoo entry's name: the CNNs, then the transformers.
NAMES: tuple[str, ...] = (*MODELS, *TRANSFORMERS)

#: One line per zoo entry, for listings (the transformers' parameter counts: Hugging Face's
#: ``num_parameters()`` of the published checkpoints, GPT-2's with its tied output layer).
DESCRIPTIONS: Mapping[str, str] = {
    "vgg19": "VGG19, 224x224, 143.7 M parameters",
    "vgg416": "AutoTM's VGG416: VGG19 with 413 convolutions, 224x224",
    "resnet50": "ResNet-50 (v1.5 bottleneck), 224x224, 25.6 M parameters",
    "resnet200": "ResNet-200 (3, 24, 36, 3 bottlenecks), 224x224, 64.7 M parameters",
    "inception_v4": "Inception v4 as AutoTM ran it (no batch norm), 299x299, 42.6 M parameters",
    "densenet121": "DenseNet-BC-121, growth 32, 224x224, 8.0 M parameters",
    "densenet264": "DenseNet-BC-264, growth 32, 224x224, 33.3 M parameters",
    "gpt2_small": "GPT-2 small, 12 x 768, seq 1024, fp16 + Adam, 124.4 M parameters",
    "gpt2_medium": "GPT-2 medium, 24 x 1024, seq 1024, fp16 + Adam, 354.8 M parameters",
    "gpt2_large": "GPT-2 large, 36 x 1280, seq 1024, fp16 + Adam, 774.0 M parameters",
    "gpt2_xl": "GPT-2 XL, 48 x 1600, seq 1024, fp16 + Adam, 1557.6 M parameters",
    "llama_7b": "LLaMA-7B, 32 x 4096, seq 2048, flash attention, fp16 + Adam, 6.74 B parameters",
    "llama_13b": "LLaMA-13B, 40 x 5120, seq 2048, flash attention, fp16 + Adam, 13.0 B parameters",
}


def _unknown(name: str) -> GraphError:
    return GraphError(f"unknown model {name!r}; known models: {', '.join(NAMES)}")


def model(name: str) -> ModelFn:
    """The CNN entry called ``name``; raises :class:`GraphError` for a transformer (which
    builds its step itself: :func:`build`) and, listing the known names, for an unknown one."""
    if name in TRANSFORMERS:
        raise GraphError(
            f"zoo model {name!r} is a transformer, built as a whole training step "
            "(tmsim.workload.zoo.build), not a forward model"
        )
    try:
        return MODELS[name]
    except KeyError:
        raise _unknown(name) from None


def entry(name: str) -> ModelFn | TransformerFn:
    """The zoo entry called ``name``, of either kind; raises :class:`GraphError` listing the
    known names."""
    if name in TRANSFORMERS:
        return TRANSFORMERS[name]
    return model(name)


def build(name: str, **args: Any) -> Graph:
    """The training step of zoo entry ``name`` with ``args`` (keywords of its signature).

    Raises :class:`GraphError` for an unknown name and for arguments the entry refuses;
    ``TypeError`` for an argument it does not take.
    """
    if name in TRANSFORMERS:
        return TRANSFORMERS[name](**args)
    return training_graph(model(name)(**args))


def training_graph_of(name: str, batch: int, dtype: str | None = None) -> Graph:
    """Training-step graph of zoo entry ``name`` at ``batch``, in ``dtype`` (None: the
    entry's default, ``fp32`` for the CNNs and ``fp16`` mixed precision for the
    transformers), every other argument at its default."""
    return build(name, batch=batch) if dtype is None else build(name, batch=batch, dtype=dtype)


__all__ = [
    "DESCRIPTIONS",
    "MODELS",
    "NAMES",
    "TRANSFORMERS",
    "ModelFn",
    "TransformerFn",
    "build",
    "entry",
    "model",
    "training_graph_of",
]
