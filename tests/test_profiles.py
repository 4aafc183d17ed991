"""Measured kernel times (profiles): read in one line or refused in one line, and obeyed by
every planner, the validator and the replay.

The MILP is checked against an exhaustive search that times every kernel as the cost model
does, measured where the profile lists the placement (:mod:`measured_brute`). The graph is
``tiny_step`` (megabytes, kernels of milliseconds: the solver's tolerances are far below
them) on Cascade Lake with Optane; ``f2`` reads ``a`` and writes ``b``, and with every
operand in DRAM the roofline gives it 1.93 ms, with both in PMM 12.5 ms.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from measured_brute import exhaustive_s
from test_sim_overlap import hand_plan, only, pmm_graph
from tiny_graphs import tiny_step

from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode
from tmsim.capacity import Capacity, fast_limit_bytes
from tmsim.cli.main import main
from tmsim.cost import CostModel, IndexMove, step_time_s
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.planners.milp.chain.solve import fits, solve, solver_options
from tmsim.planners.milp.chain.starts import static_start
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.plans.validate import validate
from tmsim.profiles import MAX_KERNEL_SECONDS, cost_model, read_profile
from tmsim.profiles import write_profile as write_profile_file
from tmsim.sim import replay
from tmsim.workload.files import save_graph

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
DRAM, PMM = 0, 1
HEADER = "kernel,placement,seconds\n"
MS = 1e-3
#: A profile's rows: (kernel, tier names of its operands) -> seconds.
Rows = dict[tuple[str, tuple[str, ...]], float]
#: f2 (operands a, b) measured at every placement: slowest in DRAM alone, fastest in PMM.
FAST_TIER_SLOWER: Rows = {
    ("f2", ("DRAM", "DRAM")): 5 * MS,
    ("f2", ("DRAM", "PMM")): 3 * MS,
    ("f2", ("PMM", "DRAM")): 3 * MS,
    ("f2", ("PMM", "PMM")): 0.4 * MS,
}
#: f2 measured at one placement, both operands in PMM, faster than the roofline's DRAM time
#: (1.93 ms); every other placement keeps the roofline.
SLOW_TIER_FASTER: Rows = {("f2", ("PMM", "PMM")): 0.05 * MS}


def write_profile(folder: Path, rows: Rows) -> Path:
    path = folder / "profile.csv"
    lines = [f"{k},{'|'.join(p)},{s!r}" for (k, p), s in rows.items()]
    path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------- the MILP
@pytest.mark.parametrize("capacity", [None, "1:1"])
@pytest.mark.parametrize("formulation", ["static", "sync", "async"])
@pytest.mark.parametrize("rows", [FAST_TIER_SLOWER, SLOW_TIER_FASTER], ids=["fast", "slow"])
def test_the_milp_is_as_good_as_exhaustive_search_with_measured_times(
    tmp_path: Path, rows: Rows, capacity: str | None, formulation: str
) -> None:
    graph = tiny_step()
    profile = read_profile(write_profile(tmp_path, rows))
    cost = cost_model(graph, CPU, profile)
    settings = PlanSettings(
        capacity=None if capacity is None else Capacity.parse(capacity),
        profile=profile,
        time_limit_s=None,
        gap=0.0,
        window=1,
    )
    made = plan(formulation, graph, CPU, settings)
    best = exhaustive_s(cost, fast_limit_bytes(graph, CPU, settings.capacity), formulation)
    assert made.predicted_s == pytest.approx(best, rel=1e-9)
    assert made.stats is not None and made.stats.objective == pytest.approx(best, rel=1e-6)
    assert validate(made, graph, CPU, cost).ok
    assert made.options["profile"] == profile.record()


def test_a_measured_time_turns_the_milps_choice_around(tmp_path: Path) -> None:
    """With room for everything in DRAM the roofline keeps f2's operands there; measured at
    5 ms there and 3 ms with b in PMM, b goes to PMM (a stays: f1 writes it, f3 reads it,
    both at the roofline), and the step is f1 + 3 ms + f3 with b in PMM + sgd, by hand."""
    graph = tiny_step()
    profile = read_profile(write_profile(tmp_path, FAST_TIER_SLOWER))
    roofline = CostModel(graph, CPU)
    for formulation in ("static", "sync"):
        settings = PlanSettings(time_limit_s=None, gap=0.0, profile=profile)
        made = plan(formulation, graph, CPU, settings)
        plain = plan(formulation, graph, CPU, PlanSettings(time_limit_s=None, gap=0.0))
        assert plain.operand_tiers[1] == ("DRAM", "DRAM")
        assert made.operand_tiers[1] == ("DRAM", "PMM")
        assert made.operand_tiers[2] == ("PMM", "DRAM", "DRAM")  # f3 reads b from PMM
        by_hand = (
            roofline.recompute_s(0, (DRAM, DRAM, DRAM))
            + 3 * MS
            + roofline.recompute_s(2, (PMM, DRAM, DRAM))
            + roofline.recompute_s(3, (DRAM, DRAM))
        )
        assert made.predicted_s == pytest.approx(by_hand, rel=1e-12)
        # the roofline's plan, timed with the measured times, is slower
        assert (
            made.predicted_s
            < validate(plain, graph, CPU, cost_model(graph, CPU, profile)).recomputed_s
        )


def test_the_models_objective_and_warm_starts_include_the_measured_terms(tmp_path: Path) -> None:
    """A start is feasible, :meth:`Model.objective` equals the step time at it and at the
    solver's answer, and the solver agrees; without a profile the model has no such terms."""
    graph = tiny_step()
    profile = read_profile(write_profile(tmp_path, FAST_TIER_SLOWER))
    cost = cost_model(graph, CPU, profile)
    limits = np.full(len(graph.kernels), CPU.tiers[0].capacity_bytes, dtype=np.int64)
    model = build_model(cost, 1, Formulation.SYNC, limits, relax=False)
    assert model.measured is not None and model.measured.count == 4
    plain = build_model(CostModel(graph, CPU), 1, Formulation.SYNC, limits, relax=False)
    assert plain.measured is None and plain.z is None
    assert model.variables == plain.variables + 4
    for tier in (DRAM, PMM):
        tiers = np.full(len(graph.tensors), tier, dtype=np.int64)
        start = static_start(model, tiers)
        assert start is not None and fits(model, start)
        expected, _ = step_time_s(cost, tiers[cost.op_tensor], [])
        assert model.objective(start) == pytest.approx(expected, rel=1e-12)
        z = model.measured.values(start.astype(float))
        assert z.tolist() == [float(k == 3 * tier) for k in range(4)]  # the f2 entries in order
        outcome = solve(model, "HIGHS", solver_options("HIGHS", 0.0, None), False, start=start)
        x = np.asarray(model.x.value) > 0.5
        assert outcome.objective == pytest.approx(model.objective(x), rel=1e-9)
        assert outcome.objective == pytest.approx(exhaustive_s(cost, int(limits[0]), "sync"))


