"""The sensitivity figure (experiments.sensitivity): on one tiny workload, the sync and async
plans replayed under the full model on the Optane preset with each assumed parameter at each
end of its range, and the async-aware plan made again on every variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from figure_checks import check_meta, check_plot

from experiments import sensitivity
from experiments.common import read_data
from tmsim.errors import TmsimError

#: Four of the parameters (the aware plan is made again on every variant, the test's cost):
#: the write overlap, two core terms and the write priority.
PARAMETERS = tuple(
    a
    for a in sensitivity.OPTANE_ASSUMED
    if a.label in ("PMM write overlap", "core slowdown s", "straggler sigma", "PMM write priority")
)

TINY = sensitivity.Config(
    workloads=(("vgg19", 2),),
    aware_workloads=(("vgg19", 2),),
    parameters=PARAMETERS,
    time_limit_s=None,  # the gap alone stops each solve: the same plans on any load
    gap=0.1,
    workers=1,
)

#: The parameters whose shipped value is one end of its range, and that end (the fitted
#: controller has no write priority; its PMM write weight, 2.423, is inside its range).
SHIPPED_END = {
    "copy_thread.core_slowdown": "high",
    "copy_thread.straggler": "high",
    "controller.write_priority": "low",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = sensitivity.compute(TINY, tmp_path_factory.mktemp("sensitivity"))
    frame, meta = read_data(path)
    return path, frame, meta


@pytest.mark.slow
def test_every_parameter_end_and_corner_has_a_row_per_strategy(
    data: tuple[Path, pd.DataFrame, dict[str, Any]],
) -> None:
    path, frame, meta = data
    assert path.name == "sensitivity.parquet"
    assert list(frame.columns) == [*sensitivity.COLUMNS, "flips"]
    check_meta(meta, "sensitivity", TINY)
    assert len(PARAMETERS) == 4
    n_params = len(PARAMETERS)
    assert len(frame) == 2 * (1 + 2 * n_params + 2)
    for _, rows in frame.groupby("strategy"):
        assert list(rows["end"]).count("shipped") == 1
        paths = set(rows["parameter"]) - {"-", sensitivity.CORNER}
        assert paths == {a.path for a in PARAMETERS}
        assert (rows.groupby("parameter")["end"].count().drop("-") == 2).all()
    assert (frame["error"] == "").all()
    np.testing.assert_allclose(frame["over_sync"], frame["simulated_s"] / frame["sync_simulated_s"])


@pytest.mark.slow
def test_the_async_plan_is_made_once_and_only_its_replay_moves(
    data: tuple[Path, pd.DataFrame, dict[str, Any]],
) -> None:
    _, frame, _ = data
    blind = frame[frame["strategy"] == "async"]
    assert blind["predicted_s"].nunique() == 1
    # a variant that sets a parameter to its shipped value replays exactly as shipped
    shipped = blind.loc[blind["end"] == "shipped", "simulated_s"].iloc[0]
    for path, end in SHIPPED_END.items():
        row = blind[(blind["parameter"] == path) & (blind["end"] == end)]
        assert row["simulated_s"].iloc[0] == pytest.approx(shipped, rel=1e-12)
    # less core sharing never slows the copies' kernels
    by = blind.set_index(["parameter", "end"])["over_sync"]
    for path in ("copy_thread.core_slowdown", "copy_thread.straggler"):
        assert by[(path, "low")] <= by[(path, "high")] + 1e-12


@pytest.mark.slow
def test_the_aware_plan_stays_within_half_a_percent_of_sync_on_every_variant(
    data: tuple[Path, pd.DataFrame, dict[str, Any]],
) -> None:
    _, frame, _ = data
    aware = frame[frame["strategy"] == "async-aware"]
    assert len(aware) == 1 + 2 * len(PARAMETERS) + 2
    assert (aware["over_sync"] <= 1.005).all()


def test_flips_marks_ranges_that_cross_one_or_leave_the_shipped_side() -> None:
    frame = pd.DataFrame(
        {
            "workload": ["w"] * 7,
            "capacity": ["4:1"] * 7,
            "strategy": ["async"] * 7,
            "parameter": ["-", "a", "a", "b", "b", "c", "c"],
            "end": ["shipped", "low", "high", "low", "high", "low", "high"],
            "over_sync": [1.1, 0.98, 1.02, 1.01, 1.03, 0.99, 0.97],
        }
    )
    assert list(sensitivity.flips(frame)) == [False, True, True, False, False, True, True]


def test_a_path_the_preset_lacks_is_one_line_naming_it() -> None:
    with pytest.raises(TmsimError, match=r"copy_thread\.nope") as info:
        sensitivity.variant_platform("cascadelake-optane", [("copy_thread.nope.x", 1.0)])
    assert "\n" not in str(info.value)
    with pytest.raises(TmsimError, match="straggler"):
        sensitivity.variant_platform("cascadelake-optane", [("copy_thread.straggler", -1.0)])


@pytest.mark.slow
def test_the_plot_is_written(
    data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path
) -> None:
    path, _, _ = data
    check_plot(sensitivity, path, tmp_path)


def test_the_level_table_variants_change_one_thing_each() -> None:
    from dataclasses import replace

    import tmsim
    from experiments import level_table

    cpu = tmsim.platform("cascadelake-optane")
    got = level_table.variants(cpu)
    assert cpu.copy_thread is not None
    thread = cpu.copy_thread
    assert got["no core term (s = 0)"] == replace(
        cpu, copy_thread=replace(thread, core_slowdown=0.0)
    )
    assert got["sigma = 1/24"].copy_thread == replace(thread, straggler=1 / 24)
    assert got["dedicated core"].copy_thread == replace(thread, core="dedicated")
    bare = got["no write overlap"]
    assert bare.tier("PMM").interference.write_overlap == 0.0
    assert cpu.tier("PMM").interference.write_overlap > 0
    assert bare.copy_thread == thread and bare.controller == cpu.controller
