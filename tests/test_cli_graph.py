"""The ``tmsim`` command line for the zoo and graphs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tmsim import __version__
from tmsim.cli.main import main
from tmsim.workload.zoo import NAMES, training_graph_of


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_models_lists_the_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == list(NAMES)  # test_zoo and test_zoo_transformer hold the lists


def test_graph_json_matches_the_graph(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", "resnet50", "--batch", "8", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    g = training_graph_of("resnet50", 8)
    assert info["kernels"] == len(g.kernels)
    assert info["tensors"] == len(g.tensors)
    assert info["peak_live_bytes"] == g.peak_live_bytes
    assert info["flops"] == g.flops
    assert info["params"] == 25_557_032
    assert all(
        isinstance(info[k], int)
        for k in ("kernels", "tensors", "peak_live_bytes", "flops", "params")
    )


def test_save_then_load_gives_the_same_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.json"
    assert main(["graph", "densenet121", "--batch", "2", "--save", str(path), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["graph", "--file", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == first


def test_human_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", "vgg19", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "parameters       143,667,240" in out
    assert "peak live" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["graph", "alexnet"], "unknown model 'alexnet'"),
        (["graph"], "give either a zoo MODEL or --file PATH"),
        (["graph", "--file", "/nonexistent/g.json"], "No such file or directory"),
    ],
)
def test_errors_are_one_line_and_exit_nonzero(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert err.startswith("tmsim: error:")
    assert len(err.splitlines()) == 1


def test_bad_graph_file_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.json"
    path.write_text(
        '{"format": "tmsim-graph", "version": 1, "name": "x", "tensors": [], "kernels": 3}'
    )
    assert main(["graph", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: field 'kernels' must be a list" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["graph", "resnet50", "--batch", "0"], "argument --batch: must be a whole number >= 1"),
        (["graph", "resnet50", "--batch", "-3"], "argument --batch: must be a whole number >= 1"),
        (["graph", "resnet50", "--batch", "2.5"], "argument --batch: must be a whole number"),
        (["graph", "resnet50", "--batch", str(2**63)], "argument --batch: must be at most"),
        (["graph", "resnet50", "--dtype", "fp7"], "argument --dtype: invalid choice: 'fp7'"),
        (["graph", "--file", ""], "argument --file: must not be empty"),
        (["graph", "resnet50", "--save", " "], "argument --save: must not be empty"),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tmsim graph: error: ") and err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize("flag", [["--batch", "4"], ["--dtype", "fp16"]])
def test_batch_and_dtype_shape_a_zoo_model_not_a_file(
    flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.json"
    assert main(["graph", "vgg19", "--batch", "1", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["graph", "--file", str(path), *flag]) == 2
    err = capsys.readouterr().err
    assert err == f"tmsim: error: {flag[0]} shapes a zoo MODEL; a graph --file has its own\n"


def test_no_command_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tmsim: error: give a COMMAND: models, graph, ") and err.count("\n") == 1


def test_a_line_break_in_a_message_is_written_as_an_escape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["graph", "--file", "no\nsuch.json"]) == 2
    assert capsys.readouterr().err == "tmsim: error: no\\nsuch.json: No such file or directory\n"
    assert main(["graph", "--file", "no such.json "]) == 2
    assert capsys.readouterr().err == "tmsim: error: 'no such.json ': No such file or directory\n"
    with pytest.raises(SystemExit):
        main(["graph", "vgg19", "--batch", "1\n2"])
    assert capsys.readouterr().err == (
        "tmsim graph: error: argument --batch: must be a whole number, got '1\\n2'\n"
    )


def test_ctrl_c_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tmsim.cli.graph

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(tmsim.cli.graph, "_models", interrupted)
    assert main(["models"]) == 130
    assert capsys.readouterr().err == "tmsim: interrupted\n"


def test_one_line_escapes_every_line_break() -> None:
    from tmsim.cli.args import one_line

    every = "".join(map(chr, range(0x110000)))
    assert len(every.splitlines()) > 1 and len(one_line(every).splitlines()) == 1
    assert one_line("a\nb\x85c") == "a\\nb\\x85c"
