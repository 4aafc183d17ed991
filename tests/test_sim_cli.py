"""``tmsim simulate``: JSON summary, outputs, graphs built from the plan's own record and
checked by fingerprint, and one-line errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.planners import plan
from tmsim.planners.heuristics import plan_vdnn
from tmsim.planners.settings import PlanSettings
from tmsim.plans.files import save_plan
from tmsim.sim import load_trace
from tmsim.workload.files import graph_to_dict, save_graph
from tmsim.workload.identity import file_identity, graph_sha256
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import training_graph_of
from tmsim.workload.zoo.resnet import resnet50

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
    off = run_json(capsys, str(plan_file), "--interference", "none")
    assert off["simulated_s"] == pytest.approx(plan["predicted_s"], rel=1e-9)
    assert off["predicted_s"] == plan["predicted_s"]
    assert off["interference"] == "none"
    assert off["kernels"] == len(plan["operand_tiers"])
    assert off["moves"] == len(plan["moves"]) == off["sync_moves"] + off["async_moves"]
    assert isinstance(off["moved_bytes"], int) and off["moved_bytes"] > 0
    assert 0 < off["fast_peak_bytes"] <= off["fast_limit_bytes"] == plan["fast_limit_bytes"]
    on = run_json(
        capsys, str(plan_file), "--model", "resnet50", "--batch", "2", "--interference", "bandwidth"
    )
    assert on["interference"] == "bandwidth"
    assert on["simulated_s"] > on["predicted_s"]  # see test_sim_replay
    assert {"graph", "platform", "planner", "ratio", "events"} <= set(on)
    assert (off["interference"], on["interference"]) == ("none", "bandwidth")
    none = run_json(capsys, str(plan_file), "--interference", "NONE")
    assert none["simulated_s"] == off["simulated_s"] and none["interference"] == "none"
    full = run_json(capsys, str(plan_file))  # the full model is the default
    assert full["interference"] == "controller"
    assert full["simulated_s"] >= on["simulated_s"] * (1 - 1e-12)
    causes = {"shared", "blocked", "core", "latency"}
    for summary in (off, on, full):
        assert set(summary["kernels_lost_s"]) == set(summary["copies_lost_s"]) == causes  # type: ignore[arg-type]
    assert sum(off["kernels_lost_s"].values()) == 0.0  # type: ignore[attr-defined]
    assert sum(on["kernels_lost_s"].values()) > 0  # type: ignore[attr-defined]
    assert main(["simulate", str(plan_file), "--interference", "controller"]) == 0
    text = capsys.readouterr().out
    assert "kernels lost     shared " in text and "copies past      their kernels' ends" in text
    with pytest.raises(SystemExit) as info:
        main(["simulate", str(plan_file), "--interference", "full"])
    assert info.value.code == 2
    assert (
        "unknown interference level 'full'; levels are none, bandwidth" in capsys.readouterr().err
    )


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
    assert main(["simulate", str(plan_file)]) == 0
    text = capsys.readouterr().out
    assert "simulated step" in text and "predicted step" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "resnet50", "--batch", "4"], "the graph of --model resnet50 is 'resnet50-b4'"),
        (["--model", "resnet50", "--dtype", "fp64"], "the graph of --model resnet50 is"),
        (["--model", "resnet50", "--file", "g.json"], "not both"),
        (["--batch", "2"], "--batch goes with --model"),
        (["--dtype", "fp32"], "--dtype goes with --model"),
        (
            ["--model", "resnet50", "--platform", "rtx2080ti-pcie3"],
            "is for platform 'cascadelake-optane'",
        ),
        (["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
        (["--timeline", "t.xyz"], "cannot draw '.xyz' files; name a file ending in .png, .pdf"),
        (["--timeline", "t"], "cannot draw a file name without an ending"),
        (["--trace", "no/such/dir/t.parquet"], "directory 'no/such/dir' does not exist"),
        (["--trace", "."], "is a directory"),
        (["--trace", "a.png", "--timeline", "./a.png"], "both name a.png"),
        (["--trace", ""], "--trace needs a file name"),
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
    assert main(["simulate", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["simulate", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    # A plan that breaks the rules (over the fast-memory limit) is refused, not replayed.
    plan = plan_vdnn(
        training_graph_of("resnet50", 2), CPU, PlanSettings(capacity=Capacity.parse("4:1"))
    )
    over = tmp_path / "over.json"
    save_plan(replace(plan, fast_limit_bytes=1000), over)
    assert main(["simulate", str(over)]) == 2
    err = capsys.readouterr().err
    assert "invalid plan" in err and "over its limit" in err and err.count("\n") == 1


# ---------------------------------------------------------------------- the plan's own graph
def test_a_zoo_plan_names_its_graph_and_replays_alone(
    plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tmsim simulate plan.json`` as the README shows it: the plan says which zoo build."""
    ident = json.loads(plan_file.read_text())["graph"]
    assert ident == {
        "name": "resnet50-b2",
        "sha256": graph_sha256(training_graph_of("resnet50", 2)),
        "source": "zoo",
        "args": {
            "model": "resnet50",
            "batch": 2,
            "image_hw": [224, 224],
            "dtype": "fp32",
            "classes": 1000,
        },
    }
    assert run_json(capsys, str(plan_file))["graph"] == "resnet50-b2"
    # --model without --batch takes the plan's batch, and is checked against the fingerprint.
    assert run_json(capsys, str(plan_file), "--model", "resnet50")["graph"] == "resnet50-b2"


