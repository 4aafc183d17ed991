"""Copies beside kernels on the H200: the fitted destination cost reruns from its data, and
the replay's model predicts each measured slowdown (calibration/h200, 2026-11-28)."""

from __future__ import annotations

import pytest

from hwmodels import load_preset
from tmsim.calibration.copy_fit import (
    CONFIGS,
    fit_h200,
    measured_slowdowns,
    step_slowdown,
    with_factor,
)
from tmsim.calibration.kernel_fit import H200_DIR
from tmsim.workload.files import load_graph


def test_the_fit_reruns_to_the_preset() -> None:
    preset = load_preset("h200-host-nvme").copy_path("host", "device").dst_cost_factor
    assert fit_h200() == pytest.approx(preset, rel=1e-3)


@pytest.mark.parametrize("config", CONFIGS)
def test_each_slowdown_is_predicted(config: str) -> None:
    """Host to device: within a percentage point of the measured slowdown (5.4% and 2.8%);
    bandwidth alone (factor 1) gives 0.6% and 0.4%. Device to host: measured -0.7% and 1.0%,
    predicted by bandwidth alone within a percentage point and a half."""
    platform = load_preset("h200-host-nvme")
    graph = load_graph(H200_DIR / "graphs" / f"{config}.json")
    h2d = measured_slowdowns(H200_DIR / "results.json", "h2d")[config]
    d2h = measured_slowdowns(H200_DIR / "results.json", "d2h")[config]
    fitted = step_slowdown(graph, platform, "host", "device")
    plain = step_slowdown(graph, with_factor(platform, "host", "device", 1.0), "host", "device")
    assert abs(fitted - h2d) <= 0.01
    assert abs(plain - h2d) > 0.02  # what the factor is for
    assert abs(step_slowdown(graph, platform, "device", "host") - d2h) <= 0.015
