"""Sweep specs: grid expansion, stable keys, explicit points, platform overrides, and a
one-line error naming the file and key for every kind of bad spec."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hwmodels.presets import load_preset, platform_to_toml
from tmsim.sweeps.overrides import apply_override
from tmsim.sweeps.spec import SweepSpecError, load_sweep, sweep_from_dict

REPO = Path(__file__).resolve().parent.parent
CPU = "cascadelake-optane"


def test_grid_expands_to_the_product_plus_one_baseline_per_workload_and_platform() -> None:
    spec = tomllib.loads(
        """
        [grid]
        model = "resnet50"
        batch = [2, 4]
        platform = ["cascadelake-optane"]
        ratio = ["4:1", "1:1"]
        strategy = ["all-slow", "first-touch", "static"]
        [grid.overrides]
        "tiers.PMM.read_bw_GBps" = [30, 37.6]
        [settings]
        time_limit_s = 7
        """
    )
    sweep = sweep_from_dict(spec, "spec.toml")
    grid = [p for p in sweep.points if p.role == "grid"]
    baselines = [p for p in sweep.points if p.role == "baseline"]
    assert len(grid) == 2 * 2 * 2 * 3
    assert len(baselines) == 2 * 2  # per batch and bandwidth
    assert len({p.key for p in sweep.points}) == len(sweep.points)
    first = grid[0].config()
    assert first["model"] == "resnet50" and first["batch"] == 2 and first["dtype"] == "fp32"
    assert first["ratio"] == "4:1" and first["strategy"] == "all-slow"
    assert first["tiers.PMM.read_bw_GBps"] == 30.0  # int and float in one list: all floats
    assert isinstance(first["tiers.PMM.read_bw_GBps"], float)
    pmm = grid[0].platform_si["tiers"][1]
    assert pmm["name"] == "PMM" and pmm["read_bw_bytes_per_s"] == 30e9
    # Solver settings only where they matter.
    static = next(p for p in grid if p.strategy == "static")
    read = dict(static.settings)
    assert (read["solver"], read["time_limit_s"], read["gap"]) == ("HIGHS", 7, 0.01)
    assert grid[0].settings == () and grid[0].config()["settings.time_limit_s"] is None
    for b in baselines:
        assert (b.strategy, b.ratio, b.fast_bytes) == ("all-fast", None, None)


def test_keys_are_stable_and_only_what_matters_changes_them() -> None:
    def keys(
        settings: str = "", order: tuple[str, str] = ("a", "b"), bw: str = "read_bw_GBps = [30.0]"
    ) -> dict[str, str]:
        field, values = bw.split(" = ")
        over = {
            "a": f'"tiers.PMM.{field}" = {values}',
            "b": '"compute.launch_overhead_us" = [1.0]',
        }
        text = f"""
        [grid]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        ratio = "4:1"
        strategy = ["first-touch", "static"]
        [grid.overrides]
        {over[order[0]]}
        {over[order[1]]}
        [settings]
        {settings}
        """
        sweep = sweep_from_dict(tomllib.loads(text), "x")
        return {p.strategy: p.key for p in sweep.points}

    base = keys()
    assert keys() == base
    assert keys(order=("b", "a")) == base
    longer = keys("time_limit_s = 99")
    assert longer["first-touch"] == base["first-touch"]
    assert longer["static"] != base["static"]
    assert keys('interference = "none"')["first-touch"] != base["first-touch"]
    # One platform, one point: however the override spells it.
    assert keys(bw="read_bw_GBps = [30]") == base
    assert keys(bw="read_bw_bytes_per_s = [3e10]") == base
    assert keys(bw="read_bw_GBps = [31.0]")["first-touch"] != base["first-touch"]
    assert keys("time_limit_s = 300") == keys("time_limit_s = 300.0") == base
    nodes = keys("node_limit = 100")
    assert nodes["first-touch"] == base["first-touch"] and nodes["static"] != base["static"]


def test_keys_of_points_without_a_node_limit_are_those_stores_hold() -> None:
    """Recorded before node limits were a setting: an old output folder resumes as it was.
    (Pinned again when the Optane preset's asynchronous rates became its copy thread's, and
    when it gained its energy model, whose columns its rows now carry, and when its PMM gained
    its fitted write overlap: a changed platform must not resume the points of the old one.) Points replayed at the
    ``bandwidth`` level keep these keys; at the full model, now the default, they are new
    points (their results differ)."""
    grid = """
    [grid]
    model = "vgg19"
    batch = 1
    platform = "cascadelake-optane"
    ratio = "4:1"
    strategy = ["first-touch", "static"]
    """
    text = grid + '[settings]\ninterference = "bandwidth"\n'
    keys = {p.strategy: p.key for p in sweep_from_dict(tomllib.loads(text), "x").points}
    assert keys == {
        "first-touch": "9e7a203596be67d1",
        "static": "ecc2b6e258738d7c",
        "all-fast": "3cd905d6d35a437f",
    }
    full = {p.strategy: p for p in sweep_from_dict(tomllib.loads(grid), "x").points}
    assert all(p.level == "controller" for p in full.values())
    assert not {p.key for p in full.values()} & set(keys.values())
    limited = sweep_from_dict(tomllib.loads(text + "node_limit = 5\n"), "x")
    static = next(p for p in limited.points if p.strategy == "static")
    assert dict(static.settings)["node_limit"] == 5
    assert static.config()["settings.node_limit"] == 5


def test_inapplicable_grid_points_are_skipped_and_listed() -> None:
    spec = tomllib.loads(
        """
        [grid]
        model = "vgg19"
        batch = 1
        platform = ["cascadelake-optane", "v100-pcie3"]
        ratio = "4:1"
        strategy = ["first-touch", "unified-memory"]
        """
    )
    sweep = sweep_from_dict(spec, "x")
    asked = {(p.platform, p.strategy) for p in sweep.points if p.role == "grid"}
    assert asked == {(CPU, "first-touch"), ("v100-pcie3", "unified-memory")}
    assert len(sweep.skipped) == 2
    assert "unified-memory does not apply to cascadelake-optane" in sweep.skipped[0]


def test_explicit_points_join_the_grid_and_share_no_key() -> None:
    spec = tomllib.loads(
        """
        [grid]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        strategy = ["all-fast", "first-touch"]
        [[points]]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        strategy = "first-touch"
        [[points]]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        strategy = "all-slow"
        overrides = { "tiers.PMM.write_bw_GBps" = 6.25 }
        """
    )
    sweep = sweep_from_dict(spec, "x")
    # The grid's all-fast at the platform's capacity is the baseline; the first explicit
    # point repeats a grid point; the second adds itself and its own baseline.
    assert [(p.strategy, p.role) for p in sweep.points] == [
        ("all-fast", "grid"),
        ("first-touch", "grid"),
        ("all-slow", "grid"),
        ("all-fast", "baseline"),
    ]
    assert sweep.points[3].overrides == (("tiers.PMM.write_bw_GBps", 6.25),)


def test_example_spec_expands() -> None:
    sweep = load_sweep(REPO / "experiments" / "sweeps" / "example.toml")
    assert sweep.name == "example"
    assert len(sweep.points) == 1 * 1 * 3 * 2 * 4 + 2 + 1 + 1  # grid, baselines, explicit


def test_overrides_walk_tiers_by_name_or_index_and_paths_by_direction() -> None:
    doc = tomllib.loads((REPO / "hwmodels" / "presets" / f"{CPU}.toml").read_text())

    def fail(message: str) -> Any:
        raise ValueError(message)

    apply_override(doc, "tiers.PMM.read_bw_GBps", 10.0, fail)
    apply_override(doc, "tiers.0.write_bw_GBps", 50.0, fail)
    apply_override(doc, "copy_paths.DRAM->PMM.async_bw_GBps", 1.0, fail)
    apply_override(doc, "copy_paths.0.sync_bw_GBps", 9.0, fail)
    apply_override(doc, "compute.efficiency.conv.compute", 0.5, fail)
    # Another unit of the same quantity replaces the preset's spelling.
    apply_override(doc, "tiers.PMM.write_bw_bytes_per_s", 5e9, fail)
    assert "write_bw_GBps" not in doc["tiers"][1]
    assert doc["tiers"][1]["read_bw_GBps"] == 10.0
    assert doc["tiers"][0]["write_bw_GBps"] == 50.0
    assert doc["copy_paths"][1]["async_bw_GBps"] == 1.0
    assert doc["copy_paths"][0]["sync_bw_GBps"] == 9.0
    assert doc["compute"]["efficiency"]["conv"]["compute"] == 0.5
    with pytest.raises(ValueError, match=r"no element 'XPM' \(give one of DRAM, PMM"):
        apply_override(doc, "tiers.XPM.read_bw_GBps", 1.0, fail)
    with pytest.raises(ValueError, match="give one of PMM->DRAM, DRAM->PMM"):
        apply_override(doc, "copy_paths.DRAM->DRAM.sync_bw_GBps", 1.0, fail)
    with pytest.raises(ValueError, match="compute has no table 'peak_GFLOPs'"):
        apply_override(doc, "compute.peak_GFLOPs.fp32", 1.0, fail)


VGG_ON_CPU = "model = 'vgg19'\nplatform = 'cascadelake-optane'\nstrategy = 'all-slow'"
BAD_SPECS = [
    ("[grid]\nmodle = ['vgg19']", "grid.modle: unknown key"),
    ("[grids]\nmodel = 1", "grids: unknown key"),
    ("[sweep]\nnmae = 'x'\n[grid]", "sweep.nmae: unknown key"),
    ("[settings]\ntime_limit = 3\n[grid]", "settings.time_limit: unknown key"),
    ("[settings]\ntime_limit_s = 0\n[grid]", "settings.time_limit_s: time_limit_s must be a"),
    ("[settings]\ngap = 2\n[grid]", "settings.gap: gap must be a number in [0, 1]"),
    ("[settings]\nlayout = 1\n[grid]", "settings.layout: must be bool, got 1"),
    ("[settings]\nrecompute_depth = 0\n[grid]", "settings.recompute_depth: recompute_depth"),
    ("[settings]\ncapacity = 3\n[grid]", "settings.capacity: unknown key"),
    ("[settings]\ncontention = false\n[grid]", "settings.contention: the interference level"),
    (
        "[settings]\nsolver = 'NOPE'\n[grid]\nmodel='vgg19'\nbatch=1\nplatform='cascadelake-optane'\nstrategy='static'",
        "settings.solver: solver 'NOPE' is not installed",
    ),
    (
        "[grid]\nbatch = [1]\nplatform = ['cascadelake-optane']\nstrategy = ['static']",
        "grid: missing key 'model'",
    ),
    (
        "[grid]\nmodel = ['resnet51']\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'",
        "grid.model: unknown model 'resnet51'",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = '8'\nplatform = 'cascadelake-optane'\nstrategy = 'static'",
        "grid.batch: must be a positive integer",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\nratio = '4:0'",
        "grid.ratio: capacity '4:0': ratio 4:0: slow must be >= 0 and fast > 0",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\nratio = '4:1'\nfast_bytes = 100",
        "grid: give ratio or fast_bytes, not both",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'nowhere.toml'\nstrategy = 'static'",
        "grid.platform: 'nowhere.toml' is neither a platform preset",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\n[grid.overrides]\n'tiers.PMM.read_bw_GBps' = 3.0",
        "grid.overrides.tiers.PMM.read_bw_GBps: must be a non-empty list",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\n[grid.overrides]\n'tiers.HBM.read_bw_GBps' = [3.0]",
        "grid.overrides.tiers.HBM.read_bw_GBps: platform.tiers has no element 'HBM'",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\n[grid.overrides]\n'tiers.PMM.read_bw_GBps' = [-3.0]",
        "grid.overrides: platform cascadelake-optane: tiers[1] (PMM): read_bw_GBps must be a finite number > 0",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\n[grid.overrides]\n'tiers.PMM.read_bandwidth' = [3.0]",
        "unknown field(s) read_bandwidth (with tiers.PMM.read_bandwidth = 3.0)",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'static'\n[grid.overrides]\n'name' = [1979-05-27]",
        "grid.overrides.name: 1979-05-27 is not a number",
    ),
    (
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'all-fast'\ndtype = 'fp16'",
        "grid.dtype: platform 'cascadelake-optane' has no peak rate for 'fp16'",
    ),
    (
        "[[points]]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'unified-memory'",
        "points[0]: unified-memory does not apply to cascadelake-optane",
    ),
    (
        "[[points]]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'cascadelake-optane'\nstrategy = 'sync'\nwindow = 3",
        "points[0].window: unknown key",
    ),
    ("[sweep]\nname = 'x'", "give a [grid] table, [[points]], or both"),
    ("[grid\n", "not valid TOML"),
    # numbers no 64-bit column holds, and text Python's TOML reader gives up on
    (f"[grid]\n{VGG_ON_CPU}\nbatch = {2**63}", "grid.batch: integer 9223372036854775808 does not"),
    (f"[grid]\n{VGG_ON_CPU}\nbatch = {10**40}", "grid.batch: integer about 2**132 does not fit 64"),
    (f"[sweep]\nseed = -{2**64}\n[grid]\n{VGG_ON_CPU}\nbatch = 1", "sweep.seed: integer"),
    (f"[settings]\ntime_limit_s = {10**400}\n[grid]", "settings.time_limit_s: integer about"),
    (f"[settings]\nwindow = {2**63}\n[grid]", "settings.window: integer 9223372036854775808"),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = 1\n[grid.overrides]\n'compute.cores' = [1, {2**64}]",
        "grid.overrides.compute.cores[1]: integer 18446744073709551616 does not fit 64 bits",
    ),
    ("[grid]\nbatch = " + "9" * 5000, "not valid TOML: an integer with too many digits"),
    ("[grid]\nbatch = " + "[" * 100_000 + "]" * 100_000, "not valid TOML: arrays or tables nested"),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = 1\n[grid.overrides]\n'tiers.\u00b2.read_bw_GBps' = [3.0]",
        "grid.overrides.tiers.\u00b2.read_bw_GBps: platform.tiers has no element '\u00b2'",
    ),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = 1\n[grid.overrides]\n'tiers.{'9' * 5000}.read_bw_GBps' = [3.0]",
        "grid.overrides.tiers.99999",
    ),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = true",
        "grid.batch: must be a positive integer, got True",
    ),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = 1\n[grid.overrides]\n'tiers.PMM.read_bw_GBps' = [1e300]",
        "read_bw_GBps = 1e+300 is out of range",
    ),
    (
        f"[grid]\n{VGG_ON_CPU}\nbatch = 1\n[grid.overrides]\n'kernel_tiers' = [['PMM']]",
        "kernels cannot reach the fastest tier 'DRAM'",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_SPECS)
def test_bad_specs_give_one_line_naming_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SweepSpecError) as info:
        load_sweep(path)
    text_of = str(info.value)
    assert text_of.startswith(f"{path}: ")
    assert message in text_of
    assert "\n" not in text_of


def test_platform_files_are_found_beside_the_spec_and_take_overrides_in_any_unit(
    tmp_path: Path,
) -> None:
    mine = replace(load_preset(CPU), name="my-box")
    (tmp_path / "box.toml").write_text(platform_to_toml(mine), encoding="utf-8")  # SI keys
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
        [grid]
        model = "vgg19"
        batch = 1
        platform = "box.toml"
        fast_bytes = [1000000000, 2000000000]
        strategy = "first-touch"
        [grid.overrides]
        "tiers.PMM.read_bw_GBps" = [20.0]
        """,
        encoding="utf-8",
    )
    sweep = load_sweep(spec)
    grid = [p for p in sweep.points if p.role == "grid"]
    assert [(p.ratio, p.fast_bytes) for p in grid] == [(None, 10**9), (None, 2 * 10**9)]
    assert all(p.platform == "box.toml" and p.config()["platform_name"] == "my-box" for p in grid)
    pmm = grid[0].platform_si["tiers"][1]
    assert pmm["read_bw_bytes_per_s"] == 20e9
    assert pmm["write_bw_bytes_per_s"] == mine.tiers[1].write_bw_bytes_per_s


