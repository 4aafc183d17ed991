"""Platform <-> plain dict, the file edge where units are converted.

A dict (from TOML or JSON) may give each quantity in any unit its key names, e.g.
``read_bw_GBps = 104.6`` or ``read_bw_bytes_per_s = 1.046e11``; exactly one spelling of each
quantity (the unit-aware reads are :class:`hwmodels.tables.Table`'s). :func:`platform_to_dict`
writes SI keys only, so a platform survives a round trip exactly. Every error names the origin
(a file), the place in it and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hwmodels.cache import DramCache
from hwmodels.compute import ClassEfficiency, Compute, HostCompute
from hwmodels.controller import MECHANISM_FIELDS, BusWeight, MemoryController
from hwmodels.copythread import CopyThread, ThreadRates
from hwmodels.dtypes import unknown_peak_dtype
from hwmodels.energy import energy_from_table
from hwmodels.errors import HardwareModelError
from hwmodels.kernels import FamilyCost, KernelFamily, KernelModel, MathMode, MathModes
from hwmodels.memory_mode import MemoryMode
from hwmodels.opclass import OpClass
from hwmodels.paths import CopyPath, KernelLink
from hwmodels.platform import Platform
from hwmodels.platform_dict import platform_to_dict
from hwmodels.tables import FLOPS, RATE, TIME, Table, type_name
from hwmodels.tiers import Interference, MemoryTier
from hwmodels.unified_memory import UnifiedMemory


def _tier(t: Table) -> MemoryTier:
    inter = Interference()
    if t.has("interference"):
        i = t.table("interference")
        inter = Interference(
            mix_penalty=i.number("mix_penalty") if i.has("mix_penalty") else 0.0,
            mix_exponent=i.number("mix_exponent", strict=True) if i.has("mix_exponent") else 1.0,
            write_falloff_per_writer=(
                i.number("write_falloff_per_writer") if i.has("write_falloff_per_writer") else 0.0
            ),
            write_falloff_onset_writers=i.integer("write_falloff_onset_writers", 0, minimum=0),
            write_overlap=i.number("write_overlap") if i.has("write_overlap") else 0.0,
        )
        i.done()
    tier = MemoryTier(
        name=t.string("name"),
        capacity_bytes=t.byte_count("capacity"),
        read_bw_bytes_per_s=t.quantity("read_bw", RATE),
        write_bw_bytes_per_s=t.quantity("write_bw", RATE),
        read_latency_s=t.quantity("read_latency", TIME, strict=False, default=0.0),
        write_latency_s=t.quantity("write_latency", TIME, strict=False, default=0.0),
        access_granularity_bytes=t.integer("access_granularity_bytes", 64),
        interference=inter,
        source=t.string("source", ""),
    )
    t.done()
    return tier


def _compute(c: Table) -> Compute:
    peaks_key = [k for k in ("peak_flop_per_s", "peak_GFLOPs", "peak_TFLOPs") if c.has(k)]
    if len(peaks_key) != 1:
        c.fail("give exactly one of peak_flop_per_s, peak_GFLOPs, peak_TFLOPs (a dtype table)")
    p = c.table(peaks_key[0])
    factor = FLOPS[peaks_key[0].removeprefix("peak_")]
    for d in p.data:
        if unknown_peak_dtype(d):
            p.fail(unknown_peak_dtype(d))
    peaks = tuple((d, p.number(d, strict=True) * factor) for d in p.data)
    e = c.table("efficiency")
    effs = []
    for cls in OpClass:
        ce = e.table(cls.value)
        effs.append(ClassEfficiency(cls, ce.fraction("compute"), ce.fraction("memory")))
        ce.done()
    e.done()
    compute = Compute(
        name=c.string("name"),
        peak_flop_per_s=peaks,
        efficiencies=tuple(effs),
        launch_overhead_s=c.quantity("launch_overhead", TIME, strict=False),
        cores=c.integer("cores"),
        source=c.string("source", ""),
        kernels=_kernels(c.table("kernels")) if c.has("kernels") else None,
    )
    c.done()
    return compute


def _optional(t: Table, base: str, units: Mapping[str, float]) -> float | None:
    """The quantity ``base_<unit>`` in SI units (>= 0), or None where no such key is given."""
    if not any(key.startswith(f"{base}_") for key in t.data):
        return None
    return t.quantity(base, units, strict=False)


def _math_mode(k: Table, key: str, default: MathMode) -> MathMode:
    """The math mode ``key`` names (``default`` if absent)."""
    value = k.string(key, default.value)
    try:
        return MathMode(value)
    except ValueError:
        k.fail(f"{key} must be one of {', '.join(m.value for m in MathMode)}, got {value!r}")


def _kernels(k: Table) -> KernelModel:
    """A ``[compute.kernels]`` table: the calibrated kernel model, with one entry per kernel
    family under ``families``."""
    f = k.table("families")
    families = []
    for fam in KernelFamily:
        e = f.table(fam.value)
        families.append(
            FamilyCost(
                fam,
                passes=e.number("passes", strict=True),
                compute_efficiency=e.fraction("compute_efficiency")
                if e.has("compute_efficiency")
                else 1.0,
                element_s=e.quantity("element", TIME, strict=False, default=0.0),
                fixed_s=_optional(e, "fixed", TIME),
                saturation_units=e.number("saturation_units") if e.has("saturation_units") else 0.0,
            )
        )
        e.done()
    f.done()
    model = KernelModel(
        stream_bw_bytes_per_s=k.quantity("stream_bw", RATE),
        fixed_s=k.quantity("fixed", TIME, strict=False),
        dispatch_s=k.quantity("dispatch", TIME, strict=False),
        families=tuple(families),
        math=MathModes(
            conv_fp32=_math_mode(k, "conv_fp32", MathMode.TF32),
            matmul_fp32=_math_mode(k, "matmul_fp32", MathMode.FP32),
        ),
        tensor_core_multiple=k.integer("tensor_core_multiple", 8),
        unaligned_efficiency=k.fraction("unaligned_efficiency")
        if k.has("unaligned_efficiency")
        else 1.0,
        source=k.string("source", ""),
    )
    k.done()
    return model


def _host_compute(h: Table) -> HostCompute:
    """A ``[host_compute]`` table: a ``[compute]`` table's fields and ``kernel_tiers``, the
    names of the tiers the host CPU reaches."""
    tiers = h.array("kernel_tiers")
    for name in tiers:
        if not isinstance(name, str):
            h.fail(f"kernel_tiers must list tier names, got {type_name(name)}")
    return HostCompute(_compute(h), tuple(tiers))


def _copy_path(p: Table, thread: CopyThread | None) -> CopyPath:
    """A ``[[copy_paths]]`` entry. Without ``async_bw_<unit>`` a path between two tiers of the
    platform's copy thread takes the thread's idle rate (:meth:`CopyThread.idle_bw`)."""
    src, dst = p.string("src"), p.string("dst")
    idle = thread.idle_bw(src, dst) if thread is not None and thread.copies(src, dst) else None
    given = any(k.startswith("async_bw_") for k in p.data)
    if thread is not None and idle is None and not given:
        p.fail(
            f"missing field async_bw (the copy thread's idle rate applies only between its "
            f"tiers {', '.join(thread.tier_names)}; {src!r} -> {dst!r} needs async_bw_GBps)"
        )
    async_bw = p.quantity("async_bw", RATE, default=idle)
    path = CopyPath(
        src=src,
        dst=dst,
        sync_bw_bytes_per_s=p.quantity("sync_bw", RATE),
        async_bw_bytes_per_s=async_bw,
        copy_engines=p.integer("copy_engines", 1),
        duplex=p.boolean("duplex", True),
        source=p.string("source", ""),
        both_bw_bytes_per_s=_optional(p, "both_bw", RATE),
        dst_cost_factor=p.number("dst_cost_factor") if p.has("dst_cost_factor") else 1.0,
    )
    p.done()
    return path


def _kernel_link(k: Table) -> KernelLink:
    """A ``[[kernel_links]]`` entry: ``tier``, ``read_bw_<unit>``, ``write_bw_<unit>`` and an
    optional ``source``."""
    link = KernelLink(
        tier=k.string("tier"),
        read_bw_bytes_per_s=k.quantity("read_bw", RATE),
        write_bw_bytes_per_s=k.quantity("write_bw", RATE),
        source=k.string("source", ""),
    )
    k.done()
    return link


def _cache(c: Table) -> DramCache:
    cache = DramCache(
        cache_tier=c.string("cache_tier"),
        backing_tier=c.string("backing_tier"),
        capacity_bytes=c.byte_count("capacity"),
        source=c.string("source", ""),
        **_line_fields(c),
    )
    c.done()
    return cache


def _line_fields(t: Table) -> dict[str, Any]:
    """The :data:`LINE_FIELDS` of a ``[cache]`` or ``[memory_mode]`` table, in SI; a key left
    out takes :class:`MemoryMode`'s default (which is :class:`DramCache`'s)."""
    d = MemoryMode()
    return {
        "line_bytes": t.integer("line_bytes", d.line_bytes),
        "associativity": t.integer("associativity", d.associativity),
        "write_back": t.boolean("write_back", d.write_back),
        "write_allocate": t.boolean("write_allocate", d.write_allocate),
        "miss_latency_s": t.quantity("miss_latency", TIME, strict=False, default=d.miss_latency_s),
    }


def _copy_thread(c: Table) -> CopyThread:
    """A ``[copy_thread]`` table: ``tiers`` (tier name to ``{ read_bw_<unit> = ..,
    write_bw_<unit> = .. }``), optional ``latency_slope``, ``max_latency_factor``, ``core``,
    ``core_slowdown``, ``straggler`` and ``source``."""
    t = c.table("tiers")
    rates = []
    for name in list(t.data):
        entry = t.table(name)
        rates.append(
            ThreadRates(name, entry.quantity("read_bw", RATE), entry.quantity("write_bw", RATE))
        )
        entry.done()
    t.done()
    d = CopyThread(tiers=tuple(rates))
    thread = CopyThread(
        tiers=tuple(rates),
        latency_slope=c.number("latency_slope") if c.has("latency_slope") else d.latency_slope,
        max_latency_factor=(
            c.number("max_latency_factor") if c.has("max_latency_factor") else d.max_latency_factor
        ),
        core=c.string("core", d.core),
        core_slowdown=c.number("core_slowdown") if c.has("core_slowdown") else d.core_slowdown,
        straggler=c.number("straggler") if c.has("straggler") else d.straggler,
        source=c.string("source", ""),
    )
    c.done()
    return thread


def _memory_mode(m: Table) -> MemoryMode:
    mode = MemoryMode(source=m.string("source", ""), **_line_fields(m))
    m.done()
    return mode


def _unified_memory(u: Table) -> UnifiedMemory:
    """A ``[unified_memory]`` table; a key left out takes :class:`UnifiedMemory`'s default."""
    d = UnifiedMemory()
    fraction = "migration_bw_fraction"
    driver = UnifiedMemory(
        page_bytes=u.byte_count("page", d.page_bytes),
        fault_s=u.quantity("fault", TIME, strict=False, default=d.fault_s),
        migration_bw_fraction=u.fraction(fraction) if u.has(fraction) else d.migration_bw_fraction,
        eviction_s=u.quantity("eviction", TIME, strict=False, default=d.eviction_s),
        writeback_clean=u.boolean("writeback_clean", d.writeback_clean),
        policy=u.string("policy", d.policy),
        alloc_fault=u.boolean("alloc_fault", d.alloc_fault),
        source=u.string("source", d.source),
    )
    u.done()
    return driver


