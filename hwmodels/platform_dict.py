"""Platform -> plain dict in SI units: the writing half of the file edge
(:mod:`hwmodels.serialize` reads), so that a platform survives a round trip exactly."""

from __future__ import annotations

from typing import Any

from hwmodels.cache import LINE_FIELDS
from hwmodels.compute import Compute
from hwmodels.controller import MECHANISM_FIELDS, BusWeight
from hwmodels.energy import energy_to_dict
from hwmodels.kernels import KernelModel
from hwmodels.platform import Platform
from hwmodels.tiers import Interference


def _interference_dict(i: Interference) -> dict[str, Any]:
    out: dict[str, Any] = {
        "mix_penalty": i.mix_penalty,
        "mix_exponent": i.mix_exponent,
        "write_falloff_per_writer": i.write_falloff_per_writer,
        "write_falloff_onset_writers": i.write_falloff_onset_writers,
    }
    if i.write_overlap:  # absent at its default, so documents without it stay as they were
        out["write_overlap"] = i.write_overlap
    return out


def platform_to_dict(p: Platform) -> dict[str, Any]:
    """The platform as plain data in SI units (keys as :func:`platform_from_dict` reads them).

    ``cache``, ``memory_mode``, ``unified_memory``, ``controller``, ``copy_thread``,
    ``energy`` and ``host_compute`` are omitted when None (TOML has no null), ``kernel_links``
    when there are none; a copy path's ``both_bw_bytes_per_s`` when None and its
    ``dst_cost_factor`` when 1 (so that a platform without them keeps its identity).
    """
    out: dict[str, Any] = {
        "name": p.name,
        "description": p.description,
        "source": p.source,
        "kernel_tiers": list(p.kernel_tiers),
        "shared_controllers": [list(g) for g in p.shared_controllers],
        "tiers": [
            {
                "name": t.name,
                "capacity_bytes": t.capacity_bytes,
                "read_bw_bytes_per_s": t.read_bw_bytes_per_s,
                "write_bw_bytes_per_s": t.write_bw_bytes_per_s,
                "read_latency_s": t.read_latency_s,
                "write_latency_s": t.write_latency_s,
                "access_granularity_bytes": t.access_granularity_bytes,
                "source": t.source,
                "interference": _interference_dict(t.interference),
            }
            for t in p.tiers
        ],
        "compute": _compute_dict(p.compute),
        "copy_paths": [
            {
                "src": c.src,
                "dst": c.dst,
                "sync_bw_bytes_per_s": c.sync_bw_bytes_per_s,
                "async_bw_bytes_per_s": c.async_bw_bytes_per_s,
                "copy_engines": c.copy_engines,
                "duplex": c.duplex,
                "source": c.source,
                **({} if c.dst_cost_factor == 1.0 else {"dst_cost_factor": c.dst_cost_factor}),
                **(
                    {}
                    if c.both_bw_bytes_per_s is None
                    else {"both_bw_bytes_per_s": c.both_bw_bytes_per_s}
                ),
            }
            for c in p.copy_paths
        ],
    }
    if p.kernel_links:
        out["kernel_links"] = [
            {
                "tier": k.tier,
                "read_bw_bytes_per_s": k.read_bw_bytes_per_s,
                "write_bw_bytes_per_s": k.write_bw_bytes_per_s,
                "source": k.source,
            }
            for k in p.kernel_links
        ]
    if p.host_compute is not None:
        h = p.host_compute
        out["host_compute"] = {**_compute_dict(h.compute), "kernel_tiers": list(h.kernel_tiers)}
    if p.energy is not None:
        out["energy"] = energy_to_dict(p.energy)
    if p.cache is not None:
        c = p.cache
        out["cache"] = {
            "cache_tier": c.cache_tier,
            "backing_tier": c.backing_tier,
            "capacity_bytes": c.capacity_bytes,
            **{name: getattr(c, name) for name in LINE_FIELDS},
            "source": c.source,
        }
    if p.memory_mode is not None:
        m = p.memory_mode
        out["memory_mode"] = {
            **{name: getattr(m, name) for name in LINE_FIELDS},
            "source": m.source,
        }
    if p.unified_memory is not None:
        u = p.unified_memory
        out["unified_memory"] = {
            "page_bytes": u.page_bytes,
            "fault_s": u.fault_s,
            "migration_bw_fraction": u.migration_bw_fraction,
            "eviction_s": u.eviction_s,
            "writeback_clean": u.writeback_clean,
            "policy": u.policy,
            "alloc_fault": u.alloc_fault,
            "source": u.source,
        }
    if p.controller is not None:
        ctl = p.controller
        out["controller"] = {
            "channel_bw_bytes_per_s": ctl.bw_bytes_per_s,
            "weights": {w.tier: _weight_dict(w) for w in ctl.weights},
            "arbitration": ctl.arbitration,
            "write_priority": ctl.write_priority,
            "priority_tiers": list(ctl.priority_tiers),
            "source": ctl.source,
        }
        if ctl.channels != 1:  # absent at its default, so documents without it stay as they were
            out["controller"]["channels"] = ctl.channels
    if p.copy_thread is not None:
        th = p.copy_thread
        out["copy_thread"] = {
            "tiers": {
                r.tier: {
                    "read_bw_bytes_per_s": r.read_bw_bytes_per_s,
                    "write_bw_bytes_per_s": r.write_bw_bytes_per_s,
                }
                for r in th.tiers
            },
            "latency_slope": th.latency_slope,
            "max_latency_factor": th.max_latency_factor,
            "core": th.core,
            "core_slowdown": th.core_slowdown,
            "straggler": th.straggler,
            "source": th.source,
        }
    return out


