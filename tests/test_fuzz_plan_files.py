"""Fuzzing plan files (Hypothesis): ``tmsim simulate plan.json`` on a mutated plan file either
fails with one line or replays a plan that validates for the plan's own graph.

The base is a real plan file: vDNN's plan of a small spilling step on the RTX 2080 Ti preset,
whose graph file sits beside it. Mutations come from :mod:`test_fuzz_mutations` (hostile
values, deleted and unknown fields, corrupt bytes) and from here: truncated files, identities
naming another graph (its file, name or fingerprint), and ``--file`` overrides pointing at a
graph one tensor 4 bytes larger or one kernel 1 FLOP heavier. Never an exception other than
the one-line error, never a plan accepted for a graph other than its own. A second fuzzer
does the same for the graph identity of a zoo plan, rebuilt from the zoo.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_mutations import mutated_bytes
from tiny_graphs import MB, spill_step

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.cli.simulate import plan_graph
from tmsim.errors import TmsimError
from tmsim.planners import plan
from tmsim.planners.settings import PlanSettings
from tmsim.plans.files import load_plan, plan_to_dict
from tmsim.plans.validate import validate
from tmsim.workload.files import graph_to_dict, save_graph
from tmsim.workload.identity import file_identity, graph_sha256
from tmsim.workload.zoo import training_graph_of

GPU = load_preset("rtx2080ti-pcie3")
CPU = load_preset("cascadelake-optane")
GRAPH = spill_step()
SHA = graph_sha256(GRAPH)
BASE = plan_to_dict(
    plan("vdnn", GRAPH, GPU, PlanSettings(capacity=Capacity.of_bytes(250 * MB))).with_identity(
        file_identity(GRAPH, "g.json")
    )
)
#: Graph files beside the plan that are not its graph: name -> how they differ.
OTHERS = ("bigger.json", "heavier.json")
HEX = "0123456789abcdef"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plan's graph file ``g.json`` and the two impostors of :data:`OTHERS`."""
    d = tmp_path_factory.mktemp("fuzz_plans")
    save_graph(GRAPH, d / "g.json")
    bigger = graph_to_dict(GRAPH)
    bigger["tensors"][3]["size_bytes"] += 4
    heavier = graph_to_dict(GRAPH)
    heavier["kernels"][0]["flops"] += 1
    for name, doc in zip(OTHERS, (bigger, heavier), strict=True):
        (d / name).write_text(json.dumps(doc))
    return d


def _doc_text(doc: Any) -> bytes:
    return json.dumps(doc).encode()


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    text = _doc_text(BASE)
    return text[: draw(st.integers(0, len(text) - 1))]


@st.composite
def other_graph(draw: st.DrawFn) -> bytes:
    """The base plan whose identity names another graph, or the right one wrongly."""
    doc = copy.deepcopy(BASE)
    ident = doc["graph"]
    field = draw(st.sampled_from(("path", "sha256", "name", "version1", "zoo")))
    if field == "path":
        ident["args"]["path"] = draw(st.sampled_from((*OTHERS, "missing.json", "/", "..")))
    elif field == "sha256":
        ident["sha256"] = "".join(draw(st.lists(st.sampled_from(HEX), min_size=64, max_size=64)))
    elif field == "name":
        ident["name"] = draw(st.sampled_from(("tiny", "spill ", "resnet50-b1")))
    elif field == "version1":  # an old file: the name alone
        doc["version"], doc["graph"] = 1, draw(st.sampled_from(("spill", "other")))
        del doc["recomputes"], doc["host_kernels"]  # a version 1 file has neither
    else:
        ident["source"], ident["args"] = "zoo", {"model": "resnet50", "batch": 1}
    return _doc_text(doc)


#: Mutations per file: one, as ``mutate_once`` inserts the containers it draws ({}, [1, 2])
#: without copying them, and a second mutation could change them for every later draw.
ONE = 1

plan_files = st.one_of(
    mutated_bytes(BASE, "json", max_mutations=ONE),
    truncated(),
    other_graph(),
    st.just(_doc_text(BASE)),
)