def test_a_graph_four_bytes_larger_is_refused_naming_both_hashes(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = training_graph_of("resnet50", 2)
    doc = graph_to_dict(graph)
    doc["tensors"][5]["size_bytes"] += 4
    doc["tensors"][5].pop("shape", None)  # a shape would have to agree with the size
    bigger = tmp_path / "bigger.json"
    bigger.write_text(json.dumps(doc))
    assert main(["simulate", str(plan_file), "--file", str(bigger)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and graph_sha256(graph) in err and err.count("sha256") == 2
    same = tmp_path / "same.json"
    save_graph(graph, same)
    assert run_json(capsys, str(plan_file), "--file", str(same))["graph"] == "resnet50-b2"


def test_a_plan_of_a_graph_file_finds_it_beside_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = training_graph_of("resnet50", 2)
    plans = tmp_path / "plans"
    plans.mkdir()
    save_graph(graph, plans / "g.json")
    made = plan("all-fast", graph, CPU).with_identity(file_identity(graph, "g.json"))
    save_plan(made, plans / "p.json")
    assert json.loads((plans / "p.json").read_text())["graph"]["args"] == {"path": "g.json"}
    monkeypatch.chdir(tmp_path)  # not where the graph file is: found beside the plan
    assert run_json(capsys, "plans/p.json")["graph"] == "resnet50-b2"
    (plans / "g.json").unlink()
    assert main(["simulate", "plans/p.json"]) == 2
    err = capsys.readouterr().err
    assert "graph file 'g.json' not found" in err and err.count("\n") == 1


def test_a_graph_built_in_memory_needs_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A graph no record can build again (a zoo model with another class count) is named by
    --file, and checked against the fingerprint."""
    graph = training_graph(resnet50(2, classes=10))
    path = tmp_path / "p.json"
    save_plan(plan("all-fast", graph, CPU), path)
    assert json.loads(path.read_text())["graph"]["source"] == "unknown"
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "built in memory" in err and "--file PATH" in err and err.count("\n") == 1
    save_graph(graph, tmp_path / "g.json")
    assert run_json(capsys, str(path), "--file", str(tmp_path / "g.json"))["graph"] == graph.name
    assert main(["simulate", str(path), "--model", "resnet50"]) == 2  # classes=1000
    assert "sha256" in capsys.readouterr().err


def test_a_version_1_plan_file_is_read_with_a_flag_and_a_warning(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(plan_file.read_text())
    doc["version"], doc["graph"] = 1, doc["graph"]["name"]
    del doc["recomputes"], doc["host_kernels"]  # a version 1 file has neither
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert main(["simulate", str(old)]) == 2
    err = capsys.readouterr().err
    assert "version-1 plan file" in err and "--model MODEL" in err and err.count("\n") == 1
    assert main(["simulate", str(old), "--model", "resnet50", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["graph"] == "resnet50-b2"
    assert captured.err.startswith("tmsim: warning: ") and captured.err.count("\n") == 1
    assert main(["simulate", str(old), "--model", "resnet50", "--batch", "4"]) == 2
    assert "is for graph 'resnet50-b2', but the graph of --model resnet50 is 'resnet50-b4'" in (
        capsys.readouterr().err
    )


def test_outputs_are_checked_before_the_replay(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad output path fails at once, even when the plan itself would fail later."""
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert main(["simulate", str(tmp_path / "none.json"), "--trace", f"{a_file}/t.parquet"]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and err.count("\n") == 1
    svg = tmp_path / "t.SVG"
    assert run_json(capsys, str(plan_file), "--timeline", str(svg))["timeline"] == str(svg)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_a_platform_name_with_a_newline_is_one_line(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(plan_file.read_text())
    doc["platform"] = "a\nb"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "platform 'a\\nb' is no preset name" in err and err.count("\n") == 1
