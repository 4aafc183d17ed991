"""Microbenchmarks of the machine at hand: memory rates, matrix-product peaks, copy rates.

What ``tmsim calibrate`` measures, each as the best of ``repeats`` runs after one untimed run
(the STREAM convention: the rate the hardware can reach, not an average of interruptions):

- **host memory** (numpy, in as many threads as the machine has cores, each on its own slice,
  so that every memory channel is busy): ``read`` takes the dot product of an array with
  itself (bytes read / time; BLAS, vectorized, unlike a sum),
  ``write`` fills it (bytes written / time), ``copy`` copies it (bytes read and written /
  time);
- **host matrix products**: numpy's ``matmul`` (its BLAS, on every core) of ``n x n``
  matrices in fp32 and fp64, ``2 n^3`` FLOPs each;
- **host dispatch**: the median time of a numpy addition of 8 elements, what a kernel costs
  beside its work;
- **a CUDA device** (torch, where one is at hand): the same three memory rates on device
  memory, matrix-product peaks in bf16, fp16, fp32 (TF32 off) and TF32, host-to-device and
  device-to-host copies of pinned and pageable memory, alone and both directions at once on
  two streams, and an empty kernel's launch.

Nothing here writes a file; :mod:`tmsim.calibration.machine_toml` turns a
:class:`MachineRates` into a platform.
"""

from __future__ import annotations

import os
import platform as host_platform
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from tmsim.errors import TmsimError

#: Bytes of each array the memory rates are measured on, full and quick.
ARRAY_BYTES, QUICK_ARRAY_BYTES = 512 << 20, 32 << 20
#: The side of the square matrices of the matrix-product peaks, full and quick.
MATMUL_N, QUICK_MATMUL_N = 2048, 512
#: Timed runs of each measurement (the best is kept).
REPEATS = 5


@dataclass(frozen=True)
class MemoryRates:
    """Measured rates of one memory (bytes per second): ``read``, ``write``, ``copy`` (read
    plus written bytes), and its ``capacity_bytes`` (as the system reports it)."""

    read_bytes_per_s: float
    write_bytes_per_s: float
    copy_bytes_per_s: float
    capacity_bytes: int


@dataclass(frozen=True)
class LinkRates:
    """Measured copies between host and device memory (bytes per second, one direction's
    bytes over its own time): pinned and pageable, each way, and each way while the other
    runs (pinned, two streams)."""

    h2d_pinned: float
    d2h_pinned: float
    h2d_pageable: float
    d2h_pageable: float
    h2d_both: float
    d2h_both: float


@dataclass(frozen=True)
class MachineRates:
    """What :func:`measure_machine` measured: the ``host`` memory, its ``host_peaks``
    (dtype -> FLOP/s), ``host_launch_s``, ``host_cores``, ``host_name``; where a CUDA device
    was measured, its ``device`` memory, ``device_peaks``, ``device_launch_s``, ``links``,
    ``device_name`` and ``device_cores`` (SMs); the ``day`` and the sizes used."""

    host: MemoryRates
    host_peaks: dict[str, float]
    host_launch_s: float
    host_cores: int
    host_name: str
    day: str
    array_bytes: int
    matmul_n: int
    device: MemoryRates | None = None
    device_peaks: dict[str, float] = field(default_factory=dict)
    device_launch_s: float = 0.0
    links: LinkRates | None = None
    device_name: str = ""
    device_cores: int = 0


def best_s(run: Callable[[], object], repeats: int = REPEATS) -> float:
    """The least wall-clock seconds of ``repeats`` runs of ``run`` after one untimed run."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return max(min(times), 1e-9)


def _threads() -> int:
    return max(1, os.cpu_count() or 1)


def _sliced(array: np.ndarray, n: int) -> list[np.ndarray]:
    return [s for s in np.array_split(array, n) if s.size]


def host_memory(array_bytes: int) -> MemoryRates:
    """The host's read, write and copy rates on arrays of ``array_bytes``, one slice per
    core (module documentation)."""
    n = max(1, array_bytes // 8)
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    workers = _threads()
    parts_src, parts_dst = _sliced(src, workers), _sliced(dst, workers)
    pairs = list(zip(parts_src, parts_dst, strict=True))
    with ThreadPoolExecutor(workers) as pool:

        def each(fn: Callable[..., object], items: list[object]) -> Callable[[], object]:
            return lambda: list(pool.map(fn, items))

        read_s = best_s(each(lambda a: np.dot(a, a), list(parts_src)))
        write_s = best_s(each(lambda a: a.fill(2.0), list(parts_dst)))
        copy_s = best_s(each(lambda p: np.copyto(p[1], p[0]), list(pairs)))
    nbytes = src.nbytes
    return MemoryRates(nbytes / read_s, nbytes / write_s, 2 * nbytes / copy_s, _ram_bytes())


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what Python knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return host_platform.processor() or host_platform.machine() or "host"


def _ram_bytes() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def host_peaks(n: int) -> dict[str, float]:
    """FLOP/s of numpy's ``n x n`` matrix product in fp32 and fp64."""
    out = {}
    rng = np.random.default_rng(0)
    for name, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)

        def product(a: np.ndarray = a, b: np.ndarray = b) -> object:
            return a @ b

        out[name] = 2.0 * n**3 / best_s(product)
    return out


def host_launch_s() -> float:
    """The median seconds of a numpy addition of 8 elements: a kernel's cost beside its
    work."""
    a, b, c = np.ones(8), np.ones(8), np.empty(8)
    times = []
    for _ in range(2001):
        start = time.perf_counter()
        np.add(a, b, out=c)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_machine(*, device: str = "auto", quick: bool = False) -> MachineRates:
    """Measure this machine (module documentation). ``device``: ``auto`` (a CUDA device where
    torch has one, else the host alone), ``cpu`` or ``cuda``. ``quick``: smaller arrays and
    matrices (seconds; the rates are less sure). Raises :class:`TmsimError` for an unknown
    device or ``cuda`` where torch has none."""
    if device not in ("auto", "cpu", "cuda"):
        raise TmsimError(f"device must be auto, cpu or cuda, got {device!r}")
    array_bytes = QUICK_ARRAY_BYTES if quick else ARRAY_BYTES
    n = QUICK_MATMUL_N if quick else MATMUL_N
    rates = MachineRates(
        host=host_memory(array_bytes),
        host_peaks=host_peaks(n),
        host_launch_s=host_launch_s(),
        host_cores=_threads(),
        host_name=cpu_name(),
        day=date.today().isoformat(),
        array_bytes=array_bytes,
        matmul_n=n,
    )
    if device == "cpu":
        return rates
    from tmsim.calibration import machine_cuda

    if not machine_cuda.available():
        if device == "cuda":
            raise TmsimError("device cuda: this machine has no CUDA device torch can use")
        return rates
    return machine_cuda.measure(rates, quick)
