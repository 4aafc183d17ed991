"""What the API says of a replayed step: its headline numbers (:func:`trace_summary`, with
its energy where the platform prices it) and its timeline (:func:`draw_timeline`)."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from tmsim.api.inputs import expect
from tmsim.energy import StepEnergy
from tmsim.errors import TmsimError
from tmsim.sim import Trace
from tmsim.sim.trace import ASYNC, SYNC

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_timeline(
    trace: Trace, path: str | os.PathLike[str] | None = None, title: str | None = None
) -> Figure:
    """``trace`` as a Gantt chart with the fast tier's occupancy beneath, saved to ``path``
    (``.png``, ``.pdf`` or ``.svg``) when given. Raises :class:`TmsimError` for another
    suffix or a path that cannot be written."""
    from tmsim.plots import timeline_figure

    if path is not None:
        expect(path, (str, os.PathLike), "a timeline's path", "a file path")
        suffix = os.fspath(path).rpartition(".")[2].lower()
        if suffix not in ("png", "pdf", "svg"):
            raise TmsimError(f"{os.fspath(path)!r}: a timeline is a .png, .pdf or .svg file")
    fig = timeline_figure(trace, title=title)
    if path is not None:
        try:
            fig.savefig(os.fspath(path), dpi=150)
        except OSError as exc:
            raise TmsimError(f"{os.fspath(path)}: {exc.strerror or exc}") from None
    return fig


def trace_summary(trace: Trace, energy: StepEnergy | None = None) -> dict[str, Any]:
    """Headline numbers of a replay as JSON-ready values; with the step's ``energy``, also
    ``energy_j`` (its parts in ``energy_parts_j``), the bytes written on each tier and the
    years each rated device lasts at this pace (``wear_years``, None where it is not
    written)."""
    moves = trace.moves()
    out: dict[str, Any] = {
        "graph": trace.graph,
        "platform": trace.platform,
        "planner": trace.planner,
        "interference": trace.level,
        "simulated_s": trace.simulated_s,
        "predicted_s": trace.predicted_s,
        "ratio": trace.simulated_s / trace.predicted_s if trace.predicted_s > 0 else None,
        "kernels": len(trace.kernels()),
        "recomputes": len(trace.recomputes()),
        "moves": len(moves),
        "sync_moves": sum(r.kind == SYNC for r in moves),
        "async_moves": sum(r.kind == ASYNC for r in moves),
        "moved_bytes": trace.moved_bytes,
        "fast_peak_bytes": trace.fast_peak_bytes,
        "fast_limit_bytes": trace.fast_limit_bytes,
        "events": trace.events,
        "kernels_lost_s": trace.losses_s(),
        "copies_lost_s": trace.losses_s((SYNC, ASYNC)),
        "copies_past_kernel_s": trace.overrun_s(),
    }
    if energy is not None:
        out["energy_j"] = energy.total_j
        out["energy_parts_j"] = {
            "compute": energy.compute_j,
            "static": energy.static_j,
            **{f"tier {t}": j for t, j in energy.tier_j.items()},
            **{f"link {k}": j for k, j in energy.link_j.items()},
        }
        out["written_bytes"] = dict(energy.written_bytes)
        out["wear_years"] = {
            t: (y if math.isfinite(y) else None) for t, y in energy.wear_years.items()
        }
    return out


__all__ = ["draw_timeline", "trace_summary"]