def test_measured_times_below_the_roofline_floor_lower_the_bound(tmp_path: Path) -> None:
    graph = tiny_step()
    profile = read_profile(write_profile(tmp_path, SLOW_TIER_FASTER))
    cost = cost_model(graph, CPU, profile)
    least, most = cost.kernel_time_range_s()
    plain_least, plain_most = CostModel(graph, CPU).kernel_time_range_s()
    assert least[1] == 0.05 * MS < plain_least[1]
    assert most.tolist() == plain_most.tolist()


# ---------------------------------------------------------------------- reading
def test_a_profile_keeps_its_path_digest_and_rows(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    text = "placement , kernel,seconds\nDRAM| PMM ,f2,0.003\n\n PMM|PMM,f2 , 4e-4\n"
    path.write_text(text, encoding="utf-8")
    profile = read_profile(path)
    assert profile.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert profile.record() == {"path": str(path), "sha256": profile.sha256, "entries": 2}
    assert profile.table(tiny_step(), CPU) == {(1, (DRAM, PMM)): 3 * MS, (1, (PMM, PMM)): 0.4 * MS}


BAD = [
    ("kernel,seconds\nf2,1\n", "missing column(s) placement"),
    ("", "missing column(s) kernel, placement, seconds"),
    (HEADER, "no measured kernel times"),
    (HEADER + "f2,DRAM|DRAM,0\n", ":2: seconds must be a positive number, got '0'"),
    (HEADER + "f2,DRAM|DRAM,-1e-3\n", "seconds must be a positive number"),
    (HEADER + "f2,DRAM|DRAM,nan\n", "seconds must be a positive number"),
    (HEADER + "f2,DRAM|DRAM,inf\n", "seconds must be a positive number"),
    (HEADER + "f2,DRAM|DRAM,fast\n", "seconds must be a positive number, got 'fast'"),
    (HEADER + "f2,DRAM|DRAM\n", ":2: 2 fields, the header has 3"),
    (HEADER + ",DRAM|DRAM,1\n", "the kernel is empty"),
    (
        HEADER + "f2,DRAM|DRAM,1\nf2,DRAM|DRAM,2\n",
        ":3: kernel 'f2' at placement DRAM|DRAM is listed on line 2",
    ),
    # no kernel of a step takes an hour: 1e308 s would plan as a valid step of 1e308 s
    (HEADER + "f2,DRAM|DRAM,1e308\n", ":2: kernel 'f2': 1e308 s is over the bound of 3600 s"),
    (HEADER + "f2,DRAM|DRAM,3600.001\n", ":2: kernel 'f2': 3600.001 s is over the bound"),
    # an ambiguous header: which seconds?
    ("kernel,placement,seconds,seconds\nf2,DRAM|DRAM,1,2\n", "column 'seconds' twice"),
    ("kernel, kernel ,placement,seconds\nf2,f1,DRAM|DRAM,1\n", "column 'kernel' twice"),
    ("kernel,placement,seconds,note,note\nf2,DRAM|DRAM,1,a,b\n", "column 'note' twice"),
    # numbers as a CSV file writes them: no digit separators, no digits of other scripts
    (HEADER + "f2,DRAM|DRAM,1_0\n", "seconds must be a positive number, got '1_0'"),
    (HEADER + "f2,DRAM|DRAM,\uff11\n", "seconds must be a positive number, got '\uff11'"),
    (HEADER + "f2,DRAM|DRAM,0x1p-3\n", "seconds must be a positive number"),
]
BAD_FOR_THE_GRAPH = [
    (HEADER + "f1,DRAM|DRAM|DRAM,1\nf9,DRAM,1\n", ":3: unknown kernel 'f9' in graph 'tiny'"),
    (HEADER + "f2,DRAM,1\n", ":2: kernel 'f2' has 2 operands, placement lists 1"),
    (HEADER + "f2,DRAM|DRAM|DRAM,1\n", "kernel 'f2' has 2 operands, placement lists 3"),
    (HEADER + "f2,DRAM|HBM,1\n", ":2: unknown tier 'HBM'; platform"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_profile_file_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TmsimError) as info:
        read_profile(path)
    assert message in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "seconds", ["5e-324", "1e-300", "1e-9", "3600", "3.6e3", "+0.5", ".5", "2."]
)
def test_tiny_and_bounded_times_are_read(tmp_path: Path, seconds: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(f"{HEADER}f2,DRAM|DRAM,{seconds}\n", encoding="utf-8")
    (entry,) = read_profile(path).entries
    assert entry.seconds == float(seconds) <= MAX_KERNEL_SECONDS
    graph, profile = tiny_step(), read_profile(path)
    made = plan("greedy", graph, CPU, PlanSettings(profile=profile))
    assert validate(made, graph, CPU, cost_model(graph, CPU, profile)).ok


def test_the_bound_is_an_hour_and_write_profile_keeps_it(tmp_path: Path) -> None:
    assert MAX_KERNEL_SECONDS == 3600.0
    with pytest.raises(TmsimError, match=r"kernel 'f2': 3601\.0 s is over the bound of 3600 s"):
        write_profile_file(tmp_path / "p.csv", tiny_step(), {"f2": 3601.0}, "DRAM")
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize(("text", "message"), BAD_FOR_THE_GRAPH)
def test_a_profile_of_another_graph_is_refused_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TmsimError) as info:
        read_profile(path).table(tiny_step(), CPU)
    assert message in str(info.value) and f"{path}:" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_or_unreadable_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match=r"profile .*nowhere\.csv: No such file"):
        read_profile(tmp_path / "nowhere.csv")
    (tmp_path / "latin.csv").write_bytes(HEADER.encode() + b"f2,DRAM|DRAM,1\xe9\n")
    with pytest.raises(TmsimError, match="not UTF-8 text"):
        read_profile(tmp_path / "latin.csv")
    # on the GPU kernels reach device memory only: a placement on the host is no placement
    gpu = GPU.tier_names
    path = write_profile(tmp_path, {("f2", (gpu[0], gpu[1])): 1.0})
    with pytest.raises(TmsimError, match=f"cannot access tier '{gpu[1]}'"):
        read_profile(path).table(tiny_step(), GPU)
    with pytest.raises(TmsimError, match="profile must be a Profile"):
        PlanSettings(profile=str(path))  # type: ignore[arg-type]


