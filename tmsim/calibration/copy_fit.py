"""How much a copy into GPU memory slows the kernels beside it, fitted to measured steps.

Data (``calibration/h200/results.json``, ``beside_copies``, measured on an H200 SXM on
2026-11-28): ResNet-50 fp32 b64 and GPT-2 small bf16 b8 training steps alone and with pinned
1 GiB copies running for the whole step on side streams, host to device, device to host and
both. Host-to-device copies slow the steps by 5.4% and 2.8%; device-to-host by -0.7% and
1.0%, within what sharing device memory's bandwidth predicts (0.6% and 0.4%).

Mechanism: a copied byte costs its destination tier ``dst_cost_factor`` times the device time
of a kernel's written byte (:class:`hwmodels.paths.CopyPath`), so that a copy beside a kernel
bound by device memory takes that much more of its time. The replay's own model measures
what a long copy beside each kernel costs it (:func:`tmsim.sim.beside.beside_costs`); a copy
running the whole step delays the step by the sum over its kernels of that delay per byte
times the bytes it moves beside each. :func:`fit_h200` finds the factor of the host-to-device
path that best predicts both measured slowdowns (least squares of the log ratio of slowed to
alone); the device-to-host path keeps 1 (what the measurements show is within its noise).
``python -m tmsim.calibration.copy_fit`` prints the fit and each workload's slowdown.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

from hwmodels.platform import Platform
from tmsim.calibration.kernel_fit import H200_DIR
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.sim.beside import beside_costs
from tmsim.workload.files import load_graph
from tmsim.workload.graph import Graph

#: The steps measured beside copies.
CONFIGS = ("resnet50_b64", "gpt2_bf16_b8")
#: The factors the fit may take.
FACTOR_BOUNDS = (1.0, 50.0)


def with_factor(platform: Platform, src: str, dst: str, factor: float) -> Platform:
    """``platform`` with the copy path ``src -> dst`` charging its destination ``factor``."""
    paths = tuple(
        dataclasses.replace(p, dst_cost_factor=factor) if (p.src, p.dst) == (src, dst) else p
        for p in platform.copy_paths
    )
    return dataclasses.replace(platform, copy_paths=paths)


def step_slowdown(graph: Graph, platform: Platform, src: str, dst: str) -> float:
    """The all-on-device step of ``graph`` with a copy ``src -> dst`` running beside every
    kernel, over the step alone, by the replay's model (module documentation)."""
    cost = CostModel(graph, platform)
    alone = cost.kernel_times_s(np.zeros(cost.op_tensor.size, dtype=np.int64))
    beside = beside_costs(cost)
    p = beside.path(platform.tier_index(src), platform.tier_index(dst))
    moved = alone / beside.copy_s_per_byte[:, p]
    delay = float((beside.slow_s_per_byte[:, p] * moved).sum())
    return 1.0 + delay / float(alone.sum())


def measured_slowdowns(path: Path, direction: str) -> dict[str, float]:
    """Each configuration's measured slowdown beside copies ``direction`` (``h2d``, ``d2h``)."""
    try:
        doc = json.loads(path.read_text())["training"]
        return {c: float(doc[c]["beside_copies"][direction]["slowdown"]) for c in CONFIGS}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TmsimError(f"{path}: no beside_copies measurements ({exc!r})") from None


def fit_factor(
    graphs: Sequence[Graph], measured: Sequence[float], platform: Platform, src: str, dst: str
) -> float:
    """The ``dst_cost_factor`` of ``src -> dst`` whose predicted slowdowns best match
    ``measured`` (one per graph): least squares of the log ratio, bounded."""

    def loss(factor: float) -> float:
        p = with_factor(platform, src, dst, factor)
        return sum(
            math.log(step_slowdown(g, p, src, dst) / m) ** 2
            for g, m in zip(graphs, measured, strict=True)
        )

    result = minimize_scalar(loss, bounds=FACTOR_BOUNDS, method="bounded", options={"xatol": 1e-3})
    return float(result.x)


def fit_h200(directory: Path = H200_DIR, platform: Platform | None = None) -> float:
    """The H200's host-to-device ``dst_cost_factor`` (module documentation)."""
    from hwmodels.presets import load_preset

    base = platform if platform is not None else load_preset("h200-host-nvme")
    measured = measured_slowdowns(directory / "results.json", "h2d")
    graphs = [load_graph(directory / "graphs" / f"{c}.json") for c in CONFIGS]
    return fit_factor(graphs, [measured[c] for c in CONFIGS], base, "host", "device")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fitted factor and each workload's slowdowns, predicted and measured."""
    from hwmodels.presets import load_preset

    args = list(sys.argv[1:] if argv is None else argv)
    directory = Path(args[0]) if args else H200_DIR
    factor = fit_h200(directory)
    print(f"dst_cost_factor (host -> device) = {factor:.4g}")
    base = load_preset("h200-host-nvme")
    for direction, (src, dst) in (("h2d", ("host", "device")), ("d2h", ("device", "host"))):
        measured = measured_slowdowns(directory / "results.json", direction)
        fitted = with_factor(base, "host", "device", factor)
        for c in CONFIGS:
            g = load_graph(directory / "graphs" / f"{c}.json")
            before = step_slowdown(g, with_factor(base, "host", "device", 1.0), src, dst)
            after = step_slowdown(g, fitted, src, dst)
            print(
                f"{c:14s} {direction}: measured {measured[c]:.4f}, factor 1 {before:.4f}, "
                f"fitted {after:.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
