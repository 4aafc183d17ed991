"""Throughput of ``tmsim sweep`` (tmsim.sweeps.engine.run_sweep), in points per second.

The sweep: resnet50 at batch 8 on cascadelake-optane, strategies all-slow, first-touch and
2lm (block 64 KiB) at four slow:fast ratios and two PMM read bandwidths: 24 points and 2
all-fast baselines, each a plan, a validation and a contended replay (2lm: a cache walk).
Each configuration runs from an empty folder (the table included), then again with every
point finished (the cost of resuming: expansion, reading the point files, the table). The
Dask rows use a local cluster of two worker processes, if ``distributed`` is installed.
"""

from __future__ import annotations

import os
import tempfile
import time
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tmsim.sweeps.engine import SweepReport, run_sweep
from tmsim.sweeps.spec import Sweep, sweep_from_dict

SPEC = """
[sweep]
name = "bench"
[grid]
model = "resnet50"
batch = 8
platform = "cascadelake-optane"
ratio = ["8:1", "4:1", "2:1", "1:1"]
strategy = ["all-slow", "first-touch", "2lm"]
[grid.overrides]
"tiers.PMM.read_bw_GBps" = [18.8, 37.6]
[settings]
cache_block_bytes = 65536
"""


def _timed(label: str, sweep: Sweep, run: Callable[[Path], SweepReport]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for phase in ("fresh", "resume"):
            t0 = time.perf_counter()
            report = run(Path(tmp))
            seconds = time.perf_counter() - t0
            c = report.counts
            print(
                f"{label:18s} {phase:7s} {c.total:6d} {c.evaluated:9d} {seconds:8.2f} "
                f"{c.total / seconds:9.2f}"
            )


def _local(sweep: Sweep, workers: int, out: Path) -> SweepReport:
    return run_sweep(sweep, out, workers=workers)


def main() -> None:
    sweep = sweep_from_dict(tomllib.loads(SPEC), "bench/sweep.py")
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'executor':18s} {'run':7s} {'points':>6s} {'evaluated':>9s} {'wall s':>8s} "
        f"{'points/s':>9s}"
    )
    for workers in (1, 2):
        _timed(f"local, {workers} worker(s)", sweep, partial(_local, sweep, workers))
    try:
        from distributed import LocalCluster
    except ImportError:
        print("dask: distributed not installed (pip install 'tmsim[dask]'); skipped")
        return
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        _timed("dask, 2 processes", sweep, lambda d: run_sweep(sweep, d, dask_address=address))
