"""Figure: how the asynchronous plans' standing against the synchronous one moves when each
assumed parameter of the interference model goes from one end of its published range to
the other.

The full interference model (``controller``: :mod:`hwmodels.controller`,
:mod:`hwmodels.copythread`) rests on parameters nobody has measured on AutoTM's machine; the
Optane preset gives each a value and a range (:data:`OPTANE_ASSUMED`). For every workload one
chain of MILPs (:func:`tmsim.plan_chain`) plans sync and async once
on the preset as shipped; the two plans are then replayed under the full model on the preset
with one parameter set to each end of its range (the others as shipped), through the same
dotted overrides a sweep spec takes (:mod:`tmsim.sweeps.overrides`). AutoTM's asynchronous
plan does not depend on these parameters (its copies are charged their idle rate, which the
measured single-thread rates fix), so only its replay moves. The ``async-aware`` plan prices
its copies on the model, so for the workloads in ``Config.aware_workloads`` it is planned
again on every variant and compared with the sync plan replayed on that variant.

Two more variants set every parameter at once: all at the end with less interference
(``low``) and all at the end with more (``high``), the corners of the ranges.

A row's ``over_sync`` is the plan's simulated step over the sync plan's on the same variant;
a parameter whose range takes a workload's ratio across 1 *flips* the conclusion there
(column ``flips``). The figure draws one segment per parameter and workload from the low
end's ratio to the high end's, the shipped value's ratio as a tick, one panel per strategy.

The GPU presets have no assumed parameter on this path: a copy engine's DMA shares the
device memory's bandwidth with the kernel in the fluid model, from the tiers' and links'
sourced rates alone (no controller, no copy thread), so this figure has no GPU panel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import tmsim
from experiments.common import (
    CONVENTIONAL,
    Progress,
    capacity_of,
    insert_labels,
    load_frame,
    plan_settings,
    planner_params,
    point_labels,
    run_figure_points,
    save_figure,
    write_data,
)
from experiments.sensitivity_draw import CORNER, CORNER_LABEL, SHOWN, draw, flips
from tmsim import Graph, Plan, PlanSettings, Platform, TmsimError

NAME = "sensitivity"
TITLE = "Async/sync under the full interference model, each assumed parameter over its range"


@dataclass(frozen=True)
class Assumed:
    """One assumed parameter: its dotted path in the preset (as a sweep override names it),
    a short label, its low and high ends and where the range comes from. ``low`` is the end
    with less interference (the end that favours copies beside kernels)."""

    path: str
    label: str
    low: float | str
    high: float | str
    source: str
    #: further (path, value) overrides set at both ends (what makes the parameter act)
    also: tuple[tuple[str, Any], ...] = ()


#: The Optane preset's assumed interference parameters with their ranges (the simulation
#: guide's controller and copy-thread tables; reference/interference-and-solvers.md A2), and
#: the fitted ones whose fit rests on one measurement or that the fitted controller replaced
#: (write priority and weights; the write overlap, fitted to one curve, from none to twice
#: its fit). The copy thread's loaded-latency terms are not among them: the fitted
#: controller's queueing delay replaces them (:class:`tmsim.sim.fluid.FluidModel`).
OPTANE_ASSUMED: tuple[Assumed, ...] = tuple(
    Assumed(*row)
    for row in (
        ("tiers.PMM.interference.write_overlap", "PMM write overlap", 0.5, 0.0, "fit 0.23"),
        ("copy_thread.core_slowdown", "core slowdown s", 0.5, 1.0, "1: time-slicing one core"),
        ("copy_thread.straggler", "straggler sigma", 1 / 24, 1.0, "dynamic (1/P) to static (1)"),
        ("copy_thread.core", "copy core", "dedicated", "shared", "AutoTM's source: shared"),
        (
            "controller.write_priority",
            "PMM write priority",
            0.0,
            1.0,
            "FairHym: writes block",
            (("controller.priority_tiers", ["PMM"]),),
        ),
        ("controller.weights.PMM.write", "PMM write weight", 2.0, 7.7, "7.7: AutoTM's copy fits"),
        ("controller.weights.PMM.read", "PMM read weight", 1.0, 2.99, "additive to PerMA fit"),
    )
)


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``platform``: the preset whose ``parameters`` are varied; ``ratios``: its PMM:DRAM
    ratios (of each step's peak live bytes); ``workloads``: (zoo model, batch) pairs, each
    at every ratio; ``aware_workloads``: those of ``workloads`` whose ``async-aware`` plan is
    made again on every variant (each costs one MILP chain per variant); ``time_limit_s``,
    ``gap``, ``window``: each MILP chain's wall-clock cap, relative gap and asynchronous
    window (as the async figure's); ``workers``: processes running workloads in parallel
    when :func:`compute` is not told otherwise (not part of any point's key).
    """

    platform: str = "cascadelake-optane"
    ratios: tuple[str, ...] = ("4:1",)
    workloads: tuple[tuple[str, int], ...] = (
        ("vgg19", 16),
        ("inception_v4", 16),
        *CONVENTIONAL,
    )
    aware_workloads: tuple[tuple[str, int], ...] = (("vgg19", 16), ("inception_v4", 16))
    parameters: tuple[Assumed, ...] = OPTANE_ASSUMED
    time_limit_s: float | None = 150.0
    gap: float = 0.01
    window: int = 3
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: VGG19 b4 and b8 at 4:1 (their async MILPs beat the sync plan within seconds at a 5% gap),
#: the aware plan made again for b4 only, a 30 s cap, one process.
QUICK = Config(
    workloads=(("vgg19", 4), ("vgg19", 8)),
    aware_workloads=(("vgg19", 4),),
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)