# ---------------------------------------------------------------------- heuristics, validator
def test_heuristics_plan_and_predict_with_measured_times(tmp_path: Path) -> None:
    """all-fast keeps its placement and pays f2's measured 5 ms; greedy, whose benefit of a
    tensor is what its kernels' times say, measured where they are, leaves b in PMM where
    the roofline puts it in DRAM (from everything in PMM, b in DRAM would take f2 from its
    measured 0.4 ms to 3 ms, more than the 1.28 ms f3 gains)."""
    graph = tiny_step()
    profile = read_profile(write_profile(tmp_path, FAST_TIER_SLOWER))
    cost = cost_model(graph, CPU, profile)
    roofline = CostModel(graph, CPU)
    fast = plan("all-fast", graph, CPU, PlanSettings(profile=profile))
    zeros = np.zeros(cost.op_tensor.size, dtype=np.int64)
    assert fast.predicted_s == pytest.approx(
        roofline.kernel_times_s(zeros).sum() - roofline.kernel_times_s(zeros)[1] + 5 * MS,
        rel=1e-12,
    )
    greedy = plan("greedy", graph, CPU, PlanSettings(profile=profile))
    plain = plan("greedy", graph, CPU, PlanSettings())
    assert plain.operand_tiers[1] == ("DRAM", "DRAM")
    assert greedy.operand_tiers[1] == ("DRAM", "PMM")
    for made in (fast, greedy):
        check = validate(made, graph, CPU, cost)
        assert check.ok, check.errors[:2]
        assert check.recomputed_s == pytest.approx(made.predicted_s, rel=1e-12)
        assert made.options["profile"]["sha256"] == profile.sha256
        # checked against the roofline, the plan's predicted time is wrong
        against = validate(made, graph, CPU, roofline)
        assert not against.ok and "predicted step time" in against.errors[0]
    assert greedy.predicted_s < validate(plain, graph, CPU, cost).recomputed_s


