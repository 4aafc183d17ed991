"""Fuzzing the profile reader: every profile file either gives measured times that a plan can
use and that are what the file says, or fails with one line naming the file (Hypothesis).

A profile starts as a valid one of ``tiny_step`` on Cascade Lake with Optane (every kernel,
two placements each) and is mutated: its header (a column dropped, repeated, renamed,
reordered or padded; an extra column), its cells (times huge, tiny, negative, zero, NaN,
infinite, over the bound, with digit separators or digits of other scripts; unknown, empty or
padded kernels; placements of the wrong length, unknown or empty tiers), its rows (a field
more or less, a row twice, blank lines, quoted line breaks) and its bytes (UTF-8 with a BOM,
UTF-16, Latin-1, a NUL, CRLF line ends, random bytes).

The oracle of an accepted profile (:func:`profile_problem`) reads the file again by its own
rules: one column of each name in the header; each row's time an ASCII decimal number over 0
and at most :data:`~tmsim.profiles.MAX_KERNEL_SECONDS`; the entries exactly the rows, in
order, with their cells stripped. Then a plan with the profile (greedy; the static MILP in
the second test) must predict a finite step no longer than the bound allows and pass the
validator.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_mutations import OK, outcome
from tiny_graphs import tiny_step

from hwmodels.presets import load_preset
from tmsim.planners import PlanSettings, plan
from tmsim.plans.validate import validate
from tmsim.profiles import COLUMNS, MAX_KERNEL_SECONDS, Profile, cost_model, read_profile

GRAPH = tiny_step()
PLATFORM = load_preset("cascadelake-optane")
TIERS = PLATFORM.tier_names
#: A plain decimal number as CSV writers write one (``repr(float)``, ``%g``, spreadsheets).
NUMBER = re.compile(r"[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def _operands(k: int) -> int:
    ptr, _ = GRAPH.operand_csr
    return int(ptr[k + 1] - ptr[k])


#: The valid profile's rows: every kernel with its operands all in DRAM, then all in PMM.
BASE = [
    [kern.name, "|".join([tier] * _operands(k)), repr(1e-3 * (k + 1) * (2 if tier == "PMM" else 1))]
    for k, kern in enumerate(GRAPH.kernels)
    for tier in TIERS
]

TIMES_VALID = ["0.001", "5e-324", "1e-300", "3600", "3.6e3", "3600.0", ".5", "2.", "+0.25", "1E-3"]
TIMES_BAD = [
    *("1e308", "1.7976931348623157e308", "3600.0000001", "1e4", "86400", "1e999"),
    *("0", "-0", "0.0", "-1", "-1e-3", "nan", "NaN", "inf", "-inf", "Infinity"),
    *("", " ", "1_0", "0x10", "0x1p-3", "\uff11", "\u0663", "1,5", "1e", "e5", "1.0.0", "abc"),
    "9" * 5000,
]
KERNELS_BAD = ["f9", "", " ", "F2", "f2\n", "f2,f3", "é"]
PLACEMENTS_BAD = ["DRAM", "DRAM|DRAM|DRAM", "HBM|DRAM", "DRAM|", "|", "", "dram|dram", "DRAM||PMM"]


@st.composite
def cell_mutation(draw: st.DrawFn, header: list[str], rows: list[list[str]]) -> None:
    """Change the kernel, placement or seconds of one row of ``rows`` in place (found by
    the ``header``; nothing where it lacks the column or the row is short)."""
    row = draw(st.sampled_from(rows))
    name = draw(st.sampled_from(("kernel", "placement", "seconds", "seconds", "seconds")))
    at = header.index(name) if name in header else len(row)
    if at >= len(row):
        return
    if name == "seconds":
        times = st.sampled_from(TIMES_BAD) | st.sampled_from(TIMES_VALID)
        row[at] = draw(times | st.floats(min_value=1e-300, max_value=1e300).map(repr))
    elif name == "placement":
        spaced = " | ".join(row[at].split("|"))
        row[at] = draw(st.sampled_from([*PLACEMENTS_BAD, spaced, f" {row[at]} "]))
    else:
        known = [k.name for k in GRAPH.kernels]
        row[at] = draw(st.sampled_from([*KERNELS_BAD, *known, f" {row[at]} "]))


@st.composite
def profile_text(draw: st.DrawFn) -> list[list[str]]:
    """The header and rows of a profile, a few mutations away from :data:`BASE`."""
    header = list(COLUMNS)
    rows = [list(r) for r in BASE]
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(("cell", "cell", "cell", "header", "header", "row")))
        if op == "cell":
            draw(cell_mutation(header, rows))
        elif op == "header":
            what = draw(
                st.sampled_from(("drop", "repeat", "repeat", "rename", "order", "pad", "extra"))
            )
            i = draw(st.integers(0, len(header) - 1))
            if what == "drop":
                del header[i]
                for r in rows:
                    del r[min(i, len(r) - 1)]
            elif what == "repeat":
                header.append(
                    draw(st.sampled_from((header[i], f" {header[i]}", header[i].upper())))
                )
                for r in rows:
                    r.append(draw(st.sampled_from(("7", "0.5", r[min(i, len(r) - 1)]))))
            elif what == "rename":
                header[i] = draw(st.sampled_from(("Seconds", "time", "", "kernel ", header[i] * 2)))
            elif what == "order":
                order = draw(st.permutations(range(len(header))))
                header = [header[j] for j in order]
                rows = [[r[j] for j in order] if len(r) == len(order) else r for r in rows]
            elif what == "pad":
                header[i] = f"  {header[i]}\t"
            else:
                header.append(draw(st.sampled_from(("note", "", "device"))))
                for r in rows:
                    r.append("x")
        else:
            what = draw(st.sampled_from(("more", "fewer", "twice", "blank", "drop")))
            j = draw(st.integers(0, len(rows) - 1))
            if what == "more":
                rows[j] = [*rows[j], "1"]
            elif what == "fewer" and rows[j]:
                rows[j] = rows[j][:-1]
            elif what == "twice":
                rows.insert(j, list(rows[j]))
            elif what == "blank":
                rows.insert(j, [])
            elif len(rows) > 1:
                del rows[j]
    return [header, *rows]


def to_bytes(table: list[list[str]], encoding: str, newline: str) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator=newline).writerows(table)
    text = out.getvalue()
    if encoding == "latin-1":
        return text.encode("latin-1", errors="replace") + "é\n".encode("latin-1")
    return text.encode(encoding, errors="surrogatepass")


@st.composite
def profile_files(draw: st.DrawFn) -> bytes:
    """The bytes of a profile file (module documentation)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=300))
    table = draw(profile_text())
    encoding = draw(st.sampled_from(("utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1")))
    data = to_bytes(table, encoding, draw(st.sampled_from(("\n", "\n", "\r\n"))))
    if draw(st.integers(0, 14)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from((b"\x00", b"\xff", b"\xc3\x28"))) + data[at:]
    return data


