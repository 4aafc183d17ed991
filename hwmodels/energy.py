"""Energy and endurance of a platform: what a byte costs on each tier and link, what a FLOP
costs on the compute device, what each part draws while a step runs whatever it does, and how
many bytes a device may be written over its rated life.

A preset gives them in an optional ``[energy]`` table (units in the key names, as everywhere)::

    [energy]
    source = "..."
    compute_static_W = 0.0              # drawn while the step runs, busy or not (optional)

    [energy.flop]                       # per dtype the compute device has a peak for
    fp32_pJ_per_flop = 10.4

    [energy.host_flop]                  # the host CPU's, where it runs kernels (optional)
    fp32_pJ_per_flop = 52.6

    [[energy.tiers]]
    name = "nvme"
    read_energy_pJ_per_byte = 1200.0    # or _nJ_per_byte, _J_per_byte, _pJ_per_bit
    write_energy_pJ_per_byte = 2600.0
    static_W = 5.0                      # optional
    endurance_DWPD = 1.3                # or endurance_PBW / endurance_TBW (optional)
    rated_years = 5                     # required with an endurance

    [[energy.links]]
    src = "host"
    dst = "device"
    energy_pJ_per_bit = 6.5             # per byte carried, either unit

The table prices everything a step can be charged for, so that no part of a step costs 0 J
by omission: every tier; every dtype the compute device has a peak for (tf32 aside: a kernel
is charged at the dtype it computes in, fp32 for a product in TF32), and the host CPU's where
there is one; both directions of every kernel link (``src`` the linked tier and ``dst`` the
fastest tier for what kernels read through it, the other way for what they write); and either
every copy path or none: ``links = []`` in the ``[energy]`` table (which a platform with copy
paths must give, as it gives the entries) says that copies cross no link of their own, their
reads and writes being charged to the tiers (the DIMMs of one socket). Give 0 for a part that
costs nothing. Nothing here reads a step; :mod:`tmsim.energy` charges a replayed step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hwmodels.dtypes import COMPUTE_DTYPES, canonical_dtype
from hwmodels.errors import HardwareModelError
from hwmodels.tables import Table

#: Energy per byte, with its factor to J/byte (``pJ_per_bit`` is eight times ``pJ_per_byte``).
PER_BYTE = {"J_per_byte": 1.0, "nJ_per_byte": 1e-9, "pJ_per_byte": 1e-12, "pJ_per_bit": 8e-12}
#: Energy per floating-point operation, with its factor to J/FLOP.
PER_FLOP = {"J_per_flop": 1.0, "nJ_per_flop": 1e-9, "pJ_per_flop": 1e-12}
#: Power, with its factor to W.
POWER = {"W": 1.0, "mW": 1e-3}
#: Bytes written over a rated life, with its factor to bytes (PBW, TBW: petabytes and
#: terabytes written, decimal).
WRITTEN = {"PBW": 1e15, "TBW": 1e12}
SECONDS_PER_YEAR = 365.25 * 86400.0


@dataclass(frozen=True, slots=True)
class TierEnergy:
    """One tier's energy and endurance.

    ``read_j_per_byte`` / ``write_j_per_byte``: dynamic energy per byte read from and written
    to the tier (device and its interface, not a link in front of it); ``static_w``: drawn
    while the step runs; endurance, at most one of ``endurance_bytes`` (bytes the device may
    be written over ``rated_years``) and ``drive_writes_per_day`` (the device's capacity that
    many times a day over ``rated_years``); neither means the rating is not a limit worth
    stating (DRAM).
    """

    tier: str
    read_j_per_byte: float
    write_j_per_byte: float
    static_w: float = 0.0
    endurance_bytes: float | None = None
    drive_writes_per_day: float | None = None
    rated_years: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        where = f"energy tier {self.tier!r}"
        for name in ("read_j_per_byte", "write_j_per_byte", "static_w"):
            _finite(getattr(self, name), where, name, strict=False)
        rated = self.endurance_bytes is not None or self.drive_writes_per_day is not None
        if self.endurance_bytes is not None and self.drive_writes_per_day is not None:
            raise HardwareModelError(f"{where}: give one endurance, in bytes or drive writes")
        for name in ("endurance_bytes", "drive_writes_per_day", "rated_years"):
            value = getattr(self, name)
            if value is not None:
                _finite(value, where, name, strict=True)
        if rated != (self.rated_years is not None):
            raise HardwareModelError(f"{where}: an endurance needs rated_years and vice versa")

    def lifetime_bytes(self, capacity_bytes: int) -> float | None:
        """Bytes the device may be written over its rated life (None: not rated)."""
        if self.endurance_bytes is not None:
            return self.endurance_bytes
        if self.drive_writes_per_day is None or self.rated_years is None:
            return None
        return self.drive_writes_per_day * capacity_bytes * self.rated_years * 365.25

    def years_to_wear(
        self, capacity_bytes: int, written_bytes_per_step: float, step_s: float
    ) -> float:
        """Years until steps of ``step_s`` run back to back, each writing
        ``written_bytes_per_step``, write the device's rated bytes (``inf`` when it is not
        rated or nothing is written). Raises :class:`HardwareModelError` for a step time
        that is not positive or a negative byte count."""
        if not (step_s > 0 and math.isfinite(step_s)) or written_bytes_per_step < 0:
            raise HardwareModelError(
                f"years_to_wear needs a positive step time and bytes >= 0, "
                f"got {step_s!r} s and {written_bytes_per_step!r} bytes"
            )
        life = self.lifetime_bytes(capacity_bytes)
        if life is None or written_bytes_per_step == 0:
            return math.inf
        return life / (written_bytes_per_step / step_s) / SECONDS_PER_YEAR


@dataclass(frozen=True, slots=True)
class LinkEnergy:
    """Energy per byte a copy carries from tier ``src`` to tier ``dst`` over the link
    between them (beside what reading and writing the tiers cost)."""

    src: str
    dst: str
    j_per_byte: float
    source: str = ""

    def __post_init__(self) -> None:
        _finite(self.j_per_byte, f"energy link {self.src}->{self.dst}", "j_per_byte", False)


@dataclass(frozen=True, slots=True)
class Energy:
    """A platform's energy model: ``flop_j`` (canonical dtype -> J per FLOP of the compute
    device), ``host_flop_j`` (the same for the host CPU, where it runs kernels),
    ``compute_static_w``, ``tiers`` and ``links`` (each named at most once; ``links`` the
    copy paths' and the kernel links', see the module documentation). What it must name is
    the platform's check (:meth:`check_against`)."""

    flop_j: tuple[tuple[str, float], ...]
    tiers: tuple[TierEnergy, ...] = ()
    links: tuple[LinkEnergy, ...] = ()
    compute_static_w: float = 0.0
    source: str = ""
    host_flop_j: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        _finite(self.compute_static_w, "energy", "compute_static_W", strict=False)
        for table, pairs in (("energy.flop", self.flop_j), ("energy.host_flop", self.host_flop_j)):
            for dtype, j in pairs:
                _finite(j, table, dtype, strict=False)
        for what, keys in (
            ("dtype", [d for d, _ in self.flop_j]),
            ("host dtype", [d for d, _ in self.host_flop_j]),
            ("tier", [t.tier for t in self.tiers]),
            ("link", [f"{k.src}->{k.dst}" for k in self.links]),
        ):
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice:
                raise HardwareModelError(f"energy: {what} {twice[0]!r} given twice")

    def tier(self, name: str) -> TierEnergy | None:
        """The tier's entry, or None where the table does not name it."""
        return next((t for t in self.tiers if t.tier == name), None)

    def link(self, src: str, dst: str) -> LinkEnergy | None:
        """The link's entry, or None where the table does not name it."""
        return next((k for k in self.links if k.src == src and k.dst == dst), None)

    def j_per_flop(self, dtype: str, host: bool = False) -> float:
        """J per FLOP in ``dtype`` on the compute device, or on the host CPU with ``host``
        (0 where the table gives none for it)."""
        key = canonical_dtype(dtype)
        return next((j for d, j in (self.host_flop_j if host else self.flop_j) if d == key), 0.0)

    def check_against(
        self,
        tiers: Iterable[str],
        pairs: Iterable[tuple[str, str]],
        dtypes: Iterable[str],
        host_dtypes: Iterable[str] = (),
        kernel_pairs: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Raise :class:`HardwareModelError` for a tier, link or dtype the platform lacks, then
        for anything the platform has that the model leaves out (see the module
        documentation), naming all of it. ``pairs``: the copy paths' ``(src, dst)``;
        ``kernel_pairs``: both directions between each linked tier and the fastest one;
        ``dtypes`` / ``host_dtypes``: those the compute device / host CPU has a peak for."""
        names, joined, linked = list(tiers), list(pairs), list(kernel_pairs)
        peaks, host_peaks = list(dtypes), list(host_dtypes)
        for table, pairs_j, known in (
            ("energy.flop", self.flop_j, set(peaks)),
            ("energy.host_flop", self.host_flop_j, set(host_peaks)),
        ):
            for dtype, _ in pairs_j:
                if dtype not in known:
                    listed = ", ".join(sorted(known)) or "none (no such compute)"
                    raise HardwareModelError(
                        f"{table}: no peak for dtype {dtype!r}; known: {listed}"
                    )
        for t in self.tiers:
            if t.tier not in names:
                raise HardwareModelError(f"energy: unknown tier {t.tier!r}")
        for k in self.links:
            if (k.src, k.dst) not in joined and (k.src, k.dst) not in linked:
                raise HardwareModelError(
                    f"energy: no copy path or kernel link {k.src}->{k.dst} to charge"
                )
        given = {(k.src, k.dst) for k in self.links}
        flop, host_flop = {d for d, _ in self.flop_j}, {d for d, _ in self.host_flop_j}
        missing = [f"tier {t}" for t in names if self.tier(t) is None]
        if any(pair in given for pair in joined):  # every copy path, or none
            missing += [f"link {a}->{b}" for a, b in joined if (a, b) not in given]
        missing += [f"kernel link {a}->{b}" for a, b in linked if (a, b) not in given]
        missing += [f"dtype {d}" for d in peaks if d in COMPUTE_DTYPES and d not in flop]
        missing += [
            f"host dtype {d}" for d in host_peaks if d in COMPUTE_DTYPES and d not in host_flop
        ]
        if missing:
            raise HardwareModelError(
                f"energy: the table leaves out {', '.join(missing)}; price each (give 0 where "
                "it costs nothing)"
            )


def energy_from_table(t: Table) -> Energy:
    """Read an ``[energy]`` table (see the module documentation); raises
    :class:`HardwareModelError` naming the field for anything wrong in it."""
    flop = _flop_table(t, "flop")
    host_flop = _flop_table(t, "host_flop")
    tiers = [
        _tier_energy(Table(raw, t.origin, f"{t.where}.tiers[{i}]"))
        for i, raw in enumerate(t.array("tiers") if t.has("tiers") else [])
    ]
    links = []
    for i, raw in enumerate(t.array("links") if t.has("links") else []):
        k = Table(raw, t.origin, f"{t.where}.links[{i}]")
        links.append(
            LinkEnergy(
                k.string("src"),
                k.string("dst"),
                k.quantity("energy", PER_BYTE, strict=False),
                k.string("source", ""),
            )
        )
        k.done()
    energy = Energy(
        tuple(flop),
        tuple(tiers),
        tuple(links),
        t.quantity("compute_static", POWER, strict=False, default=0.0),
        t.string("source", ""),
        tuple(host_flop),
    )
    t.done()
    return energy


def _flop_table(t: Table, key: str) -> list[tuple[str, float]]:
    """The ``(dtype, J per FLOP)`` pairs of table ``key`` (``<dtype>_<unit>`` keys), if any."""
    out: list[tuple[str, float]] = []
    if not t.has(key):
        return out
    f = t.table(key)
    for name in list(f.data):
        unit = next((u for u in PER_FLOP if name.endswith(f"_{u}")), None)
        if unit is None:
            f.fail(f"{name}: give <dtype>_<unit> with a unit of {', '.join(PER_FLOP)}")
        out.append((canonical_dtype(name[: -len(unit) - 1]), f.number(name) * PER_FLOP[unit]))
    f.done()
    return out


def _tier_energy(t: Table) -> TierEnergy:
    written = None
    if any(t.has(f"endurance_{unit}") for unit in WRITTEN):
        written = t.quantity("endurance", WRITTEN)
    dwpd = t.number("endurance_DWPD", strict=True) if t.has("endurance_DWPD") else None
    years = t.number("rated_years", strict=True) if t.has("rated_years") else None
    tier = TierEnergy(
        t.string("name"),
        t.quantity("read_energy", PER_BYTE, strict=False),
        t.quantity("write_energy", PER_BYTE, strict=False),
        t.quantity("static", POWER, strict=False, default=0.0),
        written,
        dwpd,
        years,
        t.string("source", ""),
    )
    t.done()
    return tier


def energy_to_dict(e: Energy) -> dict[str, Any]:
    """The energy model as plain data in SI units, as :func:`energy_from_table` reads it."""
    out: dict[str, Any] = {
        "source": e.source,
        "compute_static_W": e.compute_static_w,
        "flop": {f"{d}_J_per_flop": j for d, j in e.flop_j},
        "tiers": [],
        "links": [
            {"src": k.src, "dst": k.dst, "energy_J_per_byte": k.j_per_byte, "source": k.source}
            for k in e.links
        ],
    }
    if e.host_flop_j:  # omitted when empty, as a table of its own is
        out["host_flop"] = {f"{d}_J_per_flop": j for d, j in e.host_flop_j}
    for t in e.tiers:
        row: dict[str, Any] = {
            "name": t.tier,
            "read_energy_J_per_byte": t.read_j_per_byte,
            "write_energy_J_per_byte": t.write_j_per_byte,
            "static_W": t.static_w,
            "source": t.source,
        }
        if t.endurance_bytes is not None:
            row["endurance_TBW"] = t.endurance_bytes / WRITTEN["TBW"]
        if t.drive_writes_per_day is not None:
            row["endurance_DWPD"] = t.drive_writes_per_day
        if t.rated_years is not None:
            row["rated_years"] = t.rated_years
        out["tiers"].append(row)
    return out


def _finite(value: float, where: str, name: str, strict: bool) -> None:
    ok = isinstance(value, int | float) and math.isfinite(value)
    if not ok or value < 0 or (strict and value == 0):
        sign = "> 0" if strict else ">= 0"
        raise HardwareModelError(f"{where}: {name} must be a finite number {sign}, got {value!r}")


__all__ = [
    "PER_BYTE",
    "PER_FLOP",
    "SECONDS_PER_YEAR",
    "Energy",
    "LinkEnergy",
    "TierEnergy",
    "energy_from_table",
    "energy_to_dict",
]