def _controller(c: Table) -> MemoryController:
    """A ``[controller]`` table: ``channel_bw_<unit>``, ``weights`` (a table of tier name to
    ``{ read = .., write = .. }`` with the optional keys of
    :data:`hwmodels.controller.MECHANISM_FIELDS` and ``channels``), optional ``arbitration``,
    ``write_priority``, ``priority_tiers``, ``channels`` and ``source``."""
    w = c.table("weights")
    weights = []
    for name in list(w.data):
        entry = w.table(name)
        extra = {
            key: entry.number(key, strict=True) if entry.has(key) else default
            for key, (_, _, default) in MECHANISM_FIELDS.items()
        }
        weights.append(
            BusWeight(
                name,
                entry.number("read", strict=True),
                entry.number("write", strict=True),
                **extra,
                channels=entry.integer("channels", 0, minimum=0),
            )
        )
        entry.done()
    w.done()
    priority = c.array("priority_tiers") if c.has("priority_tiers") else []
    if not all(isinstance(t, str) for t in priority):
        c.fail("priority_tiers must list tier names")
    share = c.number("write_priority") if c.has("write_priority") else 0.0
    ctl = MemoryController(
        bw_bytes_per_s=c.quantity("channel_bw", RATE),
        weights=tuple(weights),
        arbitration=c.string("arbitration", "demand"),
        write_priority=share,
        priority_tiers=tuple(priority),
        source=c.string("source", ""),
        channels=c.integer("channels", 1),
    )
    c.done()
    return ctl


