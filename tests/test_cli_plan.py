"""``tmsim plan``: summaries, plan files, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwmodels.presets import load_preset
from tmsim.cli.main import main
from tmsim.plan.validate import validate
from tmsim.plan.values import load_plan
from tmsim.workload.zoo import training_graph_of

KEYS = ("predicted_s", "status", "gap", "solve_s", "valid", "moved_bytes", "fast_peak_bytes")


@pytest.mark.parametrize("mode", ["sync", "first-touch"])
def test_plan_json_and_file(mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    argv = ["plan", "vgg19", "--batch", "4", "--ratio", "4:1", "--mode", mode]
    assert main([*argv, "--window", "1", "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert all(k in info for k in KEYS)
    assert info["valid"] is True
    graph = training_graph_of("vgg19", 4)
    assert info["fast_peak_bytes"] <= graph.peak_live_bytes // 5 + 1
    saved = load_plan(out)
    assert saved.predicted_s == info["predicted_s"]
    check = validate(saved, graph, load_preset("cascadelake-optane"))
    assert check.ok and check.moved_bytes == info["moved_bytes"]
    if mode == "sync":
        assert info["status"] == "optimal" and info["gap"] <= 0.01
        assert info["moves"] > 0
    else:
        assert info["status"] == "heuristic" and info["moves"] == 0


def test_plan_human_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "resnet50", "--batch", "2", "--ratio", "1:1", "--mode", "static"]) == 0
    out = capsys.readouterr().out
    assert "milp-static for resnet50-b2 on cascadelake-optane" in out
    assert "valid            yes" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--platform", "rtx2080ti-pcie3", "--mode", "all-slow"], "reach only tier 'device'"),
        (["--platform", "rtx2080ti-pcie3", "--fast-bytes", "1000000"], "more than the limit"),
        (["--platform", "nowhere"], "nowhere"),
    ],
)
def test_plan_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "resnet50", "--batch", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tmsim: error:") and len(err.splitlines()) == 1
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ratio", "four"], "argument --ratio: 'four' is not a ratio such as '4:1'"),
        (["--ratio", "4:0"], "fast > 0"),
        (["--fast-bytes", "1.5GX"], "units"),
        (["--fast-bytes", "0"], "between 1 and"),
        (["--time-limit", "nan"], "finite number > 0"),
    ],
)
def test_malformed_options_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "resnet50", "--batch", "2", *argv])
    assert info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_sizes_with_units_are_capacities(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "resnet50", "--batch", "2", "--fast-bytes", "0.2GB", "--mode", "first-touch"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fast_limit_bytes"] == 200_000_000


def test_ratio_and_fast_bytes_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "resnet50", "--ratio", "4:1", "--fast-bytes", "100"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_out_of_range_solver_settings_are_one_line_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, message in (
        (["--gap", "-1"], "gap must be a number in [0, 1]"),
        (["--node-limit", "-3"], "node_limit must be an integer >= 0"),
        (["--window", "-1"], "window must be an integer >= 0"),
    ):
        assert main(["plan", "resnet50", "--batch", "2", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("tmsim: error: bad planner option") and message in err
        assert len(err.splitlines()) == 1
