"""Graph construction speed: every zoo model's training step, and DenseNet-264 at batch 512.

Prints, per model, kernel and tensor counts, peak live bytes and the best of several timings
of (forward model -> training graph with validation and liveness). Liveness alone is timed
by rebuilding a :class:`Graph` from an existing graph's tensors and kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import MODELS

REPEATS = 5
BATCH = 512


def _best_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(
        f"{'model':14s} {'kernels':>8s} {'tensors':>8s} {'peak GB':>9s} "
        f"{'build s':>8s} {'graph s':>8s} {'us/kernel':>9s}"
    )
    for name, fn in MODELS.items():
        g = training_graph(fn(BATCH))
        build_s = _best_s(lambda fn=fn: training_graph(fn(BATCH)))  # type: ignore[misc]
        graph_s = _best_s(lambda g=g: Graph(g.name, g.tensors, g.kernels))  # type: ignore[misc]
        print(
            f"{name:14s} {len(g.kernels):8d} {len(g.tensors):8d} {g.peak_live_bytes / 1e9:9.1f} "
            f"{build_s:8.3f} {graph_s:8.3f} {1e6 * build_s / len(g.kernels):9.1f}"
        )
    print(f"(batch {BATCH}; best of {REPEATS}; 'graph s' = validation + liveness only)")
    print("scaling: a residual chain of n kernels (each reads its two predecessors)")
    base = None
    for n in (1_000, 10_000, 100_000):
        tensors, kernels = _chain(n)
        seconds = _best_s(lambda t=tensors, k=kernels: Graph("chain", t, k), 3)  # type: ignore[misc]
        per = seconds / n
        base = base or per
        print(f"  n={n:>7,d}  {seconds:7.3f} s  {1e6 * per:6.2f} us/kernel  x{per / base:4.2f}")


def _chain(n: int) -> tuple[list[Tensor], list[Kernel]]:
    tensors = [Tensor("x", 4096, Role.INPUT), Tensor("w", 64, Role.WEIGHT)]
    kernels = []
    prev = ["x", "x"]
    for i in range(n):
        tensors.append(Tensor(f"a{i}", 4096, Role.ACTIVATION))
        kernels.append(Kernel(f"k{i}", "add", (prev[-1], prev[-2], "w"), (f"a{i}",), Phase.FORWARD))
        prev.append(f"a{i}")
    return tensors, kernels


if __name__ == "__main__":
    main()
