"""Which measured kernel times a plan is checked and replayed with.

A plan made with a profile (:mod:`tmsim.profiles`) records it in its options
(``options["profile"]``: path, sha256, entries). Checking the plan holds its predicted time to
the cost model it was made with, so that profile must be found again: at the path it records
(a relative path looked up beside the plan file first, then as recorded) with the same
sha256, or given by the caller. The replay runs with the profile the caller gives, else with
the plan's own; where the two differ, :attr:`PlanCosts.note` says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import TmsimError, shown_path
from tmsim.plans.values import Plan
from tmsim.profiles import Profile, cost_model, read_profile
from tmsim.workload.graph import Graph

#: What ``profile=`` takes: a :class:`~tmsim.profiles.Profile`, a profile file's path, or
#: None (the roofline, or the plan's own profile).
ProfileLike = Profile | str | os.PathLike[str] | None


def profile_of(value: ProfileLike) -> Profile | None:
    """``value`` as a :class:`Profile` (a path is read); raises :class:`TmsimError` for a
    file :func:`~tmsim.profiles.read_profile` refuses or a value of another type."""
    if value is None or isinstance(value, Profile):
        return value
    if isinstance(value, str | os.PathLike):
        return read_profile(value)
    raise TmsimError(f"profile must be a profile file's path or a Profile, got {value!r}")


@dataclass(frozen=True)
class PlanCosts:
    """The cost models of one plan: ``checked``, the one it was made with (its predicted time
    is held to it); ``replayed``, the one to replay it with; ``profile``, the measured times
    of ``replayed`` (None: the roofline); ``note``: why ``replayed`` is not ``checked``
    ("" where it is)."""

    checked: CostModel
    replayed: CostModel
    profile: Profile | None
    note: str = ""


def recorded_profile(plan: Plan) -> Mapping[str, Any] | None:
    """What ``plan`` records of the profile it was made with (``path``, ``sha256``), or None.
    Raises :class:`TmsimError` for a record without them."""
    record = plan.options.get("profile")
    if record is None:
        return None
    if not (
        isinstance(record, Mapping)
        and isinstance(record.get("path"), str)
        and isinstance(record.get("sha256"), str)
    ):
        raise TmsimError(
            f"the plan's options.profile is not a profile's path and sha256: {record!r}"
        )
    return record


def profile_note(plan: Plan, profile: Profile | None) -> str:
    """Why replaying ``plan`` with ``profile`` is not replaying it as it was made ("" when
    it is, or when no profile is given: the plan's own is then used)."""
    record = recorded_profile(plan)
    if profile is None or (record is not None and record["sha256"] == profile.sha256):
        return ""
    given = f"the measured times of {shown_path(profile.path)}"
    if record is None:
        return f"the plan was made with the roofline's kernel times; replaying it with {given}"
    made = f"{shown_path(record['path'])} (sha256 {record['sha256'][:12]})"
    return f"the plan was made with the measured times of {made}; replaying it with {given}"


def plan_costs(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    profile: ProfileLike = None,
    near: str | os.PathLike[str] | None = None,
) -> PlanCosts:
    """The cost models ``plan`` is checked and replayed with (see the module documentation);
    ``near``: the plan file's folder. Raises :class:`TmsimError` for a profile that cannot be
    read or does not fit the graph and platform, and when the plan's own profile is needed
    but is not found, or has changed, where it records it."""
    given = profile_of(profile)
    record = recorded_profile(plan)
    if record is None:
        made = None
    elif given is not None and given.sha256 == record["sha256"]:
        made = given
    else:
        made = _find(record, near)
    checked = cost_model(graph, platform, made)
    if given is None or given is made:
        return PlanCosts(checked, checked, made)
    replayed = cost_model(graph, platform, given)
    return PlanCosts(checked, replayed, given, profile_note(plan, given))


def _find(record: Mapping[str, Any], near: str | os.PathLike[str] | None) -> Profile:
    """The profile ``record`` names, read where it says (beside ``near`` first for a relative
    path) with its sha256; raises :class:`TmsimError` if it is not found or has changed."""
    path = Path(record["path"])
    places = [path] if path.is_absolute() or near is None else [Path(near) / path, path]
    changed = ""
    for place in places:
        if place.is_file():
            found = read_profile(place)
            if found.sha256 == record["sha256"]:
                return found
            changed = str(place)
    made = f"{shown_path(record['path'])} (sha256 {record['sha256'][:12]})"
    why = f"{shown_path(changed)} has changed since" if changed else "it is not found"
    raise TmsimError(
        f"the plan was made with the measured kernel times of {made}, and {why}; give that "
        "profile again (--profile FILE) to check and replay it"
    )


__all__ = [
    "PlanCosts",
    "Profile",
    "ProfileLike",
    "plan_costs",
    "profile_note",
    "profile_of",
    "read_profile",
    "recorded_profile",
]
