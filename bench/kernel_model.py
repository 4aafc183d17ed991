"""The calibrated kernel model's price: building a cost model with it against the class
roofline on the same platform, per zoo model, and the time of each fit that makes it.

Prints the best of several timings of :class:`tmsim.cost.CostModel` on ``h200-host-nvme``
(with its ``[compute.kernels]``) and on the same platform without it, their ratio, and the
seconds of ``tmsim.calibration.kernel_fit`` and ``copy_fit`` on ``calibration/h200``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from hwmodels.presets import load_preset
from tmsim.calibration import copy_fit, kernel_fit
from tmsim.cost import CostModel
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import MODELS

REPEATS = 3
BATCH = 128


def _best_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    calibrated = load_preset("h200-host-nvme")
    plain = dataclasses.replace(
        calibrated, compute=dataclasses.replace(calibrated.compute, kernels=None)
    )
    print(f"{'model':14s} {'kernels':>8s} {'model s':>8s} {'roofline s':>10s} {'ratio':>6s}")
    for name, fn in MODELS.items():
        g = training_graph(fn(BATCH))
        with_model = _best_s(lambda g=g: CostModel(g, calibrated))  # type: ignore[misc]
        without = _best_s(lambda g=g: CostModel(g, plain))  # type: ignore[misc]
        print(
            f"{name:14s} {len(g.kernels):8d} {with_model:8.3f} {without:10.3f} "
            f"{with_model / without:6.2f}"
        )
    print(f"(batch {BATCH}; best of {REPEATS})")
    print(f"kernel_fit on calibration/h200: {_best_s(kernel_fit.fit_h200, 1):.1f} s")
    print(f"copy_fit on calibration/h200:   {_best_s(copy_fit.fit_h200, 1):.1f} s")


if __name__ == "__main__":
    main()