#: The columns of the figure's table, in order.
COLUMNS = (
    *("platform", "kind", "capacity", "workload", "model", "batch", "kernels"),
    *("footprint_bytes", "strategy", "parameter", "label", "end", "value"),
    *("predicted_s", "simulated_s", "sync_simulated_s", "over_sync", "improved", "status"),
    "error",
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload and ratio of ``config``, each with every variant it replays."""
    variants = [
        {"path": a.path, "label": a.label, "low": a.low, "high": a.high, "also": list(a.also)}
        for a in config.parameters
    ]
    aware = {tuple(w) for w in config.aware_workloads}
    return [
        {
            "platform": config.platform,
            "kind": "Optane PMM",
            "ratio": ratio,
            "device_fraction": None,
            "model": model,
            "batch": batch,
            "aware": (model, batch) in aware,
            "variants": variants,
            **planner_params(config),
        }
        for ratio in config.ratios
        for model, batch in config.workloads
    ]


def variant_platform(preset: str, overrides: Sequence[tuple[str, Any]]) -> Platform:
    """The preset ``preset`` with each (dotted path, value) of ``overrides`` set, as a sweep
    spec's ``[grid.overrides]`` sets them (:func:`tmsim.platform`). Raises
    :class:`TmsimError` naming the path for a path the preset does not have or a value it
    refuses."""
    return tmsim.platform(preset, dict(overrides))


def _also(variant: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A variant's further overrides as (path, value) pairs (a point's parameters hold them
    as lists)."""
    return [(str(path), value) for path, value in variant.get("also", [])]


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of one point of :func:`points`: the shipped preset (``parameter`` ``-``,
    ``end`` ``shipped``), each variant's ``low`` and ``high`` end and the two corners
    (``parameter`` :data:`CORNER`: every variant at that end), for each strategy of
    :data:`SHOWN` (``async-aware`` only where ``params["aware"]``), with the step time the
    plan gets on that variant under the full model over the sync plan's (``over_sync``)."""
    preset = params["platform"]
    graph = tmsim.graph(params["model"], batch=params["batch"])
    shipped = variant_platform(preset, ())
    settings = plan_settings(params, capacity_of(params["ratio"], None))
    limit = tmsim.fast_limit(graph, shipped, settings.capacity)
    wanted = ["async", "async-aware"] if params["aware"] else ["async"]
    base = _plans(graph, shipped, settings, wanted)
    cases: list[tuple[str, str, str, Any, Platform]] = [("-", "shipped", "shipped", "", shipped)]
    variants = params["variants"]
    for v in variants:
        for end in ("low", "high"):
            machine = variant_platform(preset, [(v["path"], v[end]), *_also(v)])
            cases.append((v["path"], v["label"], end, v[end], machine))
    for end in ("low", "high") if variants else ():
        machine = variant_platform(
            preset, [o for v in variants for o in ((v["path"], v[end]), *_also(v))]
        )
        cases.append((CORNER, CORNER_LABEL, end, "", machine))
    records: list[dict[str, Any]] = []
    for path, text, end, value, machine in cases:
        plans = dict(base)
        if params["aware"] and end != "shipped":
            plans["async-aware"] = _plans(graph, machine, settings, ["async-aware"])["async-aware"]
        sync_s = _simulated(plans["sync"], graph, machine)
        for name in SHOWN:
            if name not in plans:
                continue
            got = plans[name]
            record: dict[str, Any] = {
                "strategy": name,
                "parameter": path,
                "label": text,
                "end": end,
                "value": str(value),
                "sync_simulated_s": sync_s,
            }
            if isinstance(got, TmsimError):
                records.append({**record, "status": "error", "error": str(got)})
                continue
            simulated = _simulated(got, graph, machine)
            sync_plan = plans["sync"]
            sync_predicted = sync_plan.predicted_s if isinstance(sync_plan, Plan) else np.nan
            records.append(
                {
                    **record,
                    "predicted_s": got.predicted_s,
                    "simulated_s": simulated,
                    "over_sync": simulated / sync_s,
                    "improved": bool(got.predicted_s < sync_predicted * (1 - 1e-9)),
                    "status": got.stats.status if got.stats else "",
                    "error": "",
                }
            )
    out = pd.DataFrame.from_records(records)
    insert_labels(out, point_labels(params, graph, limit))
    return out.reindex(columns=list(COLUMNS))


def _plans(
    graph: Graph, machine: Platform, settings: PlanSettings, wanted: list[str]
) -> dict[str, Plan | TmsimError]:
    """The sync plan and those of ``wanted`` from one MILP chain on ``machine``, each checked
    by the validator (a plan it rejects becomes an error). Raises :class:`TmsimError` when
    there is no sync plan, which every row is measured against."""
    chain = tmsim.plan_chain(graph, machine, wanted, settings=settings)
    out: dict[str, Plan | TmsimError] = {}
    for name in ("sync", *wanted):
        got = chain.get(name, TmsimError("the MILP chain did not reach it"))
        if isinstance(got, Plan):
            check = tmsim.validate(got, graph, machine)
            if not check.ok:
                got = TmsimError(f"the validator rejects the {name} plan: {check.errors[0]}")
        out[name] = got
    sync = out["sync"]
    if isinstance(sync, TmsimError):
        raise TmsimError(f"{graph.name}: no sync plan to compare with: {sync}")
    return out


def _simulated(plan: Plan | TmsimError, graph: Graph, machine: Platform) -> float:
    """``plan``'s step on ``machine`` under the full interference model (nan for an error)."""
    if isinstance(plan, TmsimError):
        return float("nan")
    # the plan was checked where it was made; a variant only changes how copies interfere
    return tmsim.simulate(plan, graph, machine, interference="controller", check=False).step_time_s


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every point of ``config`` (:func:`point_rows`, in ``workers`` processes, default
    ``config.workers``, or on the Dask scheduler at ``dask_address``) and write the table
    (:data:`COLUMNS` and ``flips``: the strategy's ratio on this workload lies on both sides
    of 1 over this parameter's range) with the configuration; return the data file's path.
    Raises :class:`tmsim.errors.TmsimError` when points failed (once the others are
    stored)."""
    frame = run_figure_points(
        NAME,
        points(config),
        point_rows,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
        default_workers=config.workers,
    )
    frame["flips"] = flips(frame)
    return write_data(frame, out_dir, NAME, config)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


__all__ = [
    "COLUMNS",
    "CORNER",
    "CORNER_LABEL",
    "NAME",
    "OPTANE_ASSUMED",
    "QUICK",
    "SHOWN",
    "TITLE",
    "Assumed",
    "Config",
    "compute",
    "draw",
    "flips",
    "plot",
    "point_rows",
    "points",
    "variant_platform",
]
