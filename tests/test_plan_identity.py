"""A plan's graph identity: fingerprints, zoo recognition, rebuilding, and the strict plan-file
reader that carries them (version 2, and version 1 still read)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners import plan
from tmsim.planners.assemble import assemble_plan
from tmsim.plans.files import VERSION, load_plan, plan_from_dict, plan_to_dict, save_plan
from tmsim.plans.values import Plan, PlanFileError
from tmsim.workload.files import graph_from_dict, graph_to_dict, save_graph
from tmsim.workload.graph import Graph
from tmsim.workload.identity import (
    GraphIdentity,
    GraphIdentityError,
    Source,
    check_graph,
    file_graph,
    file_identity,
    graph_sha256,
    identity_from_dict,
    identity_of,
    identity_to_dict,
    rebuild,
    zoo_graph,
)
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import training_graph_of
from tmsim.workload.zoo.inception import inception_v4
from tmsim.workload.zoo.resnet import resnet50

CPU = load_preset("cascadelake-optane")


@pytest.fixture(scope="module")
def zoo() -> Graph:
    return training_graph_of("resnet50", 2)


def changed(graph: Graph, edit: str) -> Graph:
    doc = graph_to_dict(graph)
    if edit == "size":
        doc["tensors"][0]["size_bytes"] += 4
        doc["tensors"][0].pop("shape", None)
    elif edit == "flops":
        doc["kernels"][0]["flops"] = doc["kernels"][0].get("flops", 0) + 1
    elif edit == "op":
        doc["kernels"][0]["op"] = "other"
    elif edit == "name":
        doc["name"] = "other"
    return graph_from_dict(doc)


# ---------------------------------------------------------------------- fingerprints
def test_the_fingerprint_is_the_canonical_json_hash(mlp: Graph) -> None:
    text = json.dumps(graph_to_dict(mlp), sort_keys=True, separators=(",", ":"))
    assert graph_sha256(mlp) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("edit", ["size", "flops", "op", "name"])
def test_every_change_changes_the_fingerprint(mlp: Graph, edit: str) -> None:
    assert graph_sha256(changed(mlp, edit)) != graph_sha256(mlp)


def test_equal_graphs_share_a_fingerprint(zoo: Graph) -> None:
    again = training_graph_of("resnet50", 2)
    assert again is not zoo and graph_sha256(again) == graph_sha256(zoo)


# ---------------------------------------------------------------------- identities
def test_a_zoo_build_is_recognized_with_every_argument(zoo: Graph) -> None:
    ident = identity_of(zoo)
    assert ident.source is Source.ZOO and ident.name == "resnet50-b2"
    assert ident.args == {
        "model": "resnet50",
        "batch": 2,
        "image_hw": [224, 224],
        "dtype": "fp32",
        "classes": 1000,
    }
    assert rebuild(ident) == zoo


def test_dtype_and_image_size_are_recognized() -> None:
    g = training_graph(resnet50(1, image_hw=(64, 96), dtype="fp16"))
    ident = identity_of(g)
    assert ident.source is Source.ZOO
    assert ident.args["dtype"] == "fp16" and ident.args["image_hw"] == [64, 96]


@pytest.mark.parametrize(
    "graph",
    [
        training_graph(resnet50(1, classes=10)),
        training_graph(inception_v4(1, image_hw=(75, 75), batch_norm=True)),
    ],
    ids=["classes", "batch_norm"],
)
def test_other_builds_are_unknown_but_fingerprinted(graph: Graph) -> None:
    ident = identity_of(graph)
    assert ident.source is Source.UNKNOWN and ident.args == {}
    assert ident.sha256 == graph_sha256(graph)
    with pytest.raises(GraphIdentityError, match="built in memory"):
        rebuild(ident)


def test_a_graph_named_like_a_zoo_build_is_not_taken_for_one(zoo: Graph, mlp: Graph) -> None:
    impostor = changed(zoo, "flops")
    assert impostor.name == zoo.name and identity_of(impostor).source is Source.UNKNOWN
    assert identity_of(mlp) == GraphIdentity("mlp", graph_sha256(mlp))


def test_model_specific_arguments_are_recorded_and_rebuilt() -> None:
    g, ident = zoo_graph("densenet121", 1, image_hw=[64, 64], transition_channels=16)
    assert ident.args["transition_channels"] == 16 and ident.args["image_hw"] == [64, 64]
    back = identity_from_dict(json.loads(json.dumps(identity_to_dict(ident))))
    assert back == ident and rebuild(back) == g


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"batch": True}, "argument 'batch' must be int"),
        ({"batch": 0}, "cannot be built: network 'resnet50': batch must be"),
        ({"image_hw": [224]}, "argument 'image_hw'"),
        ({"dtype": 3}, "argument 'dtype' must be str"),
        ({"batch_norm": True}, "takes no argument 'batch_norm'"),
        ({"model": "nosuchnet"}, "unknown model 'nosuchnet'"),
        ({"batch": 2**70}, "zoo model 'resnet50'"),
    ],
)
def test_bad_zoo_arguments_are_one_line_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphIdentityError, match=message) as info:
        zoo_graph(**{"model": "resnet50", "batch": 1, **args})
    assert "\n" not in str(info.value)


def test_a_file_identity_is_found_beside_its_base(tmp_path: Path, mlp: Graph) -> None:
    save_graph(mlp, tmp_path / "g.json")
    ident = file_identity(mlp, "g.json")
    assert rebuild(ident, tmp_path) == mlp
    assert file_graph(tmp_path / "g.json") == (mlp, file_identity(mlp, tmp_path / "g.json"))
    with pytest.raises(GraphIdentityError, match=r"graph file 'g\.json' not found"):
        rebuild(ident, tmp_path / "elsewhere")
    save_graph(changed(mlp, "size"), tmp_path / "g.json")
    with pytest.raises(GraphIdentityError) as info:
        rebuild(ident, tmp_path, "plan 'p.json'")
    message = str(info.value)
    assert message.startswith("plan 'p.json' is for graph 'mlp' with sha256 " + ident.sha256)
    assert graph_sha256(changed(mlp, "size")) in message


def test_check_graph_names_both_fingerprints(mlp: Graph) -> None:
    other = changed(mlp, "op")
    with pytest.raises(GraphIdentityError) as info:
        check_graph(identity_of(mlp), other, "plan 'p.json'")
    assert graph_sha256(mlp) in str(info.value) and graph_sha256(other) in str(info.value)
    check_graph(identity_of(mlp), graph_from_dict(graph_to_dict(mlp)), "plan 'p.json'")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"extra": 1}, "unknown field 'extra'"),
        ({"sha256": None}, "field 'sha256'"),
        ({"sha256": "A" * 64}, "64 lowercase hexadecimal"),
        ({"sha256": "a" * 63}, "64 lowercase hexadecimal"),
        ({"name": ""}, "field 'name'"),
        ({"source": "web"}, "field 'source'"),
        ({"args": []}, "field 'args'"),
        ({"source": "file", "args": {}}, "a graph file's 'args'"),
        ({"source": "file", "args": {"path": "a\0b"}}, "a graph file's 'args'"),
        ({"source": "unknown", "args": {"path": "g.json"}}, "takes no 'args'"),
        ({"args": {"model": "resnet50", "batch": 1.0}}, "argument 'batch' must be int"),
    ],
)
def test_identity_documents_are_read_strictly(
    zoo: Graph, edit: dict[str, Any], message: str
) -> None:
    doc = {**identity_to_dict(identity_of(zoo)), **edit}
    with pytest.raises(GraphIdentityError, match=message):
        identity_from_dict(doc)
    missing = identity_to_dict(identity_of(zoo))
    del missing["args"]
    with pytest.raises(GraphIdentityError, match="missing field 'args'"):
        identity_from_dict(missing)


# ---------------------------------------------------------------------- plans
@pytest.fixture(scope="module")
def made(zoo: Graph) -> Plan:
    return plan("greedy", zoo, CPU)


def test_planners_record_the_identity_and_files_keep_it(
    made: Plan, zoo: Graph, tmp_path: Path
) -> None:
    assert made.graph_identity == identity_of(zoo)
    save_plan(made, tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["version"] == VERSION == 4 and doc["graph"]["sha256"] == graph_sha256(zoo)
    assert load_plan(tmp_path / "p.json") == made


def test_a_plan_without_identity_is_not_written(made: Plan) -> None:
    with pytest.raises(PlanFileError, match="does not say which graph"):
        plan_to_dict(replace(made, graph_identity=None))
    with pytest.raises(PlanFileError, match="its identity names 'resnet50-b2'"):
        plan_to_dict(replace(made, graph="other"))


def test_with_identity_takes_only_the_same_graph(made: Plan, zoo: Graph, mlp: Graph) -> None:
    ident = file_identity(zoo, "g.json")
    assert made.with_identity(ident).graph_identity == ident
    with pytest.raises(PlanFileError, match="not 'mlp'"):
        made.with_identity(identity_of(mlp))
    with pytest.raises(PlanFileError, match="with sha256"):
        made.with_identity(replace(ident, sha256="0" * 64))


def test_assemble_plan_checks_an_identity_given(mlp: Graph) -> None:
    cost = CostModel(mlp, CPU)
    ops = [0] * cost.op_tensor.size
    initial = {mlp.tensor_index(t.name): (0,) for t in mlp.tensors if t.role.value != "activation"}
    given = GraphIdentity(mlp.name, graph_sha256(mlp), Source.FILE, {"path": "mlp.json"})
    assert assemble_plan(cost, "x", 10**9, ops, initial, [], identity=given).graph_identity == (
        given
    )
    with pytest.raises(TmsimError, match="not the graph planned"):
        assemble_plan(cost, "x", 10**9, ops, initial, [], identity=replace(given, sha256="1" * 64))


def test_version_1_files_are_read_without_identity(made: Plan) -> None:
    doc = plan_to_dict(made)
    doc["version"], doc["graph"] = 1, "resnet50-b2"
    del doc["recomputes"], doc["host_kernels"]  # a version 1 file has neither
    old = plan_from_dict(doc)
    assert old.graph_identity is None and replace(old, graph_identity=made.graph_identity) == made
    doc["graph"] = identity_to_dict(identity_of(training_graph_of("resnet50", 2)))
    with pytest.raises(PlanFileError, match="field 'graph' must be a string"):
        plan_from_dict(doc)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("fast_limit_bytes",), True, "'fast_limit_bytes' must be an integer"),
        (("fast_limit_bytes",), 1.0, "'fast_limit_bytes' must be an integer"),
        (("fast_limit_bytes",), -1, r"in \[0, 2\*\*63\)"),
        (("fast_limit_bytes",), 2**63, r"in \[0, 2\*\*63\)"),
        (("residency", 0, 2), False, r"'residency\[0\]' must be an integer"),
        (("residency", 0, 3), 1e300, r"'residency\[0\]' must be an integer"),
        (("residency", 0), ["input", "DRAM", 0], r"must list 4 values"),
        (("operand_tiers", 0, 0), 0, r"'operand_tiers\[0\]' must be a string"),
        (("initial_tiers",), [], "'initial_tiers' must be a JSON object"),
        (("predicted_s",), "1e3", "must be a number, 'nan', 'inf' or '-inf'"),
        (("predicted_s",), 10**400, "too large for a float"),
        (("options",), [["a", 1]], "'options' must be a JSON object"),
        (("stats",), {"solver": "x", "status": "y", "rounds": True}, "'stats.rounds'"),
        (("stats",), {"solver": "x", "status": 1}, "'stats.status' must be a string"),
        (("stats",), {"solver": "x", "status": "y", "cuts": 1}, "unknown field 'cuts'"),
        (("stats",), {"solver": "x", "status": "y", "trace": [[1, 2]]}, "stats.trace\\[0\\]"),
        (("stats",), {"solver": "x", "status": "y", "trace": [[1, "a", 2]]}, "stats.trace"),
        (("stats",), {"solver": "x", "status": "y", "trace": 3}, "'stats.trace' must be a list"),
        (("stats",), {"solver": "x"}, "at least 'solver' and 'status'"),
        (("stats",), {"solver": "x", "status": "y", "stopped_on": "late"}, "'stats.stopped_on'"),
        (("zz",), 1, "unknown field 'zz'"),
        (("version",), True, "field 'version' is True"),
    ],
)
def test_plan_files_are_read_strictly(
    made: Plan, path: tuple[str | int, ...], value: Any, message: str
) -> None:
    doc = plan_to_dict(made)
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(PlanFileError, match=message) as info:
        plan_from_dict(doc, "p.json")
    assert str(info.value).startswith("p.json: ") and "\n" not in str(info.value)


def test_non_finite_numbers_read_back(made: Plan) -> None:
    doc = plan_to_dict(made)
    for text, value in (("nan", float("nan")), ("inf", float("inf")), ("-inf", -float("inf"))):
        doc["predicted_s"] = text
        assert str(plan_from_dict(doc).predicted_s) == str(value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"format": "\xff"}', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"version": ' + b"9" * 5000 + b"}", "digits"),
        (b'{"format": "tmsim-plan", "version": 2', "not valid JSON"),
    ],
)
def test_unreadable_files_are_one_line_errors(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(data)
    with pytest.raises(PlanFileError, match=message) as info:
        load_plan(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