# ---------------------------------------------------------------------- the replay
@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_a_measured_kernel_alone_takes_its_measured_time(factor: float) -> None:
    """k0 streams 4 GB from PMM (0.5 s by the roofline); measured at half and at twice
    that, it takes exactly its measured time alone, at every interference level, and beside
    a 50 MB eviction to PMM never less (its demand shares the tier)."""
    graph = pmm_graph()
    op_tiers = [PMM, DRAM, DRAM, DRAM, DRAM]  # k0 (x, y), k1 (y, a, z)
    initial = {0: (PMM,), 1: (DRAM,)}
    roofline = CostModel(graph, CPU)
    measured_s = factor * float(roofline.kernel_times_s(op_tiers)[0])
    cost = CostModel(graph, CPU, measured={(0, (PMM, DRAM)): measured_s})
    alone = hand_plan(graph, CPU, op_tiers, initial, [], cost=cost)
    for level in InterferenceLevel:
        trace = replay(alone, graph, CPU, level=level, cost=cost)
        k0 = only(trace, "kernel", "k0")
        assert k0.end_s - k0.start_s == pytest.approx(measured_s, rel=1e-6), level
    eviction = [IndexMove(1, DRAM, PMM, 0, MoveMode.ASYNC)]
    beside = hand_plan(graph, CPU, op_tiers, initial, eviction, cost=cost)
    off = replay(beside, graph, CPU, level=InterferenceLevel.NONE, cost=cost)
    assert off.simulated_s == pytest.approx(beside.predicted_s, rel=1e-9)
    on = replay(beside, graph, CPU, level=InterferenceLevel.BANDWIDTH, cost=cost)
    k0 = only(on, "kernel", "k0")
    assert k0.end_s - k0.start_s >= measured_s * (1 - 1e-9)
    if factor < 1:  # its demand fills PMM alone: the eviction's writes slow it
        assert k0.end_s - k0.start_s > measured_s * 1.001


# ---------------------------------------------------------------------- the command line
def run_cli(argv: list[str], folder: Path) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``tmsim ARGV`` run in ``folder``."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    save_graph(tiny_step(), tmp_path / "tiny.json")
    write_profile(tmp_path, FAST_TIER_SLOWER)
    return tmp_path


