"""The two arenas of the heuristic layouts place every buffer at the same offset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tmsim.layout import addresses as memory
from tmsim.layout.addresses import Strategy, plan_memory
from tmsim.layout.arena import KernelArena, ScanArena, arena_for

buffers = st.lists(
    st.tuples(
        st.integers(1, 200) | st.sampled_from([8, 16, 32]), st.integers(0, 12), st.integers(0, 4)
    ),
    min_size=1,
    max_size=50,
)


def _place(
    arena: KernelArena | ScanArena, cases: list[tuple[int, int, int]], best: bool, a: int
) -> list[int]:
    out = []
    for size, lo, span in cases:
        at = arena.offset(size, lo, lo + span, best, a)
        arena.add(at, size, lo, lo + span)
        out.append(at)
    return out


@settings(max_examples=200, deadline=None)
@given(buffers, st.booleans(), st.sampled_from([1, 8, 64]))
def test_the_per_kernel_lists_place_as_the_scan_does(
    cases: list[tuple[int, int, int]], best_fit: bool, alignment: int
) -> None:
    kernels = max(lo + span for _, lo, span in cases) + 1
    scan = _place(ScanArena(len(cases)), cases, best_fit, alignment)
    lists = _place(KernelArena(kernels), cases, best_fit, alignment)
    assert lists == scan


def test_a_hand_case_of_both_rules() -> None:
    # a [0,10) live 0-1, b [10,30) live 0-0, c [30,35) live 1-1: at kernel 1 the free gaps are
    # [10,30) (20 B) and above 35; at kernel 0, [30, ...) above b
    for arena in (ScanArena(3), KernelArena(2)):
        arena.add(0, 10, 0, 1)
        arena.add(10, 20, 0, 0)
        arena.add(30, 5, 1, 1)
        assert arena.offset(15, 1, 1, False, 1) == 10
        assert arena.offset(25, 1, 1, False, 1) == 35
        assert arena.offset(15, 0, 1, False, 1) == 35
        assert arena.offset(4, 1, 1, True, 1) == 10  # the only gap below the top
        assert arena.offset(3, 1, 1, False, 8) == 16  # the gap's foot rounded up


def test_best_fit_takes_the_lowest_of_equal_gaps() -> None:
    for arena in (ScanArena(4), KernelArena(1)):
        for at in (0, 20, 40, 70):  # gaps of 10, 10 and 20 bytes between them
            arena.add(at, 10, 0, 0)
        assert arena.offset(5, 0, 0, True, 1) == 10
        assert arena.offset(15, 0, 0, True, 1) == 50
        assert arena.offset(25, 0, 0, True, 1) == 80


@pytest.mark.parametrize(
    ("first", "last", "kind"),
    [
        ([0, 1, 2], [0, 1, 2], KernelArena),
        ([0, 0], [40, 40], ScanArena),  # long spans
        ([0, 10**9], [0, 10**9], ScanArena),  # kernels nobody lives at
    ],
)
def test_the_arena_follows_the_spans(first: list[int], last: list[int], kind: type) -> None:
    assert isinstance(arena_for(np.array(first), np.array(last)), kind)


@settings(max_examples=60, deadline=None)
@given(buffers, st.sampled_from([Strategy.FIRST_FIT, Strategy.BEST_FIT, Strategy.FIRST_FIT_START]))
def test_layouts_do_not_depend_on_the_arena(
    cases: list[tuple[int, int, int]], strategy: Strategy
) -> None:
    sizes = [s for s, _, _ in cases]
    first = [lo for _, lo, _ in cases]
    last = [lo + span for _, lo, span in cases]
    # a case the scan would lay out anyway compares the scan with itself
    assume(isinstance(arena_for(np.array(first), np.array(last)), KernelArena))
    with_lists = plan_memory(sizes, first, last, strategy, 8)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "arena_for", lambda lo, hi: ScanArena(lo.size))
        by_scan = plan_memory(sizes, first, last, strategy, 8)
    assert with_lists.offsets_bytes.tolist() == by_scan.offsets_bytes.tolist()
    assert with_lists.pool_bytes == by_scan.pool_bytes
