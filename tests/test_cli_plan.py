"""``tmsim plan``: summaries, plan files, and one-line errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import tmsim
from hwmodels.presets import load_preset
from tmsim.cli.main import main
from tmsim.plans.files import load_plan
from tmsim.plans.validate import validate
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
        (
            ["--platform", "rtx2080ti-pcie3", "--mode", "all-slow"],
            "'all-slow' does not apply to platform 'rtx2080ti-pcie3': it needs kernels that reach",
        ),
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


def test_no_time_limit_leaves_the_node_limit_to_stop_the_solve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "vgg19", "--batch", "2", "--ratio", "4:1", "--mode", "sync", "--gap", "0"]
    out = tmp_path / "plan.json"
    limits = ["--time-limit", " None", "--node-limit", "1", "--window", "1"]
    assert main([*argv, *limits, "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["status"] == "node_limit" and info["valid"] is True
    assert load_plan(out).options["time_limit_s"] is None


def test_ratio_and_fast_bytes_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "resnet50", "--ratio", "4:1", "--fast-bytes", "100"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gap", "-1"], "argument --gap: must be a number from 0 to 1, got '-1'"),
        (["--gap", "1.5"], "argument --gap: must be a number from 0 to 1"),
        (["--gap", "nan"], "argument --gap: must be a number from 0 to 1, got 'nan'"),
        (["--node-limit", "-3"], "argument --node-limit: must be a whole number >= 0"),
        (["--node-limit", str(2**31)], "argument --node-limit: must be at most 2147483647"),
        (["--window", "-1"], "argument --window: must be a whole number >= 1"),
        (["--window", "0"], "the asynchronous formulation is the synchronous"),
        (["--window", "10001"], "argument --window: must be at most 10000"),
        (["--window", "1e3"], "argument --window: must be a whole number, got '1e3'"),
        (["--time-limit", "0"], "argument --time-limit: seconds must be a finite number > 0"),
        (["--time-limit", "inf"], "argument --time-limit: seconds must be a finite number > 0"),
        (["--solver", ""], "argument --solver: must not be empty"),
        (["--platform", " "], "argument --platform: must not be empty"),
        (["--out", ""], "argument --out: must not be empty"),
        (["--fast-bytes", "1e9999999"], "--fast-bytes: capacity '1e9999999' must be between"),
        (["--mode", "fastest"], "argument --mode: invalid choice: 'fastest'"),
    ],
)
def test_out_of_range_solver_settings_are_one_line_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "resnet50", "--batch", "2", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tmsim plan: error: ") and err.count("\n") == 1
    assert message in err


def test_fast_bytes_in_scientific_notation_is_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "resnet50", "--batch", "2", "--mode", "greedy", "--fast-bytes", "3e9"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fast_limit_bytes"] == 3_000_000_000


def test_an_invalid_plan_exits_1_with_an_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tmsim.api.runs as runs_module

    real = runs_module.validate_plan

    def refuse(*args: Any, **kwargs: Any) -> tmsim.Validation:
        found = real(*args, **kwargs)
        return replace(found, ok=False, errors=("kernel 'k': over the\nlimit",))

    monkeypatch.setattr(runs_module, "validate_plan", refuse)
    assert main(["plan", "vgg19", "--batch", "1", "--mode", "greedy"]) == 1
    captured = capsys.readouterr()
    assert "valid            NO: kernel 'k'" in captured.out
    assert captured.err == (
        "tmsim: error: the greedy plan is invalid: kernel 'k': over the limit\n"
    )


def test_a_fast_tier_smaller_than_asked_caps_a_ratio_and_refuses_a_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomli_w

    from hwmodels.serialize import platform_to_dict

    cpu = load_preset("cascadelake-optane")
    small = replace(
        cpu, name="small", tiers=(replace(cpu.tiers[0], capacity_bytes=10**6), *cpu.tiers[1:])
    )
    toml = tmp_path / "small.toml"
    toml.write_bytes(tomli_w.dumps(platform_to_dict(small)).encode())
    base = ["plan", "vgg19", "--batch", "2", "--platform", str(toml), "--mode", "greedy"]
    assert main([*base, "--ratio", "1:1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["fast_limit_bytes"] == 10**6 and info["valid"]
    assert "capped at the 1000000 bytes tier 'DRAM' holds" in info["capacity_note"]
    assert main([*base, "--fast-bytes", "2e6"]) != 0
    err = capsys.readouterr().err
    assert "fast memory of 2000000 bytes asked, but tier 'DRAM'" in err
    assert err.count("\n") == 1


def test_a_plan_of_a_graph_file_is_simulated_without_naming_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g, p = tmp_path / "g.json", tmp_path / "p.json"
    assert main(["graph", "vgg19", "--batch", "2", "--save", str(g)]) == 0
    assert (
        main(["plan", "--file", str(g), "--mode", "greedy", "--ratio", "4:1", "--out", str(p)]) == 0
    )
    assert json.loads(p.read_text())["graph"]["source"] == "file"
    capsys.readouterr()
    assert main(["simulate", str(p), "--interference", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["simulated_s"] > 0


def test_set_changes_a_field_of_the_platform(capsys: pytest.CaptureFixture[str]) -> None:
    """``--set compute.kernels.matmul_fp32=tf32``: GPT-2's fp32 matrix products in TF32 (what
    ``torch.set_float32_matmul_precision('high')`` does) make its step shorter."""
    graph = Path(__file__).resolve().parent.parent / "calibration/h200/graphs/gpt2_fp32_b8.json"
    base = ["plan", "--file", str(graph), "--platform", "h200-host-nvme", "--mode", "all-fast"]

    def predicted(*extra: str) -> float:
        assert main([*base, *extra, "--json"]) == 0
        return float(json.loads(capsys.readouterr().out)["predicted_s"])

    fp32 = predicted()
    tf32 = predicted("--set", "compute.kernels.matmul_fp32=tf32")
    assert tf32 < 0.6 * fp32
    with pytest.raises(SystemExit):
        main([*base, "--set", "=tf32"])
    assert "give KEY=VALUE" in capsys.readouterr().err
    assert main([*base, "--set", "compute.kernels.matmul_fp32=fp8"]) == 2
    assert "matmul_fp32 must be one of fp32, tf32" in capsys.readouterr().err