def platform_from_dict(data: Mapping[str, Any], origin: str) -> Platform:
    """Build a :class:`Platform` from a dict as read from TOML; ``origin`` names the file.

    Raises :class:`HardwareModelError` with a one-line message ``origin: place: problem`` for
    a missing or unknown field, a wrong type, a bad value, or a platform that fails validation.
    """
    try:
        return _platform(Table(data, origin, "platform"))
    except HardwareModelError as exc:
        message = str(exc)
        if message.startswith(f"{origin}: "):
            raise
        raise HardwareModelError(f"{origin}: {message}") from None


def _platform(top: Table) -> Platform:
    origin = top.origin
    tiers = []
    for i, raw in enumerate(top.array("tiers")):
        name = raw.get("name", "?") if isinstance(raw, Mapping) else "?"
        tiers.append(_tier(Table(raw, origin, f"tiers[{i}] ({name})")))
    thread = top.get("copy_thread") if top.has("copy_thread") else None
    copy_thread = None if thread is None else _copy_thread(Table(thread, origin, "copy_thread"))
    paths = tuple(
        _copy_path(Table(raw, origin, f"copy_paths[{i}]"), copy_thread)
        for i, raw in enumerate(top.array("copy_paths") if top.has("copy_paths") else [])
    )
    links = tuple(
        _kernel_link(Table(raw, origin, f"kernel_links[{i}]"))
        for i, raw in enumerate(top.array("kernel_links") if top.has("kernel_links") else [])
    )
    kernel_tiers = top.array("kernel_tiers")
    for name in kernel_tiers:
        if not isinstance(name, str):
            top.fail(f"kernel_tiers must list tier names, got {type_name(name)}")
    controllers = top.array("shared_controllers") if top.has("shared_controllers") else []
    for group in controllers:
        if not (isinstance(group, list) and all(isinstance(t, str) for t in group)):
            top.fail("shared_controllers must be a list of lists of tier names")
    compute = _compute(Table(top.get("compute"), origin, "compute"))
    cache = _cache(Table(top.get("cache"), origin, "cache")) if top.has("cache") else None
    mode = top.get("memory_mode") if top.has("memory_mode") else None
    driver = top.get("unified_memory") if top.has("unified_memory") else None
    ctl = top.get("controller") if top.has("controller") else None
    host = top.get("host_compute") if top.has("host_compute") else None
    platform = Platform(
        name=top.string("name"),
        tiers=tuple(tiers),
        compute=compute,
        copy_paths=paths,
        kernel_tiers=tuple(kernel_tiers),
        cache=cache,
        shared_controllers=tuple(tuple(g) for g in controllers),
        description=top.string("description", ""),
        source=top.string("source", ""),
        memory_mode=None if mode is None else _memory_mode(Table(mode, origin, "memory_mode")),
        unified_memory=(
            None if driver is None else _unified_memory(Table(driver, origin, "unified_memory"))
        ),
        controller=None if ctl is None else _controller(Table(ctl, origin, "controller")),
        copy_thread=copy_thread,
        kernel_links=links,
        host_compute=None if host is None else _host_compute(Table(host, origin, "host_compute")),
    )
    if top.has("energy"):  # after the platform's own checks, whose errors come first
        energy = top.table("energy")
        if paths and not energy.has("links"):
            energy.fail(
                "missing field 'links': price the copy paths (links = [] where copies cross "
                "no link of their own, their reads and writes charged to the tiers)"
            )
        platform = replace(platform, energy=energy_from_table(energy))
    top.done()
    return platform


__all__ = ["platform_from_dict", "platform_to_dict"]
