"""The CUDA half of :mod:`tmsim.calibration.machine`: a GPU's memory, peaks, launch and links,
measured with torch (the optional ``torch`` extra). Every time is taken with CUDA events on
the stream that ran the work; rates are the best of
:data:`~tmsim.calibration.machine.REPEATS` runs."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

from tmsim.calibration.machine import REPEATS, LinkRates, MachineRates, MemoryRates

#: Matrix side of the device's peaks, full and quick; bytes of each copy, full and quick.
MATMUL_N, QUICK_MATMUL_N = 8192, 2048
COPY_BYTES, QUICK_COPY_BYTES = 256 << 20, 32 << 20


def available() -> bool:
    """Whether torch is installed and has a CUDA device."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def _best_s(run: Callable[[], object], stream: Any = None) -> float:
    """The least seconds of :data:`REPEATS` runs of ``run`` on ``stream`` (CUDA events)."""
    import torch

    run()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(REPEATS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return max(best, 1e-9)


def measure(rates: MachineRates, quick: bool) -> MachineRates:
    """``rates`` with the first CUDA device's memory, peaks, launch and links added."""
    import torch

    props = torch.cuda.get_device_properties(torch.device("cuda"))
    memory = _memory(rates.array_bytes, int(props.total_memory))
    peaks = _peaks(QUICK_MATMUL_N if quick else MATMUL_N)
    tiny = torch.ones(8, device="cuda")
    launch_s = _best_s(lambda: tiny.add_(1.0))
    links = _links(QUICK_COPY_BYTES if quick else COPY_BYTES)
    torch.cuda.empty_cache()
    return dataclasses.replace(
        rates,
        device=memory,
        device_peaks=peaks,
        device_launch_s=launch_s,
        links=links,
        device_name=str(props.name),
        device_cores=int(props.multi_processor_count),
    )


def _memory(nbytes: int, capacity: int) -> MemoryRates:
    """Device memory's read (a sum), write (a fill) and copy rates on ``nbytes`` arrays."""
    import torch

    x = torch.ones(nbytes // 4, device="cuda")
    y = torch.empty_like(x)
    read_s = _best_s(lambda: x.sum())
    write_s = _best_s(lambda: y.fill_(2.0))
    copy_s = _best_s(lambda: y.copy_(x))
    size = x.nbytes
    return MemoryRates(size / read_s, size / write_s, 2 * size / copy_s, capacity)


def _peaks(n: int) -> dict[str, float]:
    """FLOP/s of ``n x n`` matrix products in bf16, fp16, fp32 (TF32 off) and TF32."""
    import torch

    peaks: dict[str, float] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype, tf32 in (
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)

            def product(a: Any = a, b: Any = b) -> object:
                return a @ b

            peaks[name] = 2.0 * n**3 / _best_s(product)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return peaks


def _links(nbytes: int) -> LinkRates:
    """Host <-> device copies of ``nbytes``: pinned and pageable alone, pinned both ways at
    once on two streams (each direction's bytes over the time both take)."""
    import torch

    dev = torch.device("cuda")
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    back = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    out: dict[str, float] = {}
    for pinned in (True, False):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        kind = "pinned" if pinned else "pageable"

        def up_copy(h: Any = host) -> object:
            return on_device.copy_(h, non_blocking=True)

        def down_copy(h: Any = host) -> object:
            return h.copy_(on_device, non_blocking=True)

        out[f"h2d_{kind}"] = nbytes / _best_s(up_copy)
        out[f"d2h_{kind}"] = nbytes / _best_s(down_copy)
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    up, down = torch.cuda.Stream(), torch.cuda.Stream()

    def both() -> None:
        with torch.cuda.stream(up):
            on_device.copy_(src, non_blocking=True)
        with torch.cuda.stream(down):
            dst.copy_(back, non_blocking=True)
        torch.cuda.synchronize()

    both_s = _best_s(both)
    return LinkRates(
        out["h2d_pinned"],
        out["d2h_pinned"],
        out["h2d_pageable"],
        out["d2h_pageable"],
        nbytes / both_s,
        nbytes / both_s,
    )
