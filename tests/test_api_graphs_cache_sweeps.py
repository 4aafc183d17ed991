"""The API the command line stands on: graph files and a plan's graph, the 2LM replay, sweeps
run step by step, compare's progress, and the small vocabulary (levels, sizes, platform
documents) the argument parsers use."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmsim
from hwmodels.serialize import platform_from_dict
from tmsim.api.graphs import graph_summary, match_graph
from tmsim.api.inputs import platform_document
from tmsim.api.sweeps import describe_sweep, expand_sweep, run_sweep_in

TINY = tmsim.graph("vgg19", batch=2)
OPTANE = tmsim.platform()
TWO_LM = tmsim.platform("cascadelake-2lm")


def test_load_graph_reads_a_file_even_one_named_like_a_zoo_model(tmp_path: Path) -> None:
    path = tmp_path / "vgg19"
    tmsim.save(TINY, tmp_path / "g.json")
    (tmp_path / "g.json").rename(path)
    assert tmsim.load_graph(path) == TINY
    with pytest.raises(tmsim.TmsimError, match=r"^'nothing ': No such file or directory$"):
        tmsim.load_graph("nothing ")
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(tmsim.TmsimError, match=r"x\.json"):
        tmsim.load_graph(tmp_path / "x.json")


def test_a_plan_names_its_graph_file_and_builds_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph_file = tmp_path / "g.json"
    tmsim.save(TINY, graph_file)
    loaded = tmsim.load_graph(graph_file)
    with monkeypatch.context() as here:  # the file as this process sees it when it plans
        here.chdir(tmp_path)
        made = tmsim.plan(loaded, OPTANE, "greedy", fast="4:1", graph_file="g.json")
    assert made.graph_identity is not None and made.graph_identity.source == "file"
    tmsim.save(made, tmp_path / "plan.json")
    again = tmsim.load_plan(tmp_path / "plan.json")
    # the relative path is found beside the plan file, not in the working directory
    assert tmsim.graph_of(again, near=tmp_path) == TINY
    with pytest.raises(tmsim.TmsimError, match="not found"):
        tmsim.graph_of(again)
    zoo_plan = tmsim.plan(TINY, OPTANE, "all-slow")
    assert tmsim.graph_of(zoo_plan) == TINY


def test_a_graph_built_in_memory_is_checked_but_not_built_again() -> None:
    custom = tmsim.graph("resnet50", batch=1, classes=10)  # not the zoo's default build
    made = tmsim.plan(custom, OPTANE, "all-slow")
    with pytest.raises(tmsim.TmsimError, match=r"^the plan is for graph .* built in memory"):
        tmsim.graph_of(made)
    match_graph(made, custom)
    other = tmsim.graph("resnet50", batch=1)
    with pytest.raises(tmsim.TmsimError, match=r"sha256 .* but the graph given is 'resnet50-b1'"):
        match_graph(made, other)


def test_graph_summary_counts_what_the_graph_holds() -> None:
    s = graph_summary(TINY)
    assert s["kernels"] == len(TINY.kernels) == sum(s["kernels_by_phase"].values())
    assert s["peak_live_bytes"] == TINY.peak_live_bytes
    assert sum(s["bytes_by_role"].values()) == sum(t.size_bytes for t in TINY.tensors)
    json.dumps(s)  # JSON-ready


def test_the_2lm_replay_through_the_api(tmp_path: Path) -> None:
    warm = tmsim.simulate_cache(TINY, TWO_LM)
    cold = tmsim.simulate_cache(TINY, TWO_LM, warm=False)
    assert 0 <= cold.hit_rate <= warm.hit_rate <= 1
    s = warm.summary()
    assert s["hits"] + s["misses"] == int(warm.records["hits"].sum() + warm.records["misses"].sum())
    assert warm.step_time_s == s["simulated_s"] > 0
    # the cache never beats all operands on its own tier, without contention
    free = tmsim.simulate_cache(TINY, TWO_LM, interference="none")
    assert free.step_time_s >= free.summary()["all_cache_s"] * (1 - 1e-9)
    assert "hit rate" in repr(warm) and "<table>" in warm._repr_html_()
    tmsim.save(warm, tmp_path / "t.parquet")
    assert len(pd.read_parquet(tmp_path / "t.parquet")) == len(TINY.kernels)
    with pytest.raises(tmsim.TmsimError, match="cache"):
        tmsim.simulate_cache(TINY, OPTANE)
    with pytest.raises(tmsim.TmsimError, match="block_bytes"):
        tmsim.simulate_cache(TINY, TWO_LM, block_bytes="4k")  # type: ignore[arg-type]


GRID = {
    "model": ["vgg19"],
    "batch": [2],
    "platform": ["cascadelake-optane"],
    "strategy": ["all-slow", "greedy"],
    "ratio": ["4:1"],
}


def test_a_sweep_run_step_by_step_resumes(tmp_path: Path) -> None:
    sweep = expand_sweep({"grid": GRID})
    assert len(sweep.points) == 3  # two strategies and their all-fast baseline
    assert "3 points (2 asked for, 1 all-fast baselines), 0 finished, 3 to compute" in (
        describe_sweep(sweep, tmp_path)
    )
    seen: list[int] = []
    first = run_sweep_in(sweep, tmp_path, limit=1, progress=lambda c: seen.append(c.pending))
    assert first.table is None and first.counts.pending > 0 and seen
    second = run_sweep_in(sweep, tmp_path)
    assert second.table is not None and second.counts.pending == 0
    assert second.counts.reused == first.counts.evaluated
    assert ", 3 finished, 0 to compute" in describe_sweep(sweep, tmp_path)
    with pytest.raises(tmsim.TmsimError, match="limit"):
        run_sweep_in(sweep, tmp_path, limit=0)
    with pytest.raises(tmsim.TmsimError, match="table_format"):
        run_sweep_in(sweep, tmp_path, table_format="xlsx")


def test_compare_reports_each_strategy_as_it_starts() -> None:
    calls: list[tuple[str, int, int]] = []
    names = ["all-fast", "all-slow", "greedy"]
    tmsim.compare(TINY, OPTANE, names, fast="4:1", progress=lambda *a: calls.append(a))
    assert calls == [(n, i, 3) for i, n in enumerate(names)]
    with pytest.raises(tmsim.TmsimError, match="progress"):
        tmsim.compare(TINY, OPTANE, names, progress=3)  # type: ignore[arg-type]


def test_the_vocabulary_of_the_argument_parsers() -> None:
    assert tmsim.InterferenceLevel.parse(" Bandwidth ") is tmsim.InterferenceLevel.BANDWIDTH
    assert tmsim.InterferenceLevel.default() is tmsim.InterferenceLevel.CONTROLLER
    with pytest.raises(tmsim.TmsimError, match="levels are none, bandwidth, controller"):
        tmsim.InterferenceLevel.parse("most")
    assert tmsim.Capacity.parse_size("1.5KiB") == 1536
    with pytest.raises(tmsim.TmsimError):
        tmsim.Capacity.parse_size("4:1")
    assert platform_from_dict(platform_document(OPTANE), "again") == OPTANE


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        st.text(max_size=8),
        st.sampled_from(["vgg19", "controller", "\0", ".", "x" * 300]),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    ),
    st.sampled_from(["image_hw", "classes", "batch_norm", "nonsense"]),
)
def test_any_argument_gives_an_answer_or_a_one_line_error(value: object, option: str) -> None:
    calls = (
        lambda: tmsim.load_graph(value),  # type: ignore[arg-type]
        lambda: tmsim.graph_of(value),  # type: ignore[arg-type]
        lambda: tmsim.graph("vgg19", batch=1, **{option: value}),
        lambda: tmsim.simulate_cache(TINY, value),  # type: ignore[arg-type]
        lambda: tmsim.simulate_cache(TINY, TWO_LM, block_bytes=value, interference="none"),  # type: ignore[arg-type]
        lambda: tmsim.simulate_cache(TINY, TWO_LM, warm=value),  # type: ignore[arg-type]
        lambda: expand_sweep(value),  # type: ignore[arg-type]
        lambda: tmsim.plan(TINY, OPTANE, "all-slow", graph_file=value),  # type: ignore[arg-type]
    )
    for call in calls:
        try:
            call()
        except tmsim.TmsimError as exc:
            assert "\n" not in str(exc)