def _compute_dict(c: Compute) -> dict[str, Any]:
    """A compute device as plain data in SI units (the ``[compute]`` keys); ``kernels`` is
    omitted when None."""
    out: dict[str, Any] = {
        "name": c.name,
        "cores": c.cores,
        "launch_overhead_s": c.launch_overhead_s,
        "source": c.source,
        "peak_flop_per_s": dict(c.peak_flop_per_s),
        "efficiency": {
            e.op_class.value: {"compute": e.compute, "memory": e.memory} for e in c.efficiencies
        },
    }
    if c.kernels is not None:
        out["kernels"] = _kernels_dict(c.kernels)
    return out


def _kernels_dict(k: KernelModel) -> dict[str, Any]:
    """A calibrated kernel model as plain data in SI units (the ``[compute.kernels]`` keys)."""
    return {
        "stream_bw_bytes_per_s": k.stream_bw_bytes_per_s,
        "fixed_s": k.fixed_s,
        "dispatch_s": k.dispatch_s,
        "conv_fp32": k.math.conv_fp32.value,
        "matmul_fp32": k.math.matmul_fp32.value,
        "tensor_core_multiple": k.tensor_core_multiple,
        "unaligned_efficiency": k.unaligned_efficiency,
        "source": k.source,
        "families": {
            f.family.value: {
                "passes": f.passes,
                "compute_efficiency": f.compute_efficiency,
                "element_s": f.element_s,
                **({} if f.fixed_s is None else {"fixed_s": f.fixed_s}),
                **({"saturation_units": f.saturation_units} if f.saturation_units else {}),
            }
            for f in k.families
        },
    }


def _weight_dict(w: BusWeight) -> dict[str, float]:
    """A bus weight's fields, the optional ones only where they differ from their default."""
    out = {"read": w.read, "write": w.write}
    for key, (_, _, default) in MECHANISM_FIELDS.items():
        value = getattr(w, key)
        if value != default:
            out[key] = value
    if w.channels:
        out["channels"] = w.channels
    return out


__all__ = ["platform_to_dict"]
