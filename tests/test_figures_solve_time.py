"""The solve-time figure (experiments.solve_time): one tiny workload's MILP chain, its
cumulative and own solve seconds, and the sync model larger than the static one."""

from __future__ import annotations

from pathlib import Path

import pytest
from figure_checks import TINY, check_meta, check_plot

from experiments import solve_time
from experiments.common import read_data

SOLVE = solve_time.Config(workloads=TINY, formulations=("static", "sync"), time_limit_s=20.0)


def test_solve_time(tmp_path: Path) -> None:
    data = solve_time.compute(SOLVE, tmp_path)
    frame, meta = read_data(data)
    check_meta(meta, "solve_time", SOLVE)
    assert list(frame["formulation"]) == ["static", "sync"]

    def by(formulation: str, column: str) -> float:
        hit = frame[frame["formulation"] == formulation]
        assert len(hit) == 1, formulation
        return float(hit[column].iloc[0])

    assert (frame["kernels"] == 142).all()
    assert not frame["time_limit_hit"].any()
    # sync is warm-started from static: its seconds include static's, its model is larger
    assert 0 < by("static", "solve_s") <= by("sync", "solve_s")
    assert by("sync", "own_solve_s") == pytest.approx(
        by("sync", "solve_s") - by("static", "solve_s")
    )
    if not by("sync", "fallback"):
        assert by("sync", "variables") > by("static", "variables") > 0
    assert by("sync", "predicted_s") <= by("static", "predicted_s") + 1e-12
    check_plot(solve_time, data, tmp_path)


def test_an_unknown_formulation_is_refused_before_any_point_runs() -> None:
    with pytest.raises(ValueError, match="'dynamic'"):
        solve_time.points(solve_time.Config(workloads=TINY, formulations=("dynamic",)))


def test_quick_is_smaller_than_the_paper() -> None:
    full, quick = solve_time.Config(), solve_time.QUICK
    assert quick.time_limit_s < full.time_limit_s
    assert len(quick.workloads) <= len(full.workloads)
    assert [(p["model"], p["batch"]) for p in solve_time.points(quick)] == list(quick.workloads)
