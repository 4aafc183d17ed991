"""A platform file of the machine at hand, from :mod:`tmsim.calibration.machine`'s rates.

The file is a preset like those under ``hwmodels/presets``, every number marked measured
(with the machine and the day) or assumed:

- a CPU alone: one tier, ``host`` (capacity as the system reports it, read and write rates
  measured), its cores, its measured matrix-product rates as the peaks, the measured dispatch
  as the launch overhead, and efficiencies of 1 (the peaks and rates are already what kernels
  reach: assumed for kernels smaller than the benchmark's);
- with a CUDA device: a ``device`` tier (its memory, measured) that kernels reach and the
  ``host`` tier behind the link, with copy paths at the pinned rates measured each way; the
  pageable rates and the rates of both directions at once are written beside them as
  comments.

:func:`platform_toml` returns the text; :func:`calibrated_platform` parses it back (so what
is written is exactly what ``--platform FILE`` reads).
"""

from __future__ import annotations

import re

from hwmodels.platform import Platform
from hwmodels.presets import platform_from_toml
from tmsim.calibration.machine import MachineRates


def _quoted(text: str) -> str:
    """``text`` as a TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _gbps(rate: float) -> str:
    return f"{rate / 1e9:.4g}"


def _efficiency_block(table: str) -> list[str]:
    lines = [
        "",
        "# Assumed: the peaks and rates above are what the benchmark kernels reached.",
        f"[{table}.efficiency]",
    ]
    classes = ("conv", "matmul", "norm", "elementwise")
    lines += [f"{c} = {{ compute = 1.0, memory = 1.0 }}" for c in classes]
    return lines


def platform_toml(rates: MachineRates, name: str) -> str:
    """The platform file of ``rates``, named ``name`` (module documentation)."""
    day, host = rates.day, rates.host
    where = f"measured by tmsim calibrate on {rates.host_name}, {day}"
    cuda = rates.device is not None and rates.links is not None
    lines = [
        f"# {name}: this machine, measured by `tmsim calibrate` on {day}.",
        f"# Host: {rates.host_name}, {rates.host_cores} cores; memory rates on "
        f"{rates.array_bytes >> 20} MiB arrays, matrix products of {rates.matmul_n}^2.",
        "# Units are in the key names: GBps = 10^9 bytes/s, TFLOPs = 10^12 FLOP/s, us.",
        "",
        f"name = {_quoted(name)}",
        f"description = {_quoted(f'this machine ({rates.host_name}), measured {day}')}",
        f"source = {_quoted(where)}",
        f'kernel_tiers = ["{"device" if cuda else "host"}"]',
    ]
    if cuda and rates.device is not None:
        dev = rates.device
        lines += [
            "",
            "[[tiers]]",
            'name = "device"',
            f"capacity_bytes = {dev.capacity_bytes}  # measured (the device reports it)",
            f"read_bw_GBps = {_gbps(dev.read_bytes_per_s)}  # measured: a sum",
            f"write_bw_GBps = {_gbps(dev.write_bytes_per_s)}  # measured: a fill",
            f"# copy (bytes read + written): {_gbps(dev.copy_bytes_per_s)} GB/s, measured",
            f"source = {_quoted(f'{rates.device_name}, {where}')}",
        ]
    lines += [
        "",
        "[[tiers]]",
        'name = "host"',
        f"capacity_bytes = {host.capacity_bytes}  # measured (the system reports it)",
        f"read_bw_GBps = {_gbps(host.read_bytes_per_s)}  # measured: a dot product, every core",
        f"write_bw_GBps = {_gbps(host.write_bytes_per_s)}  # measured: a fill, every core",
        f"# copy (bytes read + written): {_gbps(host.copy_bytes_per_s)} GB/s, measured",
        f"source = {_quoted(where)}",
        "",
    ]
    if cuda:
        lines += _device_compute(rates, where)
    else:
        lines += [
            "[compute]",
            f"name = {_quoted(rates.host_name)}",
            f"cores = {rates.host_cores}  # measured (os.cpu_count)",
            f"launch_overhead_us = {rates.host_launch_s * 1e6:.4g}  # measured: numpy's dispatch",
            f"source = {_quoted(where)}",
            "",
            "# Measured: numpy's matrix product (its BLAS, every core).",
            "[compute.peak_TFLOPs]",
        ]
        lines += [f"{d} = {v / 1e12:.6g}" for d, v in rates.host_peaks.items()]
        lines += _efficiency_block("compute")
    return "\n".join(lines) + "\n"


def _device_compute(rates: MachineRates, where: str) -> list[str]:
    links = rates.links
    assert links is not None
    lines = [
        "[compute]",
        f"name = {_quoted(rates.device_name)}",
        f"cores = {rates.device_cores}  # measured: streaming multiprocessors",
        f"launch_overhead_us = {rates.device_launch_s * 1e6:.4g}  # measured: an 8-element add",
        f"source = {_quoted(where)}",
        "",
        "# Measured: torch's matrix products (fp32 with TF32 off; tf32 with it on).",
        "[compute.peak_TFLOPs]",
    ]
    lines += [f"{d} = {v / 1e12:.6g}" for d, v in rates.device_peaks.items()]
    lines += _efficiency_block("compute")
    lines += [
        "",
        "# Measured, pinned host memory, one direction alone (the replay's rate). Also measured:",
        f"# pageable {_gbps(links.h2d_pageable)} GB/s host to device, "
        f"{_gbps(links.d2h_pageable)} device to host;",
        "# both_bw: measured, both directions at once (pinned, two streams), each direction's.",
        "# copy_engines: assumed (one a direction).",
    ]
    for src, dst, rate, both in (
        ("host", "device", links.h2d_pinned, links.h2d_both),
        ("device", "host", links.d2h_pinned, links.d2h_both),
    ):
        lines += [
            "",
            "[[copy_paths]]",
            f'src = "{src}"',
            f'dst = "{dst}"',
            f"sync_bw_GBps = {_gbps(rate)}",
            f"async_bw_GBps = {_gbps(rate)}",
            "copy_engines = 1",
            "duplex = true",
            f"both_bw_GBps = {_gbps(min(both, rate))}",
            f"source = {_quoted(where)}",
        ]
    return lines


#: A platform's name: letters, digits, ``.``, ``_`` and ``-``.
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def calibrated_platform(rates: MachineRates, name: str) -> tuple[Platform, str]:
    """The platform of ``rates`` named ``name`` and its file's text (parsed from that text,
    so the two agree)."""
    text = platform_toml(rates, name)
    return platform_from_toml(text, f"calibrated platform {name}"), text
