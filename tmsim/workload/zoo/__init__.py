"""The model zoo: forward models of the AutoTM paper's networks, by name.

Each entry is a function ``(batch, image_hw=..., dtype="fp32", classes=1000) -> ForwardModel``;
:func:`model` looks one up and :func:`training_graph_of` builds its training step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from tmsim.errors import GraphError
from tmsim.workload.graph import Graph
from tmsim.workload.layers import ForwardModel
from tmsim.workload.training import training_graph
from tmsim.workload.zoo.densenet import densenet121, densenet264
from tmsim.workload.zoo.inception import inception_v4
from tmsim.workload.zoo.resnet import resnet50, resnet200
from tmsim.workload.zoo.vgg import vgg19, vgg416


class ModelFn(Protocol):
    """Signature shared by every zoo entry."""

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

#: One line per zoo entry, for listings.
DESCRIPTIONS: Mapping[str, str] = {
    "vgg19": "VGG19, 224x224, 143.7 M parameters",
    "vgg416": "AutoTM's VGG416: VGG19 with 413 convolutions, 224x224",
    "resnet50": "ResNet-50 (v1.5 bottleneck), 224x224, 25.6 M parameters",
    "resnet200": "ResNet-200 (3, 24, 36, 3 bottlenecks), 224x224, 64.7 M parameters",
    "inception_v4": "Inception v4 as AutoTM ran it (no batch norm), 299x299, 42.6 M parameters",
    "densenet121": "DenseNet-BC-121, growth 32, 224x224, 8.0 M parameters",
    "densenet264": "DenseNet-BC-264, growth 32, 224x224, 33.3 M parameters",
}


def model(name: str) -> ModelFn:
    """The zoo entry called ``name``; raises :class:`GraphError` listing the known names."""
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(MODELS)
        raise GraphError(f"unknown model {name!r}; known models: {known}") from None


def training_graph_of(name: str, batch: int, dtype: str = "fp32") -> Graph:
    """Training-step graph of zoo model ``name`` at ``batch`` (default image size)."""
    return training_graph(model(name)(batch, dtype=dtype))


__all__ = ["DESCRIPTIONS", "MODELS", "ModelFn", "model", "training_graph_of"]
