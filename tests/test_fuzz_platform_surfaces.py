"""Fuzzing the platform tables that came last: three tiers, kernel links, a host CPU, energy
tables and 2LM caches. Every mutated file either loads as a platform that a quick use accepts
or fails with one line naming the file; never a traceback, never a silent wrong answer
(Hypothesis).

Starting points: h100-host-nvme (three tiers, a host CPU, energy), gh200 (a kernel link, a
host CPU, energy) and cascadelake-2lm (a 2LM cache, energy). Mutations: a few aimed at these
tables (a kernel link onto any tier, the kernels' own among them, at any rate; kernel and host
tiers drawn anew; a peak of an unknown dtype; an energy entry dropped or renamed; a cache of a
few lines; a tier's capacity; a copy path dropped), then perhaps the generic ones of
:mod:`test_fuzz_mutations` (wrong types, negative, zero and huge numbers, deleted and unknown
fields), and perhaps a key given twice in the text.

The quick use (:func:`use_problem`) asks of a platform that loads: what
:func:`test_fuzz_platform_files.platform_problem` asks (a round trip, finite times); no kernel
link onto the fastest tier, and kernels reach the tiers fastest first (through their links);
every peak names a dtype kernels compute in (or tf32); an energy table prices every tier,
kernel link and dtype it may be charged for, and every copy path or none; a tiny training step
plans and replays (a 2LM walk on a cache), with a finite energy; a long access walks a small
cache in a bounded number of waves; and ``tmsim platform FILE --json`` prints it.

200 files in the suite (a few seconds), 2000 under the ``slow`` mark; :func:`tally` counts
the verdicts of any number, for runs outside the suite.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
import tomllib
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from cache_waves import counted_waves
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_graph_files import small_graph
from test_fuzz_mutations import OK, dumps, mutate_once, outcome
from test_fuzz_platform_files import platform_problem

import hwmodels.cachesim as cachesim
import tmsim
from hwmodels.cachestate import new_cache_state
from hwmodels.platform import Platform
from hwmodels.presets import load_platform
from tmsim.cli.main import main
from tmsim.energy import step_energy
from tmsim.sim.cache.replay import replay_cache
from tmsim.sim.cache.walk import default_block_bytes, simulated_cache
from tmsim.strategies import kernels_reach_slow
from tmsim.workload.tensors import DTYPE_BYTES

PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
BASES = ("h100-host-nvme", "gh200", "cascadelake-2lm")
DOCS = {n: tomllib.loads((PRESET_DIR / f"{n}.toml").read_text("utf-8")) for n in BASES}
GRAPH = small_graph()
#: The dtypes a peak may name: the floating-point dtypes of graphs, which kernels compute in
#: (:func:`tmsim.kernelwork.kernel_dtype`), and tf32 (fp32 products on tensor cores).
KNOWN_DTYPES = {*(d for d in DTYPE_BYTES if d.startswith(("fp", "bf"))), "tf32"}
#: Most frames of a cache whose walk is counted (a bigger one is not small).
WALKED_FRAMES = 1 << 16
#: Laps of the cache the long access of the walk covers.
LAPS = 64
#: Fewest blocks a wave must walk on average, past a few waves per access: a wave costs
#: microseconds, so a walk of far fewer blocks a wave runs for minutes on a real step.
BLOCKS_PER_WAVE = 256


def wave_bound(associativity: int) -> int:
    """Most waves a long access may take beside :data:`BLOCKS_PER_WAVE`, whatever its length:
    a few laps to fill the ways and settle, and the partial laps at its ends."""
    return 4 * associativity + 16


# ---------------------------------------------------------------------------- mutations
_RATES = (0.0, -1.0, 1e-9, 1.0, 10.0, 375.0, 5000.0, 1e12, 1e30)
_CACHE_BYTES = (0, -64, 64, 128, 192, 4096, 65536, 1 << 20, 1 << 30, 2**62, 2**63)


def _tier_names(doc: dict[str, Any]) -> list[str]:
    tiers = doc.get("tiers", [])
    return [t["name"] for t in tiers if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _drop(draw: st.DrawFn, holder: dict[str, Any] | list[Any]) -> None:
    """Delete one entry of ``holder`` (a table's key or an array's element), if any."""
    keys: list[Any] = list(holder) if isinstance(holder, dict) else list(range(len(holder)))
    if keys:
        del holder[draw(st.sampled_from(keys))]


@st.composite
def aimed(draw: st.DrawFn, doc: dict[str, Any]) -> None:
    """One mutation aimed at the newer tables, in place."""
    names = _tier_names(doc) or ["device"]
    op = draw(
        st.sampled_from(
            (
                "link",
                "link",
                "kernel_tiers",
                "host",
                "peak",
                "energy_drop",
                "energy_rename",
                "cache",
                "cache",
                "capacity",
                "path",
            )
        )
    )
    if op == "link":  # a kernel link onto any tier (the kernels' own too), at any rate
        unit = draw(st.sampled_from(("GBps", "bytes_per_s")))
        link = {
            "tier": draw(st.sampled_from((*names, "nope"))),
            f"read_bw_{unit}": draw(st.sampled_from(_RATES)),
            f"write_bw_{unit}": draw(st.sampled_from(_RATES)),
        }
        links = doc.setdefault("kernel_links", [])
        if isinstance(links, list):
            if links and draw(st.booleans()):
                links[draw(st.integers(0, len(links) - 1))] = link
            else:
                links.append(link)
        if draw(st.booleans()):  # kernels reach the tier linked
            doc["kernel_tiers"] = list(dict.fromkeys([*doc.get("kernel_tiers", []), link["tier"]]))
    elif op == "kernel_tiers":
        doc["kernel_tiers"] = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    elif op == "host":
        if "host_compute" not in doc:
            doc["host_compute"] = copy.deepcopy(DOCS["gh200"]["host_compute"])
        host = doc["host_compute"]
        choice = draw(st.sampled_from(("tiers", "drop", "peak")))
        if choice == "tiers":
            host["kernel_tiers"] = draw(
                st.lists(st.sampled_from((*names, "nope")), min_size=0, max_size=3)
            )
        elif choice == "drop":
            del doc["host_compute"]
        else:
            host["peak_TFLOPs"] = {draw(st.sampled_from(("fp32", "fp64", "fp42", "int8"))): 1.0}
    elif op == "peak":
        peaks = doc["compute"].setdefault("peak_TFLOPs", {})
        if draw(st.booleans()) and peaks:
            _drop(draw, peaks)
        else:
            dtype = draw(st.sampled_from(("fp42", "int8", "tf32", "float32", "bool", "fp8", "")))
            peaks[dtype] = draw(st.sampled_from((1.0, 100.0)))
    elif op == "energy_drop":
        energy = doc.get("energy")
        if isinstance(energy, dict):
            part = draw(st.sampled_from(("tiers", "links", "flop", "host_flop", "all")))
            if part == "all":
                del doc["energy"]
            elif isinstance(energy.get(part), dict | list):
                _drop(draw, energy[part])
    elif op == "energy_rename":
        energy = doc.get("energy")
        if isinstance(energy, dict) and energy.get("tiers"):
            entry = draw(st.sampled_from(energy["tiers"]))
            entry["name"] = draw(st.sampled_from((*names, "nope")))
        elif isinstance(energy, dict) and energy.get("links"):
            entry = draw(st.sampled_from(energy["links"]))
            entry["dst"] = draw(st.sampled_from((*names, "nope")))
    elif op == "cache":
        cache = doc.get("cache")
        if isinstance(cache, dict):
            for key in [k for k in cache if k.startswith("capacity_")]:
                del cache[key]
            cache["capacity_bytes"] = draw(st.sampled_from(_CACHE_BYTES))
            if draw(st.booleans()):
                cache["associativity"] = draw(st.sampled_from((1, 2, 3, 4, 16)))
            if draw(st.booleans()):
                cache["write_allocate"] = draw(st.booleans())
            if draw(st.booleans()):
                cache["line_bytes"] = draw(st.sampled_from((32, 64, 96, 4096)))
    elif op == "capacity":
        tier = draw(st.sampled_from(doc.get("tiers") or [{}]))
        if isinstance(tier, dict):
            for key in [k for k in tier if k.startswith("capacity_")]:
                del tier[key]
            tier["capacity_bytes"] = draw(st.sampled_from((1, 4096, 10**6, 10**12, 2**62)))
    else:  # a copy path dropped (an energy link may then name a path that is gone)
        if isinstance(doc.get("copy_paths"), list):
            _drop(draw, doc["copy_paths"])


KEY_LINE = re.compile(r"^[A-Za-z_][\w-]* = .*$", re.MULTILINE)


@st.composite
def surface_files(draw: st.DrawFn) -> bytes:
    """A base preset's document with one to three aimed mutations, then perhaps one or two
    generic ones, then perhaps a key line given twice."""
    doc: dict[str, Any] = copy.deepcopy(DOCS[draw(st.sampled_from(BASES))])
    for _ in range(draw(st.integers(1, 3))):
        draw(aimed(doc))
    for _ in range(draw(st.sampled_from((0, 0, 1, 2)))):
        draw(mutate_once(doc, "toml"))
    text = dumps(doc, "toml")
    lines = KEY_LINE.findall(text)
    if lines and draw(st.integers(0, 5)) == 0:  # a key given twice: TOML refuses it
        line = draw(st.sampled_from(lines))
        text = text.replace(line, f"{line}\n{line}", 1)
    return text.encode("utf-8", errors="surrogatepass")


# ---------------------------------------------------------------------------- the quick use
def rules_problem(p: Platform) -> str:
    """Why ``p`` breaks a rule of the newer tables ("" if it keeps them all)."""
    kernel = [(t, p.kernel_bw_bytes_per_s(t, 1)[0]) for t in p.tier_names if t in p.kernel_tiers]
    for (a, ra), (b, rb) in pairwise(kernel):
        if rb > ra:
            return f"kernels read tier {b!r} ({rb:g} B/s) faster than tier {a!r} before it ({ra:g})"
    fastest = p.tiers[0].name
    if any(link.tier == fastest for link in p.kernel_links):
        return f"a kernel link onto tier {fastest!r}, which kernels sit on"
    computes = [p.compute, *([p.host_compute.compute] if p.host_compute else [])]
    for c in computes:
        unknown = set(c.dtypes) - KNOWN_DTYPES
        if unknown:
            return f"compute {c.name!r} keeps a peak of unknown dtype(s) {sorted(unknown)}"
    e = p.energy
    if e is None:
        return ""
    missing = [t for t in p.tier_names if e.tier(t) is None]
    if e.links:  # every copy path, or none (``links = []``: copies cross no link of their own)
        missing += [f"{c.src}->{c.dst}" for c in p.copy_paths if e.link(c.src, c.dst) is None]
    flop = {d for d, _ in e.flop_j}
    missing += [d for d in p.compute.dtypes if d != "tf32" and d not in flop]
    if p.host_compute is not None:
        host = {d for d, _ in e.host_flop_j}
        missing += [f"host {d}" for d in p.host_compute.compute.dtypes if d not in host]
    for link in p.kernel_links:
        for src, dst in ((link.tier, fastest), (fastest, link.tier)):
            if e.link(src, dst) is None:
                missing.append(f"kernel link {src}->{dst}")
    return f"the energy table charges 0 J for {', '.join(missing)}" if missing else ""


def walk_problem(p: Platform) -> str:
    """Why a long access walks ``p``'s cache slowly ("" if it does not, or the cache is not
    small)."""
    if p.cache is None:
        return ""
    block = default_block_bytes(p.cache)
    cache = simulated_cache(p, block)
    if cache.capacity_bytes // block > WALKED_FRAMES:
        return ""
    state = new_cache_state(cache, block)
    length = LAPS * cache.capacity_bytes
    with counted_waves() as waves:
        cachesim.simulate_accesses(state, [0, length], [length, length], [False, True])
    blocks = 2 * length // block
    bound = 2 * wave_bound(cache.associativity) + blocks // BLOCKS_PER_WAVE
    if waves[0] > bound:
        return f"two accesses of {LAPS} laps of the cache take {waves[0]} waves (> {bound})"
    return ""


def use_problem(p: Platform) -> str:
    """Why ``p`` fails the quick use ("" if it passes); a project error raised here is a
    clean refusal (of the plan, say)."""
    why = platform_problem(p) or rules_problem(p) or walk_problem(p)
    if why:
        return why
    if p.cache is not None:
        trace = replay_cache(GRAPH, p).trace
    else:
        strategy = "all-slow" if kernels_reach_slow(p) else "all-fast"
        trace = tmsim.simulate(tmsim.plan(GRAPH, p, strategy), GRAPH, p).trace
    if not (math.isfinite(trace.simulated_s) and trace.simulated_s > 0):
        return f"a replayed step takes {trace.simulated_s} s"
    if p.energy is not None:
        joules = step_energy(trace, GRAPH, p).total_j
        if not (math.isfinite(joules) and joules > 0):
            return f"a replayed step costs {joules} J"
    return ""


def cli_problem(path: Path) -> str:
    """Why ``tmsim platform FILE --json`` fails on a file that loads ("" if it prints it)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["platform", str(path), "--json"])
    if code != 0:
        return f"tmsim platform --json exits {code}"
    json.loads(out.getvalue())
    return ""


