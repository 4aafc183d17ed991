"""Two tiers give the plans and times they gave before the planners learned K tiers.

The record (``tests/data/two_tier_record.json``, see :mod:`two_tier_record`) was made with the
two-tier code; every strategy of every case is measured again here and must agree: the same
error, or the same plan (digest, number of moves), predicted and simulated step times to
1e-9 relative, and, for the MILP, the same problem handed to HiGHS. A MILP solve the record
skipped (longer than 90 s) is compared by its problem alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from two_tier_record import CASES, MILP, measure, milp_problem, recorded

QUICK = ("vgg19/cascadelake-optane/4:1", "vgg19/rtx2080ti-pcie3/1:3")
REL = 1e-9


def _compare(case: str) -> None:
    record = recorded()[case]
    solved = tuple(name for name, rec in record.items() if "skipped" not in rec)
    now: dict[str, dict[str, Any]] = measure(case, solved)
    for name, rec in record.items():
        if "skipped" in rec:
            assert milp_problem(case, name) == rec["problem"], (case, name)
            continue
        got = now[name]
        for key, value in rec.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=REL), (case, name, key)
            else:
                assert got[key] == value, (case, name, key)


def test_the_record_covers_every_case_and_strategy() -> None:
    record = recorded()
    assert set(record) == set(CASES)
    for case, entries in record.items():
        cache = "2lm" if "optane" in case else "unified-memory"
        assert cache in entries, case
        for name in MILP:
            assert "problem" in entries[name], (case, name)
        assert sum("predicted_s" in e for e in entries.values()) >= 3, case


@pytest.mark.parametrize("case", QUICK)
def test_two_tier_results_are_unchanged(case: str) -> None:
    _compare(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c not in QUICK])
def test_two_tier_results_are_unchanged_on_every_workload(case: str) -> None:
    _compare(case)