def simulate(argv: list[str]) -> tuple[int, str, str]:
    """Run ``tmsim simulate`` in process: exit code, stdout, stderr (exceptions propagate)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", *argv])
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=150, deadline=None)
@given(data=plan_files, override=st.sampled_from((None, "g.json", *OTHERS)))
def test_a_plan_file_replays_its_own_graph_or_fails_in_one_line(
    workdir: Path, data: bytes, override: str | None
) -> None:
    path = workdir / "plan.json"
    path.write_bytes(data)
    argv = [str(path), "--interference", "none", "--json"]
    if override is not None:
        argv += ["--file", str(workdir / override)]
    code, out, err = simulate(argv)
    if code != 0:
        assert code == 2 and err.startswith("tmsim: error: ") and err.count("\n") == 1, err
        return
    accepted = load_plan(path)
    info = json.loads(out)
    assert info["simulated_s"] == pytest.approx(accepted.predicted_s, rel=1e-9)
    if accepted.graph_identity is None:
        # A version-1 file has no fingerprint: it is replayed on the word of --file, which it
        # needs, and the command says so.
        assert override is not None and "version-1" in err and err.count("\n") == 1
        return
    # Accepted: the plan is for this very graph, validates for it, and replays as predicted.
    assert override in (None, "g.json"), f"a plan accepted for {override}"
    assert accepted.graph_identity.sha256 == SHA and err == ""
    assert validate(accepted, GRAPH, GPU).ok


def test_the_base_and_its_impostors(workdir: Path) -> None:
    """The fuzzer's base replays as it is; each impostor graph is refused by fingerprint."""
    path = workdir / "base.json"
    path.write_bytes(_doc_text(BASE))
    assert simulate([str(path)])[0] == 0
    for other in OTHERS:
        code, _, err = simulate([str(path), "--file", str(workdir / other)])
        assert code == 2 and SHA in err and err.count("sha256") == 2, err


# ---------------------------------------------------------------------- zoo identities
ZOO_GRAPH = training_graph_of("resnet50", 1)
ZOO_SHA = graph_sha256(ZOO_GRAPH)
ZOO_BASE = plan_to_dict(plan("all-fast", ZOO_GRAPH, CPU))


@st.composite
def zoo_identity(draw: st.DrawFn) -> Any:
    """The zoo plan's identity, mutated: hostile values, or other valid builder arguments."""
    ident = copy.deepcopy(ZOO_BASE["graph"])
    if draw(st.booleans()):
        wrapped = {"graph": ident}
        data = draw(mutated_bytes(wrapped, "json", max_mutations=ONE))
        try:
            return json.loads(data)["graph"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
    key = draw(st.sampled_from(("batch", "dtype", "image_hw", "classes", "model", "extra")))
    value = {
        "batch": st.sampled_from((2, 0, -1, 2**40, True)),
        "dtype": st.sampled_from(("fp16", "fp64", "int8", "nope")),
        "image_hw": st.sampled_from(([225, 224], [224], [1, 1], [2**40, 2**40])),
        "classes": st.sampled_from((999, 1, 0)),
        "model": st.sampled_from(("resnet200", "vgg19", "nosuchnet")),
        "extra": st.sampled_from((64, None, True)),
    }[key]
    ident["args"]["transition_channels" if key == "extra" else key] = draw(value)
    return ident


@settings(max_examples=40, deadline=None)
@given(ident=zoo_identity())
def test_a_zoo_identity_rebuilds_its_own_graph_or_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, ident: Any
) -> None:
    path = tmp_path_factory.getbasetemp() / "zoo_plan.json"
    path.write_text(json.dumps({**ZOO_BASE, "graph": ident}))
    args = argparse.Namespace(plan=str(path), model=None, file=None, batch=None, dtype=None)
    try:
        graph = plan_graph(load_plan(path), args)
    except TmsimError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert graph_sha256(graph) == ZOO_SHA and graph == ZOO_GRAPH
    assert validate(load_plan(path), graph, CPU).ok
