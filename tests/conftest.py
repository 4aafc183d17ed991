"""Shared fixtures: small hand-checkable graphs."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

# Property tests draw the same examples on every run, so a suite that passes passes again;
# HYPOTHESIS_PROFILE=explore draws new ones (and finds what the fixed draw cannot).
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

F = Phase.FORWARD


def mlp_graph() -> Graph:
    """Three fully connected layers, forward only; sizes chosen to be told apart."""
    tensors = [
        Tensor("x", 100, Role.INPUT),
        Tensor("w1", 12, Role.WEIGHT),
        Tensor("h1", 20, Role.ACTIVATION),
        Tensor("w2", 8, Role.WEIGHT),
        Tensor("h2", 32, Role.ACTIVATION),
        Tensor("w3", 4, Role.WEIGHT),
        Tensor("y", 40, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("fc1", "linear", ("x", "w1"), ("h1",), F, 10),
        Kernel("fc2", "linear", ("h1", "w2"), ("h2",), F, 20),
        Kernel("fc3", "linear", ("h2", "w3"), ("y",), F, 30),
    ]
    return Graph("mlp", tensors, kernels)


def diamond_graph() -> Graph:
    """``a -> b``, ``b`` fans out to ``c`` and ``d``, which join into ``e``."""
    tensors = [
        Tensor("a", 8, Role.INPUT),
        Tensor("b", 16, Role.ACTIVATION),
        Tensor("c", 32, Role.ACTIVATION),
        Tensor("d", 64, Role.ACTIVATION),
        Tensor("e", 4, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("split", "relu", ("a",), ("b",), F),
        Kernel("left", "relu", ("b",), ("c",), F),
        Kernel("right", "relu", ("b",), ("d",), F),
        Kernel("join", "add", ("c", "d"), ("e",), F),
    ]
    return Graph("diamond", tensors, kernels)


@pytest.fixture
def mlp() -> Graph:
    return mlp_graph()


@pytest.fixture
def diamond() -> Graph:
    return diamond_graph()