EXACT = ["--time-limit", "none", "--gap", "0"]


def test_plan_simulate_and_compare_take_a_profile(folder: Path) -> None:
    profile = read_profile(folder / "profile.csv")
    code, out, err = run_cli(
        [
            "plan",
            "--file",
            "tiny.json",
            "--mode",
            "static",
            "--profile",
            "profile.csv",
            "--out",
            "plan.json",
            "--json",
            *EXACT,
        ],
        folder,
    )
    assert code == 0, err
    info = json.loads(out)
    assert info["profile"] == {**profile.record(), "path": "profile.csv"}  # as given
    graph = tiny_step()
    expected = plan("static", graph, CPU, PlanSettings(profile=profile, time_limit_s=None, gap=0))
    assert info["predicted_s"] == pytest.approx(expected.predicted_s, rel=1e-12)
    # the plan finds its profile again where it records it
    code, out, err = run_cli(["simulate", "plan.json", "--interference", "none", "--json"], folder)
    assert code == 0 and not err, err
    run = json.loads(out)
    assert run["simulated_s"] == pytest.approx(expected.predicted_s, rel=1e-9)
    assert run["profile"]["sha256"] == profile.sha256
    # another profile: a warning, checked against the plan's own, replayed with the other
    other = folder / "other"
    other.mkdir()
    write_profile(other, {("f2", ("DRAM", "PMM")): 30 * MS})
    argv = ["simulate", "plan.json", "--interference", "none", "--json"]
    code, out, err = run_cli([*argv, "--profile", "other/profile.csv"], folder)
    assert code == 0, err
    assert err.startswith("tmsim: warning: the plan was made with the measured times of")
    assert len(err.splitlines()) == 1
    assert json.loads(out)["simulated_s"] == pytest.approx(expected.predicted_s + 27 * MS)
    # compare plans and replays every planned strategy with the profile
    code, out, err = run_cli(
        [
            "compare",
            "--file",
            "tiny.json",
            "--strategies",
            "all-fast,greedy,static",
            "--profile",
            "profile.csv",
            "--interference",
            "none",
            "--quiet",
            "--json",
            *EXACT,
        ],
        folder,
    )
    assert code == 0, err
    rows = {r["strategy"]: r for r in json.loads(out)}
    assert rows["static"]["predicted_s"] == pytest.approx(expected.predicted_s, rel=1e-12)
    for name in ("all-fast", "greedy"):
        made = plan(name, graph, CPU, PlanSettings(profile=profile))
        assert rows[name]["predicted_s"] == pytest.approx(made.predicted_s, rel=1e-12)
        assert rows[name]["simulated_s"] == pytest.approx(made.predicted_s, rel=1e-9)
        assert rows[name]["valid"]
    # the plan's profile gone, or changed: refused in one line
    (folder / "profile.csv").write_text(HEADER + "f2,DRAM|DRAM,1\n", encoding="utf-8")
    code, _, err = run_cli(["simulate", "plan.json"], folder)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "profile.csv has changed since" in err and "--profile FILE" in err
    (folder / "profile.csv").unlink()
    code, _, err = run_cli(["simulate", "plan.json"], folder)
    assert code == 2 and "it is not found" in err and len(err.splitlines()) == 1, err


BAD_FILES = {
    "missing column": "kernel,seconds\nf2,1\n",
    "unknown kernel": HEADER + "f9,DRAM,1\n",
    "unknown tier": HEADER + "f2,DRAM|HBM,1\n",
    "wrong length": HEADER + "f2,DRAM,1\n",
    "non-positive seconds": HEADER + "f2,DRAM|DRAM,0\n",
    "seconds over the bound": HEADER + "f2,DRAM|DRAM,1e308\n",
    "seconds twice": "kernel,placement,seconds,seconds\nf2,DRAM|DRAM,1,2\n",
}


