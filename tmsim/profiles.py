"""Measured kernel times: profile files, what a plan records of them, the cost model they make.

A *profile* is a CSV file of kernel times someone measured (with ``torch.profiler``, or by
timing their own runs), one row per kernel and placement, with the header
``kernel,placement,seconds``:

- ``kernel``: a kernel's name in the graph;
- ``placement``: the tier of every operand of the kernel, in operand order
  (:attr:`~tmsim.workload.graph.Graph.operand_csr`: its distinct inputs, outputs and in-place
  updates), by tier name, joined by ``|`` (``DRAM|PMM|DRAM``);
- ``seconds``: the kernel's time under that placement, launch included: a decimal number
  (``0.0012``, ``1.2e-3``) over 0 and at most :data:`MAX_KERNEL_SECONDS` (an hour: no kernel
  of a training step takes longer, and a time of 1e308 s would plan as a valid step of
  1e308 s).

Each column is named once (a header naming one twice is ambiguous); other columns are
ignored. Spaces around a field are dropped. Wherever a plan puts a kernel's operands on a
placement the profile lists, that time replaces the roofline's: in every planner (the
heuristics and the MILP formulations), in the validator's predicted time and in the replay
(:class:`~tmsim.cost.CostModel`'s ``measured`` table). Placements it does not list keep the
roofline.

:func:`read_profile` reads a file once, at the edge, into a :class:`Profile` (its path, the
sha256 of its bytes and its rows by name); :meth:`Profile.table` resolves it against a graph
and platform; :func:`cost_model` builds the cost model a run plans, checks and replays with.
A plan made with a profile records :meth:`Profile.record` (path, sha256, entries) in its
options, so that replaying it later can find the same times again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from hwmodels.platform import Platform
from hwmodels.timing import Overlap
from tmsim.cost import CostModel, MeasuredTable
from tmsim.errors import TmsimError, shown_path
from tmsim.workload.graph import Graph

#: The columns a profile must have.
COLUMNS = ("kernel", "placement", "seconds")
#: The longest time a profile may give a kernel: an hour.
MAX_KERNEL_SECONDS = 3600.0
#: A time as CSV writers write one: ASCII digits, a point, an exponent (no ``1_000``, no digits
#: of other scripts, no ``nan`` or ``inf``, which Python's ``float`` takes).
_NUMBER = re.compile(r"[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One row of a profile: kernel ``kernel`` with its operands on the tiers named by
    ``placement`` took ``seconds``; ``line`` is its line in the file (for messages)."""

    line: int
    kernel: str
    placement: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class Profile:
    """A profile as read from ``path`` (kept as given), the sha256 of the file's bytes, and
    its ``entries`` in file order (no two for one kernel and placement)."""

    path: str
    sha256: str
    entries: tuple[ProfileEntry, ...] = field(repr=False)

    def table(self, graph: Graph, platform: Platform) -> MeasuredTable:
        """The entries for ``graph`` on ``platform``: ``(kernel index, tier index of every
        operand) -> seconds``.

        Raises :class:`TmsimError` naming the file and line for an unknown kernel, a
        placement whose length is not the kernel's operand count, an unknown tier and a
        tier kernels cannot access on ``platform``.
        """
        kernels = {k.name: i for i, k in enumerate(graph.kernels)}
        tiers = {name: i for i, name in enumerate(platform.tier_names)}
        reach = platform.kernel_tier_mask()
        ptr, _ = graph.operand_csr
        out: dict[tuple[int, tuple[int, ...]], float] = {}
        for e in self.entries:
            where = f"{shown_path(self.path)}:{e.line}"
            k = kernels.get(e.kernel)
            if k is None:
                raise TmsimError(f"{where}: unknown kernel {e.kernel!r} in graph {graph.name!r}")
            count = int(ptr[k + 1] - ptr[k])
            if len(e.placement) != count:
                raise TmsimError(
                    f"{where}: kernel {e.kernel!r} has {count} operands, placement lists "
                    f"{len(e.placement)}"
                )
            unknown = [n for n in e.placement if n not in tiers]
            if unknown:
                raise TmsimError(
                    f"{where}: unknown tier {unknown[0]!r}; platform {platform.name!r} has "
                    f"{', '.join(tiers)}"
                )
            away = [n for n in e.placement if not reach[tiers[n]]]
            if away:
                raise TmsimError(
                    f"{where}: kernels on platform {platform.name!r} cannot access tier "
                    f"{away[0]!r} (kernel tiers: {', '.join(platform.kernel_tiers)})"
                )
            out[(k, tuple(tiers[n] for n in e.placement))] = e.seconds
        return out

    def record(self) -> dict[str, Any]:
        """What a plan records of the profile it was made with: ``path``, ``sha256`` and the
        number of ``entries``."""
        return {"path": self.path, "sha256": self.sha256, "entries": len(self.entries)}