def test_platform_files_that_are_not_utf8_or_toml_fail_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        "[grid]\nmodel = 'vgg19'\nbatch = 1\nplatform = 'box.toml'\nstrategy = 'all-slow'\n",
        encoding="utf-8",
    )
    for data, message in [
        (b"name = '\xff'", "platform 'box.toml': not valid TOML: not UTF-8 text"),
        (b"a = " + b"9" * 5000, "platform 'box.toml': not valid TOML: an integer with too many"),
        (b"a = " + b"[" * 100_000, "platform 'box.toml': not valid TOML: arrays or tables nested"),
    ]:
        (tmp_path / "box.toml").write_bytes(data)
        with pytest.raises(SweepSpecError) as info:
            load_sweep(spec)
        assert str(info.value).startswith(f"{spec}: grid.platform: {message}")
        assert "\n" not in str(info.value)


def test_the_full_model_keys_the_controller_and_copy_thread() -> None:
    # At the full model two points that differ only by the platform's controller (or its copy
    # thread) are two points; at the bandwidth level, which neither shapes, they are one.
    def keys(level: str, slope: list[float]) -> set[str]:
        text = f"""
        [grid]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        ratio = "4:1"
        strategy = "static"
        [grid.overrides]
        "copy_thread.latency_slope" = {slope}
        [settings]
        interference = "{level}"
        """
        sweep = sweep_from_dict(tomllib.loads(text), "x")
        return {p.key for p in sweep.points if p.role == "grid"}

    assert len(keys("controller", [0.1, 0.3])) == 2
    assert len(keys("bandwidth", [0.1, 0.3])) == 1