def check_surface_file(data: bytes, folder: Path) -> str:
    path = folder / "surface.toml"
    path.write_bytes(data)
    verdict = outcome(lambda: load_platform(str(path)), use_problem, str(path))
    return outcome(lambda: path, cli_problem) if verdict == OK else verdict


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_surfaces")


@settings(max_examples=200, deadline=None)
@given(data=surface_files())
def test_fuzzed_surface_files_load_and_run_or_fail_in_one_line(data: bytes, folder: Path) -> None:
    verdict = check_surface_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(data=surface_files())
def test_many_fuzzed_surface_files(data: bytes, folder: Path) -> None:
    verdict = check_surface_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict


@pytest.mark.parametrize("name", BASES)
def test_the_base_presets_pass_the_quick_use(name: str, folder: Path) -> None:
    path = folder / f"{name}.toml"
    path.write_bytes((PRESET_DIR / f"{name}.toml").read_bytes())
    assert check_surface_file(path.read_bytes(), folder) == OK


def tally(n: int, folder: Path) -> Counter[str]:
    """Verdicts of ``n`` drawn files, by kind (``clean error``, ``valid result``,
    ``silent: ...``, ``traceback: ...``), for counting runs outside the suite."""
    seen: Counter[str] = Counter()

    @settings(max_examples=n, deadline=None, database=None, derandomize=True)
    @given(data=surface_files())
    def run(data: bytes) -> None:
        seen[check_surface_file(data, folder)] += 1

    run()
    return seen