def write_profile(
    path: str | os.PathLike[str], graph: Graph, seconds: dict[str, float], tier: str
) -> Profile:
    """Write the times ``seconds`` (kernel name -> seconds > 0) of ``graph``'s kernels as a
    profile at ``path``, every operand on tier ``tier``, in graph order, and read it back.
    The file is written whole or not at all (a temporary file beside it, then renamed).
    Raises :class:`TmsimError` for a kernel the graph lacks, a time that is not > 0 and
    finite or is over :data:`MAX_KERNEL_SECONDS`, or a file that cannot be written."""
    names = {k.name for k in graph.kernels}
    unknown = sorted(set(seconds) - names)
    if unknown:
        raise TmsimError(f"kernel {unknown[0]!r} is not in graph {graph.name!r}")
    bad = [k for k, v in seconds.items() if not (math.isfinite(v) and v > 0)]
    if bad:
        raise TmsimError(f"kernel {bad[0]!r}: {seconds[bad[0]]!r} s is not a time > 0")
    long = [k for k, v in seconds.items() if v > MAX_KERNEL_SECONDS]
    if long:
        raise TmsimError(f"kernel {long[0]!r}: {_over(repr(float(seconds[long[0]])))}")
    ptr, _ = graph.operand_csr
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for k, kern in enumerate(graph.kernels):
        if kern.name in seconds:
            placement = "|".join([tier] * int(ptr[k + 1] - ptr[k]))
            writer.writerow((kern.name, placement, repr(float(seconds[kern.name]))))
    target = os.fspath(path)
    partial = f"{target}.partial"
    try:
        with open(partial, "w", encoding="utf-8", newline="") as f:
            f.write(out.getvalue())
        os.replace(partial, target)
    except OSError as exc:
        raise TmsimError(f"profile {shown_path(target)}: {exc.strerror or exc}") from None
    return read_profile(target)


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read the profile at ``path`` (see the module documentation).

    Raises :class:`TmsimError` naming the file (and line) for a file that cannot be read or
    is not UTF-8 text, a missing column, a column named twice, a row with more or fewer fields
    than the header, a kernel or placement left empty, seconds that are not a decimal number
    > 0, a time over :data:`MAX_KERNEL_SECONDS` (naming the kernel and the bound), a kernel
    and placement listed twice, and a file without rows.
    """
    shown = shown_path(os.fspath(path))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TmsimError(f"profile {shown}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TmsimError(f"profile {shown}: not UTF-8 text") from None
    entries: list[ProfileEntry] = []
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = [h.strip() for h in next(reader, [])]
        for i, name in enumerate(header):
            if name and name in header[:i]:
                raise TmsimError(
                    f"{shown}: column {name!r} twice in the header (fields "
                    f"{header.index(name) + 1} and {i + 1}): which one to read is ambiguous"
                )
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise TmsimError(f"{shown}: missing column(s) {', '.join(missing)}")
        col = {c: header.index(c) for c in COLUMNS}
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            entry = _entry(row, col, len(header), f"{shown}:{line}", line)
            key = (entry.kernel, entry.placement)
            if key in seen:
                raise TmsimError(
                    f"{shown}:{line}: kernel {entry.kernel!r} at placement "
                    f"{'|'.join(entry.placement)} is listed on line {seen[key]} already"
                )
            seen[key] = line
            entries.append(entry)
    except csv.Error as exc:
        raise TmsimError(f"{shown}: not a CSV file: {exc}") from None
    if not entries:
        raise TmsimError(f"{shown}: no measured kernel times (a header and no rows)")
    return Profile(os.fspath(path), hashlib.sha256(data).hexdigest(), tuple(entries))


def _entry(row: list[str], col: dict[str, int], width: int, where: str, line: int) -> ProfileEntry:
    """One data row of a profile; raises :class:`TmsimError` (``where``: file and line)."""
    if len(row) != width:
        raise TmsimError(f"{where}: {len(row)} fields, the header has {width}")
    kernel = row[col["kernel"]].strip()
    text = row[col["placement"]].strip()
    if not kernel or not text:
        raise TmsimError(f"{where}: the {'kernel' if not kernel else 'placement'} is empty")
    placement = tuple(name.strip() for name in text.split("|"))
    raw = row[col["seconds"]].strip()
    seconds = float(raw) if _NUMBER.fullmatch(raw) else math.nan
    if not seconds > 0:
        raise TmsimError(f"{where}: seconds must be a positive number, got {raw!r}")
    if seconds > MAX_KERNEL_SECONDS:  # 1e999 too: a number, too large for a float
        raise TmsimError(f"{where}: kernel {kernel!r}: {_over(raw)}")
    return ProfileEntry(line, kernel, placement, seconds)


def _over(seconds: str) -> str:
    """Why a time of ``seconds`` (as written) is refused."""
    shown = seconds if len(seconds) <= 30 else f"{seconds[:27]}..."
    return (
        f"{shown} s is over the bound of {MAX_KERNEL_SECONDS:g} s per kernel (no kernel of a "
        "training step takes an hour)"
    )


def cost_model(
    graph: Graph,
    platform: Platform,
    profile: Profile | None = None,
    overlap: Overlap = Overlap.MAX,
) -> CostModel:
    """The cost model of ``graph`` on ``platform``: the roofline, with ``profile``'s measured
    times where it lists a kernel's placement. Raises as :meth:`Profile.table` and
    :class:`~tmsim.cost.CostModel`."""
    measured = profile.table(graph, platform) if profile is not None else None
    return CostModel(graph, platform, overlap=overlap, measured=measured)


__all__ = [
    "COLUMNS",
    "MAX_KERNEL_SECONDS",
    "Profile",
    "ProfileEntry",
    "cost_model",
    "read_profile",
]
