"""``tmsim platforms``, ``tmsim platform`` and ``tmsim calibrate``: the hardware presets,
platform files, and a platform file of this machine.

The hardware models (numpy) are imported when a command runs, not when its parser is built.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tmsim.cli.args import text_arg

if TYPE_CHECKING:
    from tmsim import Platform


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``platforms`` and ``platform`` on ``sub``."""
    p = sub.add_parser("platforms", help="list the platform presets")
    p.set_defaults(func=_platforms)

    p = sub.add_parser("platform", help="show a platform preset or platform TOML file")
    p.add_argument(
        "platform",
        type=text_arg,
        metavar="NAME_OR_FILE",
        help="preset name or path to a TOML file",
    )
    p.add_argument("--json", action="store_true", help="print the platform as JSON (SI units)")
    p.set_defaults(func=_platform)

    p = sub.add_parser(
        "calibrate",
        help="measure this machine into a platform file",
        description="Measure this machine (memory rates, matrix-product peaks, dispatch; a "
        "CUDA device's memory, peaks and copy rates where torch has one) and write a "
        "platform file that --platform takes, every number marked measured or assumed.",
    )
    p.add_argument(
        "--out", type=text_arg, required=True, metavar="PATH", help="write the platform to PATH"
    )
    p.add_argument(
        "--name", type=text_arg, default="this-machine", help="the platform's name (this-machine)"
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: a CUDA device where torch has one, else the host alone (auto)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes: seconds, less sure rates")
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    import tmsim

    platform = tmsim.calibrate(args.out, name=args.name, device=args.device, quick=args.quick)
    for line in describe(platform):
        print(line)
    print(f"saved            {args.out}")
    return 0


def _platforms(args: argparse.Namespace) -> int:
    import tmsim

    descriptions = tmsim.PRESETS
    width = max(len(n) for n in descriptions)
    for name, text in descriptions.items():
        print(f"{name:{width}s}  {text}")
    return 0


def _platform(args: argparse.Namespace) -> int:
    import tmsim
    from tmsim.api.inputs import platform_document

    platform = tmsim.platform(args.platform)
    if args.json:
        print(json.dumps(platform_document(platform), indent=2))
    else:
        print("\n".join(describe(platform)))
    return 0


def _compute_lines(p: Platform, host: bool) -> list[str]:
    """The compute device (or with ``host`` the host compute, which it must have): its
    peaks and launch, its efficiency per op class, its source."""
    c, label = p.compute, "compute"
    if host and p.host_compute is not None:
        c = p.host_compute.compute
        label = f"host compute (reaches {', '.join(p.host_compute.kernel_tiers)})"
    peaks = ", ".join(f"{d} {v / 1e12:g} TFLOP/s" for d, v in c.peak_flop_per_s)
    lines = [
        f"{label}: {c.name}, {c.cores} cores, {peaks}, launch {c.launch_overhead_s * 1e6:g} us"
    ]
    k = c.kernels
    if k is not None:
        lines.append(
            f"  kernel model: stream {k.stream_bw_bytes_per_s / 1e9:g} GB/s, fixed "
            f"{k.fixed_s * 1e6:.3g} us, dispatch {k.dispatch_s * 1e6:.3g} us, fp32 conv in "
            f"{k.math.conv_fp32.value}, fp32 matmul in {k.math.matmul_fp32.value}"
        )
        for f in k.families:
            fixed = "" if f.fixed_s is None else f", fixed {f.fixed_s * 1e6:.3g} us"
            if f.saturation_units:
                fixed += f", full rate from {f.saturation_units:.3g} units"
            lines.append(
                f"    {f.family.value}: {f.passes:.3g} passes, {f.compute_efficiency:.3g} of "
                f"peak, {f.element_s * 1e12:.3g} ps/element{fixed}"
            )
        lines.append("  class roofline (unused while the kernel model is given):")
    for e in c.efficiencies:
        lines.append(
            f"  {e.op_class.value}: {e.compute:g} of peak FLOP/s, {e.memory:g} of bandwidth"
        )
    if c.source:
        lines.append(f"  source: {c.source}")
    return lines


def _gb(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.4g} GB/s"


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:g} GiB"