@pytest.mark.parametrize("command", ["plan", "compare", "simulate"])
@pytest.mark.parametrize("bad", [*BAD_FILES, "missing file"])
def test_a_bad_profile_fails_every_command_in_one_line(
    folder: Path, command: str, bad: str
) -> None:
    if bad in BAD_FILES:
        (folder / "bad.csv").write_text(BAD_FILES[bad], encoding="utf-8")
    argv = {
        "plan": ["plan", "--file", "tiny.json", "--mode", "greedy"],
        "compare": ["compare", "--file", "tiny.json", "--strategies", "greedy", "--quiet"],
        "simulate": ["simulate", "plan.json"],
    }[command]
    if command == "simulate":
        assert (
            run_cli(
                ["plan", "--file", "tiny.json", "--mode", "greedy", "--out", "plan.json"], folder
            )[0]
            == 0
        )
    code, out, err = run_cli([*argv, "--profile", "bad.csv"], folder)
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("tmsim: error: ") and "bad.csv" in err


# ---------------------------------------------------------------------- sweeps and the API
def test_a_sweep_plans_and_replays_its_points_with_the_profile(tmp_path: Path) -> None:
    from tmsim.results import read_table
    from tmsim.sweeps.engine import run_sweep
    from tmsim.sweeps.spec import SweepSpecError, load_sweep
    from tmsim.workload.zoo import training_graph_of

    graph = training_graph_of("vgg19", 1)
    first = graph.kernels[0].name
    count = int(graph.operand_csr[0][1])
    (tmp_path / "vgg.csv").write_text(
        HEADER + f"{first},{'|'.join(['DRAM'] * count)},0.25\n", encoding="utf-8"
    )
    grid = (
        '[grid]\nmodel = "vgg19"\nbatch = 1\nplatform = "cascadelake-optane"\n'
        'strategy = ["all-fast", "greedy", "2lm", "static"]\n'
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(grid + '[settings]\nprofile = "vgg.csv"\n', encoding="utf-8")
    plain = tmp_path / "plain.toml"
    plain.write_text(grid, encoding="utf-8")
    sweep, before = load_sweep(spec), {p.key for p in load_sweep(plain).points}
    sha = read_profile(tmp_path / "vgg.csv").sha256
    assert {p.profile_sha256 for p in sweep.points} == {sha}  # 2lm's too, as in compare
    assert {p.key for p in sweep.points}.isdisjoint(before)  # the digest is in the key
    run = tmp_path / "run.toml"
    run.write_text(
        grid.replace(', "2lm", "static"', "") + '[settings]\nprofile = "vgg.csv"\n',
        encoding="utf-8",
    )
    report = run_sweep(load_sweep(run), tmp_path / "out", workers=1, table_format="csv")
    assert report.table is not None
    frame, _ = read_table(report.table)
    assert set(frame.profile_sha256) == {sha}
    fast = frame[frame.strategy == "all-fast"].iloc[0]
    profile = read_profile(tmp_path / "vgg.csv")
    expected = plan("all-fast", graph, CPU, PlanSettings(profile=profile))
    assert fast.predicted_s == pytest.approx(expected.predicted_s, rel=1e-12)
    assert fast.predicted_s > 0.25
    # a profile changed after the spec was read fails its points, which the next run retries
    sweep = load_sweep(run)
    (tmp_path / "vgg.csv").write_text(
        HEADER + f"{first},{'|'.join(['DRAM'] * count)},0.5\n", encoding="utf-8"
    )
    failed = run_sweep(sweep, tmp_path / "again", workers=1)
    assert failed.failures and "changed since the sweep spec was read" in failed.failures[0]
    spec.write_text(grid + '[settings]\nprofile = "nowhere.csv"\n', encoding="utf-8")
    with pytest.raises(SweepSpecError, match=r"settings\.profile: profile .*nowhere.csv"):
        load_sweep(spec)


def test_the_api_takes_a_profile_by_path_and_finds_a_plans_own(tmp_path: Path) -> None:
    import tmsim

    graph = tiny_step()
    path = write_profile(tmp_path, FAST_TIER_SLOWER)
    made = tmsim.plan(graph, CPU, "greedy", profile=str(path))
    assert made.options["profile"]["path"] == str(path)
    assert tmsim.validate(made, graph, CPU).ok  # its profile found where it records it
    run = tmsim.simulate(made, graph, CPU, interference="none")
    assert run.step_time_s == pytest.approx(made.predicted_s, rel=1e-9)
    # a plan made with the roofline is checked against the roofline, whatever profile is given
    assert tmsim.validate(tmsim.plan(graph, CPU, "greedy"), graph, CPU, profile=path).ok
    with pytest.raises(TmsimError, match="profile must be a profile file's path"):
        tmsim.plan(graph, CPU, "greedy", profile=3)