def profile_problem(profile: Profile, data: bytes) -> str:
    """Why the accepted ``profile`` is not what ``data`` says ("" if it is; module
    documentation)."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    header = [h.strip() for h in rows[0]]
    twice = [h for h in set(header) if h and header.count(h) > 1]
    if twice:
        return f"a header with column {twice[0]!r} twice was accepted"
    col = {c: header.index(c) for c in COLUMNS}
    body = [r for r in rows[1:] if any(cell.strip() for cell in r)]
    if len(body) != len(profile.entries):
        return f"{len(body)} rows read as {len(profile.entries)} entries"
    for r, e in zip(body, profile.entries, strict=True):
        raw = r[col["seconds"]].strip()
        if not NUMBER.fullmatch(raw) or not 0 < float(raw) <= MAX_KERNEL_SECONDS:
            return f"seconds {raw[:40]!r} accepted as {e.seconds!r}"
        placement = tuple(n.strip() for n in r[col["placement"]].strip().split("|"))
        if (r[col["kernel"]].strip(), placement, float(raw)) != (e.kernel, e.placement, e.seconds):
            return f"row {r!r} read as {e!r}"
    return ""


def usable(profile: Profile, data: bytes, milp: bool = False) -> str:
    """:func:`profile_problem`, then a plan with the profile on :data:`GRAPH`."""
    why = profile_problem(profile, data)
    if why:
        return why
    cost = cost_model(GRAPH, PLATFORM, profile)
    settings = PlanSettings(profile=profile, time_limit_s=None, gap=0.0)
    made = plan("static" if milp else "greedy", GRAPH, PLATFORM, settings)
    bound = sum(cost.kernel_time_range_s()[1]) + len(GRAPH.kernels) * MAX_KERNEL_SECONDS
    if not (math.isfinite(made.predicted_s) and 0 < made.predicted_s <= bound):
        return f"a plan predicted {made.predicted_s!r} s"
    if not validate(made, GRAPH, PLATFORM, cost).ok:
        return "the validator refused a plan made with the profile"
    return ""


def check_profile_file(data: bytes, folder: Path, milp: bool = False) -> str:
    path = folder / "p.csv"
    path.write_bytes(data)
    return outcome(lambda: read_profile(path), lambda p: usable(p, data, milp), str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_profiles")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=profile_files())
def test_fuzzed_profile_files_read_right_or_fail_in_one_line(data: bytes, folder: Path) -> None:
    verdict = check_profile_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=profile_files())
def test_fuzzed_profile_files_plan_with_the_milp_or_fail_in_one_line(
    data: bytes, folder: Path
) -> None:
    verdict = check_profile_file(data, folder, milp=True)
    assert verdict.startswith(("clean", OK)), verdict


def test_the_base_profile_is_valid(folder: Path) -> None:
    data = to_bytes([list(COLUMNS), *BASE], "utf-8", "\n")
    assert check_profile_file(data, folder) == OK
    assert check_profile_file(data, folder, milp=True) == OK
