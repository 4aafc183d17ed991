"""The dominance figure: the best MILP plan beside every baseline on the same budget.

By hand on a made-up table (who wins, by how much, and why), then end to end on small steps:
no baseline's replayed step beats the best MILP plan's by more than 1%."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from experiments import dominance
from experiments.common import read_data


def _row(strategy: str, predicted_s: float, simulated_s: float, valid: bool = True) -> dict:
    where = {"set": "s", "platform": "p", "workload": "w", "budget": 0.5}
    return {
        **where,
        "strategy": strategy,
        "predicted_s": predicted_s,
        "simulated_s": simulated_s,
        "valid": valid,
    }


def test_the_table_by_hand() -> None:
    frame = pd.DataFrame(
        [
            _row("all-fast", 0.5, 0.5),  # an oracle, no baseline
            _row("sync", 1.0, 1.0),
            _row("async", 0.9, 1.2),  # predicted best, replays worse: sync is the best MILP
            _row("greedy", 1.1, 1.2),  # loses
            _row("first-touch", 1.2, 0.995),  # wins by 0.5%: within the tolerance
            _row("vdnn", 0.95, 0.95),  # predicted below the MILP's own: the formulation
            _row("checkpoint", 1.05, 0.9),  # predicted worse, replays better: the replay
            _row("2lm", math.nan, 0.8),  # a simulation: the hardware
            _row("selective", math.nan, math.nan, valid=False),  # did not run: no row
        ]
    )
    table = dominance.dominance_table(frame).set_index("baseline")
    assert list(table.index) == ["greedy", "first-touch", "vdnn", "checkpoint", "2lm"]
    assert set(table["milp"]) == {"sync"} and set(table["milp_s"]) == {1.0}
    assert table.loc["greedy", "ratio"] == pytest.approx(1.2)
    assert list(table["wins"]) == [False, False, True, True, True]
    assert list(table["reason"]) == ["", "", "formulation", "replay", "hardware"]


def test_a_point_without_a_milp_plan_has_no_ratio() -> None:
    frame = pd.DataFrame([_row("greedy", 1.0, 1.0), _row("sync", math.nan, math.nan, False)])
    table = dominance.dominance_table(frame)
    assert table.loc[0, "milp"] == "" and math.isnan(table.loc[0, "ratio"])
    assert not table.loc[0, "wins"]


SMALL = dominance.Config(
    points=(("conventional", "cascadelake-optane", "vgg19", 4),),
    budgets=(0.5,),
    time_limit_s=None,
    gap=0.05,
    workers=1,
)


def _no_baseline_wins(config: dominance.Config, out: Path) -> pd.DataFrame:
    frame, meta = read_data(dominance.compute(config, out))
    assert meta["config"]["budgets"] == list(config.budgets)
    table = dominance.dominance_table(frame)
    assert len(table) and table["ratio"].notna().all()
    winners = table[table["wins"]]
    assert winners.empty, winners.to_string()
    paths = dominance.plot(out / "dominance.parquet", out)
    assert all(p.stat().st_size > 0 for p in paths)
    return table


def test_no_baseline_beats_the_milp_on_a_small_optane_step(tmp_path: Path) -> None:
    table = _no_baseline_wins(SMALL, tmp_path)
    assert {"first-touch", "greedy", "2lm", "all-slow"} <= set(table["baseline"])


@pytest.mark.slow
def test_no_baseline_beats_the_milp_on_the_quick_set(tmp_path: Path) -> None:
    table = _no_baseline_wins(dominance.QUICK, tmp_path)
    assert {"vdnn", "unified-memory"} <= set(table["baseline"])