def describe(platform: Platform) -> list[str]:
    """Readable lines describing ``platform`` (GB/s = 10^9 B/s, GiB = 2^30 B)."""
    p = platform
    lines = [f"{p.name}: {p.description}" if p.description else p.name]
    if p.source:
        lines.append(f"  source: {p.source}")
    lines.append("tiers (fastest first):")
    for t in p.tiers:
        role = []
        if t.name in p.kernel_tiers:
            role.append("kernels")
        if p.cache is not None and t.name == p.cache.cache_tier:
            role.append(f"cache of {p.cache.backing_tier}")
        lines.append(
            f"  {t.name}: {_size(t.capacity_bytes)}, read {_gb(t.read_bw_bytes_per_s)}, "
            f"write {_gb(t.write_bw_bytes_per_s)}, latency read {t.read_latency_s * 1e9:g} ns "
            f"/ write {t.write_latency_s * 1e9:g} ns, granule {t.access_granularity_bytes} B"
            + (f" [{', '.join(role)}]" if role else "")
        )
        i = t.interference
        if i.mix_penalty or i.write_falloff_per_writer or i.write_overlap:
            lines.append(
                f"    interference: 1:1 mix x{1 + i.mix_penalty:g} (exponent {i.mix_exponent:g}); "
                f"write bw / (1 + {i.write_falloff_per_writer:g} per writer beyond "
                f"{i.write_falloff_onset_writers})"
                + (f"; write overlap {i.write_overlap:g}" if i.write_overlap else "")
            )
        if t.source:
            lines.append(f"    source: {t.source}")
    lines += _compute_lines(p, host=False)
    if p.host_compute is not None:
        lines += _compute_lines(p, host=True)
    lines.append("copy paths:" if p.copy_paths else "copy paths: none")
    for cp in p.copy_paths:
        lines.append(
            f"  {cp.src} -> {cp.dst}: sync {_gb(cp.sync_bw_bytes_per_s)}, "
            f"async {_gb(cp.async_bw_bytes_per_s)}, {cp.copy_engines} engine(s)"
            f"{', duplex' if cp.duplex else ''}"
        )
        if cp.source:
            lines.append(f"    source: {cp.source}")
    for link in p.kernel_links:
        lines.append(
            f"kernel link to {link.tier}: read {_gb(link.read_bw_bytes_per_s)}, "
            f"write {_gb(link.write_bw_bytes_per_s)} (kernels reach {link.tier} at the lesser "
            "of its rate and the link's)"
        )
        if link.source:
            lines.append(f"  source: {link.source}")
    if p.cache is not None:
        k = p.cache
        ways = "direct-mapped" if k.associativity == 1 else f"{k.associativity}-way LRU"
        policy = ("write-back" if k.write_back else "write-through") + (
            ", write-allocate" if k.write_allocate else ", no write-allocate"
        )
        lines.append(
            f"cache: {k.cache_tier} caches {k.backing_tier}, {_size(k.capacity_bytes)}, "
            f"{k.line_bytes} B lines, {ways}, {policy}, miss +{k.miss_latency_s * 1e9:g} ns"
        )
        if k.source:
            lines.append(f"  source: {k.source}")
    return lines + _interference(p)


def _interference(p: Platform) -> list[str]:
    """Lines for the memory controller and the copy thread (the ``controller`` level)."""
    lines = []
    ctl = p.controller
    if ctl is not None:
        weights = "; ".join(w.summary() for w in ctl.weights)
        first = ", ".join(ctl.priority_tiers) or "none"
        lines.append(
            f"controller: {ctl.channels} channel{'s' if ctl.channels > 1 else ''} of "
            f"{_gb(ctl.bw_bytes_per_s)} together, bus weights {weights}, "
            f"{ctl.arbitration} arbitration, writes first: {first} "
            f"(priority {ctl.write_priority:g})"
        )
        if ctl.source:
            lines.append(f"  source: {ctl.source}")
    th = p.copy_thread
    if th is not None:
        rates = "; ".join(
            f"{r.tier} read {_gb(r.read_bw_bytes_per_s)} write {_gb(r.write_bw_bytes_per_s)}"
            for r in th.tiers
        )
        lines.append(
            f"copy thread: {rates}; loaded latency slope {th.latency_slope:g} (at most "
            f"x{th.max_latency_factor:g}); {th.core} core, slowdown {th.core_slowdown:g}, "
            f"straggler {th.straggler:g}"
        )
        if th.source:
            lines.append(f"  source: {th.source}")
    return lines
