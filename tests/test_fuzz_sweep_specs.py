"""Fuzzing the sweep-spec reader: every spec either expands into valid points or fails with
one line naming the file (Hypothesis).

Valid points here: integers are ints (never bools) that fit a 64-bit column (batch, seed,
fast bytes, window, block size), the configuration and the resolved platform are JSON without
NaN or infinity, and each point has a key.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_mutations import OK, mutated_bytes, outcome

from tmsim.sweeps.spec import Sweep, load_sweep

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = tomllib.loads((REPO / "experiments" / "sweeps" / "example.toml").read_text("utf-8"))
BYTES = copy.deepcopy(EXAMPLE)
del BYTES["grid"]["ratio"]
BYTES["grid"]["fast_bytes"] = ["1GB", 2**30]
BYTES["grid"]["strategy"] = ["all-slow", "first-touch"]
BASES = (EXAMPLE, BYTES)
INT_COLUMNS = ("batch", "seed", "fast_bytes", "settings.window", "cache_block_bytes")


def sweep_problem(sweep: Sweep) -> str:
    """Why ``sweep`` holds an invalid point ("" if none does)."""
    if type(sweep.seed) is not int:
        return f"seed {sweep.seed!r} accepted"
    for p in sweep.points:
        config = p.config()
        for column in INT_COLUMNS:
            value = config[column]
            if value is None and column != "batch":
                continue
            if type(value) is not int or not -(2**63) <= value < 2**63:
                return f"{column} {value!r} accepted"
        try:
            json.dumps([config, p.platform_si], allow_nan=False)
        except ValueError:
            return f"point {p.strategy} holds NaN or infinity"
        if len(p.key) != 16:
            return "a point without a key"
    return ""


@st.composite
def spec_files(draw: st.DrawFn) -> bytes:
    base: dict[str, Any] = draw(st.sampled_from(BASES))
    return draw(mutated_bytes(base, "toml"))


def check_spec_file(data: bytes, folder: Path) -> str:
    path = folder / "spec.toml"
    path.write_bytes(data)
    return outcome(lambda: load_sweep(path), sweep_problem, str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_sweeps")


@settings(max_examples=120, deadline=None)
@given(data=spec_files())
def test_fuzzed_sweep_specs_expand_valid_or_fail_in_one_line(data: bytes, folder: Path) -> None:
    verdict = check_spec_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict
