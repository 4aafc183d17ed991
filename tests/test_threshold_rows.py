"""The copy rows' thresholds (:func:`tmsim.planners.milp.formulation.kernel_rows.threshold_rows`): every row
holds at every set of copies beside a kernel (brute force over the sets), they are stronger
than the two copy rows at a fractional point where a short copy sits beside part of a long
one, and the asynchronous optimum stays what exhaustive search finds (the tests of the
compact form and the brute force of the formulations run on the model with them)."""

from __future__ import annotations

import itertools
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmsim.planners.milp.formulation.kernel_rows as rows_module
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.kernel_rows import copy_rows, threshold_rows


def _values(rows: list[tuple[np.ndarray, object]], x: np.ndarray) -> np.ndarray:
    """Each row's right side at ``x`` (kernel 0)."""
    return np.array([float(c[0] + (m @ x)[0]) for c, m in rows])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.floats(0.0, 3.0)), min_size=1, max_size=8),
    st.integers(1, 8),
)
def test_every_threshold_row_holds_at_every_set_of_copies(
    floors: list[float], copies: list[tuple[int, float]], most: int
) -> None:
    # kernels in any order (some with no copy, some of no time), up to ``most`` thresholds
    floor_s = np.array(floors) * 1e-3
    kernel = np.array([k % floor_s.size for k, _ in copies], dtype=np.int64)
    seconds = np.array([share for _, share in copies]) * floor_s[kernel]
    m = seconds.size
    with patch.object(rows_module, "THRESHOLDS", most):
        rows = threshold_rows(seconds, kernel, np.arange(m), floor_s, m)
    assert len(rows) <= most
    for picks in itertools.product((0.0, 1.0), repeat=m):
        x = np.array(picks)
        beside = np.bincount(kernel, weights=seconds * x, minlength=floor_s.size)
        cost = np.maximum(floor_s, beside)  # what each kernel takes with these copies
        for const, matrix in rows:
            assert (const + matrix @ x <= cost * (1 + 1e-12) + 1e-15).all()
    for const, _ in rows:  # thresholds strictly between 0 and the kernel's time, or none
        assert ((const == 0) | ((const > 0) & (const < floor_s))).all()


def _copies(seconds: list[float]) -> Copies:
    n = len(seconds)
    return Copies(
        seconds=np.array(seconds),
        asynchronous=np.ones(n, dtype=bool),
        kernel=np.zeros(n, dtype=np.int64),
        source=np.zeros(n, dtype=np.int64),
    )


def test_a_short_copy_beside_part_of_a_long_one_pays_what_the_kernel_cannot_hide() -> None:
    # kernel of 1 s; a copy of 0.7 s and a fourth of a copy of 3 s beside it: whole copies
    # take max(1, 0.7) = 1 s alone and 3.7 s together, so at x = (1, 1/4) the step's cost is
    # at least 1 + (3.7 - 1) / 4 = 1.675 s; the copy rows give max(0.7 + 0.75, 1 + 2 / 4) = 1.5
    floor = np.array([1.0])
    x = np.array([1.0, 0.25])
    copies = _copies([0.7, 3.0])
    plain = copy_rows(copies, floor, 2)[:2]
    assert max(_values(plain, x)) == pytest.approx(1.5)
    full = copy_rows(copies, floor, 2)
    # threshold 2 (1 - 0.7) = 0.6: 0.6 + (0.7 - 0.3) + (3 - 0.6) / 4 = 1.6
    assert max(_values(full, x)) == pytest.approx(1.6)
    assert max(_values(full, x)) <= 1.675


def test_no_copies_or_copies_of_no_time_give_no_threshold_row() -> None:
    floor = np.array([1.0, 2.0])
    assert threshold_rows(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), floor, 0) == []
    none = threshold_rows(np.zeros(2), np.array([0, 1]), np.array([0, 1]), floor, 2)
    assert none == []