def test_an_unknown_interference_level_is_one_line() -> None:
    text = """
    [grid]
    model = "vgg19"
    batch = 1
    platform = "cascadelake-optane"
    strategy = "static"
    [settings]
    interference = "bus"
    """
    with pytest.raises(SweepSpecError, match=r"settings\.interference.*unknown interference level"):
        sweep_from_dict(tomllib.loads(text), "x")


def test_every_planner_setting_reaches_the_points_that_read_it() -> None:
    """``[settings]`` sets every field of PlanSettings but the capacity and profile; a MILP
    point carries the MILP's, a vdnn point vDNN's, and the engine plans with exactly them."""
    from dataclasses import fields

    from tmsim.planners import PlanSettings
    from tmsim.sweeps.engine import _plan_settings
    from tmsim.sweeps.settings import MILP_KEYS, PLAN_KEYS, VDNN_KEYS

    assert set(PLAN_KEYS) == {f.name for f in fields(PlanSettings)} - {"capacity", "profile"}
    assert set(MILP_KEYS) | set(VDNN_KEYS) == set(PLAN_KEYS)
    changed = {
        "solver": "highs",
        "time_limit_s": 9.5,
        "gap": 0.2,
        "node_limit": 7,
        "lp_iterations": 11,
        "window": 3,
        "lp_bound": True,
        "warm_start": False,
        "layout": False,
        "max_rounds": 2,
        "recompute_depth": 4,
        "energy_weight_s_per_j": 0.5,
        "host_kernels": False,
        "verbose": True,
        "offload_min_bytes": 5,
        "offload_all": True,
        "prefetch_ahead": 4,
    }
    assert set(changed) == set(PLAN_KEYS)
    for name, value in changed.items():
        assert getattr(PlanSettings(), name) != value, name
    lines = "\n".join(
        f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}"
        for k, v in changed.items()
    )
    spec = (
        '[grid]\nmodel = "vgg19"\nbatch = 2\nplatform = "rtx2080ti-pcie3"\nratio = "4:1"\n'
        'strategy = ["static", "vdnn", "checkpoint"]\n[settings]\n' + lines + "\n"
    )
    points = {p.strategy: p for p in sweep_from_dict(tomllib.loads(spec), "x").points}
    for strategy, keys in (("static", MILP_KEYS), ("vdnn", VDNN_KEYS), ("checkpoint", ())):
        point = points[strategy]
        assert dict(point.settings) == {k: changed[k] for k in keys}, strategy
        planned = _plan_settings(point)
        for k in PLAN_KEYS:
            expected = changed[k] if k in keys else getattr(PlanSettings(), k)
            assert getattr(planned, k) == expected, (strategy, k)
            assert point.config()[f"settings.{k}"] == (changed[k] if k in keys else None)
    # a setting the strategy does not read leaves its key alone; one it reads changes it
    base = {p.strategy: p.key for p in sweep_from_dict(tomllib.loads(spec), "x").points}
    other = spec.replace("prefetch_ahead = 4", "prefetch_ahead = 5")
    moved = {p.strategy: p.key for p in sweep_from_dict(tomllib.loads(other), "x").points}
    assert moved["static"] == base["static"] and moved["checkpoint"] == base["checkpoint"]
    assert moved["vdnn"] != base["vdnn"]


def test_a_field_set_in_two_units_by_the_overrides_is_refused() -> None:
    """``capacity_GiB`` and ``capacity_bytes`` of one tier would each win by key order."""
    spec = """
    [grid]
    model = "vgg19"
    batch = 2
    platform = "cascadelake-optane"
    strategy = "all-slow"
    [grid.overrides]
    "tiers.DRAM.capacity_GiB" = [96]
    "tiers.DRAM.capacity_bytes" = [5000000000]
    """
    with pytest.raises(SweepSpecError, match="both set capacity"):
        sweep_from_dict(tomllib.loads(spec.replace("\n    ", "\n")), "x")
