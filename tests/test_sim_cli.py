"""``tmsim simulate``: JSON summary, outputs, and one-line errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.plan.values import save_plan
from tmsim.planners.heuristics import plan_vdnn
from tmsim.planners.settings import PlanSettings
from tmsim.sim import load_trace
from tmsim.workload.files import save_graph
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    save_plan(
        plan_vdnn(
            training_graph_of("resnet50", 2), CPU, PlanSettings(capacity=Capacity.parse("4:1"))
        ),
        path,
    )
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["simulate", *argv, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_json_summary(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = json.loads(plan_file.read_text())
    off = run_json(capsys, str(plan_file), "--model", "resnet50", "--no-contention")
    assert off["simulated_s"] == pytest.approx(plan["predicted_s"], rel=1e-9)
    assert off["predicted_s"] == plan["predicted_s"]
    assert off["contention"] is False
    assert off["kernels"] == len(plan["operand_tiers"])
    assert off["moves"] == len(plan["moves"]) == off["sync_moves"] + off["async_moves"]
    assert isinstance(off["moved_bytes"], int) and off["moved_bytes"] > 0
    assert 0 < off["fast_peak_bytes"] <= off["fast_limit_bytes"] == plan["fast_limit_bytes"]
    on = run_json(capsys, str(plan_file), "--model", "resnet50", "--batch", "2")
    assert on["contention"] is True
    assert on["simulated_s"] > on["predicted_s"]  # see test_sim_replay
    assert {"graph", "platform", "planner", "ratio", "events"} <= set(on)


def test_graph_file_trace_and_timeline(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gfile = tmp_path / "g.json"
    save_graph(training_graph_of("resnet50", 2), gfile)
    trace, png = tmp_path / "t.parquet", tmp_path / "t.png"
    info = run_json(
        capsys,
        str(plan_file),
        "--file",
        str(gfile),
        "--platform",
        "cascadelake-optane",
        "--trace",
        str(trace),
        "--timeline",
        str(png),
    )
    assert load_trace(trace).simulated_s == info["simulated_s"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["simulate", str(plan_file), "--model", "resnet50"]) == 0
    text = capsys.readouterr().out
    assert "simulated step" in text and "predicted step" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--model", "resnet50", "--batch", "4"],
            "is for graph 'resnet50-b2', but the graph given is 'resnet50-b4'",
        ),
        ([], "give --model MODEL"),
        (["--model", "resnet50", "--file", "g.json"], "not both or neither"),
        (
            ["--model", "resnet50", "--platform", "rtx2080ti-pcie3"],
            "is for platform 'cascadelake-optane'",
        ),
        (["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
    ],
)
def test_errors_are_one_line(
    plan_file: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(plan_file), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("tmsim: error: ")


def test_missing_and_invalid_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "none.json"), "--model", "resnet50"]) == 2
    assert "none.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["simulate", str(bad), "--model", "resnet50"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    # A plan that breaks the rules (over the fast-memory limit) is refused, not replayed.
    plan = plan_vdnn(
        training_graph_of("resnet50", 2), CPU, PlanSettings(capacity=Capacity.parse("4:1"))
    )
    over = tmp_path / "over.json"
    save_plan(replace(plan, fast_limit_bytes=1000), over)
    assert main(["simulate", str(over), "--model", "resnet50"]) == 2
    err = capsys.readouterr().err
    assert "invalid plan" in err and "over its limit" in err and err.count("\n") == 1
