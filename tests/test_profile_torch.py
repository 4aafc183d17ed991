"""``tmsim profile`` / :func:`tmsim.profile`: every kernel of a traced step measured on the CPU."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

import tmsim
from tmsim.cli.main import main
from tmsim.errors import TmsimError

torch = pytest.importorskip("torch")


def mlp(width: int = 64) -> object:
    return torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    )


def test_every_kernel_is_measured_under_its_graph_name(tmp_path: Path) -> None:
    model = mlp()
    before = [p.clone() for p in model.parameters()]
    graph, prof = tmsim.profile(
        model, (16, 32), tmp_path / "p.csv", optimizer="adamw", tier="DRAM", repeats=2
    )
    names = [k.name for k in graph.kernels]
    assert [e.kernel for e in prof.entries] == names
    ptr, _ = graph.operand_csr
    for k, e in enumerate(prof.entries):
        assert e.placement == ("DRAM",) * int(ptr[k + 1] - ptr[k])
        assert e.seconds > 0
    assert sum(k.phase.value == "update" for k in graph.kernels) == 4  # 2 weights, 2 biases
    # The caller's model is neither moved nor changed.
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    # A plan made with the profile is predicted at the measured times: all on DRAM, the
    # step is their sum.
    platform = tmsim.platform("cascadelake-optane")
    plan = tmsim.plan(graph, platform, "all-fast", profile=prof)
    assert plan.predicted_s == pytest.approx(sum(e.seconds for e in prof.entries), rel=1e-9)


def test_a_model_on_the_meta_device_is_measured_too(tmp_path: Path) -> None:
    with torch.device("meta"):
        model = mlp()
    graph, prof = tmsim.profile(model, (8, 32), tmp_path / "p.csv", warmup=0, repeats=1)
    assert len(prof.entries) == len(graph.kernels)
    assert {e.placement[0] for e in prof.entries} == {"host"}


def test_the_command_writes_the_profile_and_the_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n"
    )
    out, graph = tmp_path / "p.csv", tmp_path / "g.json"
    argv = ["profile", f"{source}:build", "--input", "8", "--batch", "4", "--loss", "sum"]
    argv += ["--out", str(out), "--graph", str(graph), "--repeats", "1", "--warmup", "0"]
    assert main(argv) == 0
    assert "profile" in capsys.readouterr().out
    g = tmsim.load_graph(graph)
    assert [e.kernel for e in tmsim.read_profile(out).entries] == [k.name for k in g.kernels]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "cuda:3"} if not torch.cuda.is_available() else {"device": "tpu"}, "device"),
        ({"device": "nowhere"}, "unknown device"),
        ({"repeats": 0}, "repeats must be an integer of 1 to 10000"),
        ({"warmup": -1}, "warmup must be"),
        ({"tier": ""}, "tier must be a tier's name"),
        ({"loss": "hinge"}, "loss must be one of"),
    ],
)
def test_bad_arguments_are_one_line(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TmsimError, match=message) as info:
        tmsim.profile(mlp(), (4, 32), tmp_path / "p.csv", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.slow
def test_the_profiled_step_is_within_15_percent_of_an_eager_step(tmp_path: Path) -> None:
    """On this CPU: the plan made with the profile predicts the step an eager PyTorch step
    takes (model.zero_grad, forward, loss, backward, SGD with momentum), within 15%. A timing
    on a shared machine: a slow test."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 2048),
        torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048),
        torch.nn.ReLU(),
        torch.nn.Linear(2048, 1000),
    )
    graph, prof = tmsim.profile(model, (512, 1024), tmp_path / "p.csv", repeats=5)
    predicted = sum(e.seconds for e in prof.entries)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    x, y = torch.randn(512, 1024), torch.zeros(512, dtype=torch.long)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    measured = statistics.median(times)
    print(f"predicted {predicted * 1e3:.1f} ms, eager {measured * 1e3:.1f} ms")
    assert abs(predicted / measured - 1) <= 0.15, (predicted, measured, len(graph.kernels))
