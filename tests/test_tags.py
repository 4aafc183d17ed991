"""The lecture's memory planning algorithm (tmsim.layout.tags): its steps on the lecture's
example, NNVM's choice of a free tag case by case, a plain re-implementation that must agree
on random buffers, and properties: tags never shared by buffers live together, each as large
as the largest buffer it held, the sum between the peak of live bytes and no reuse at all,
and the peak reached when every buffer has one size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.tags import DEFAULT_MATCH_RANGE, plan_tags


def test_the_lecture_steps() -> None:
    # B [0,2] 400, C [1,3] 400, F [2,4] 100, E with G written in place [3,4] 100. Step 1: a
    # tag for B; step 2: a new one for C (B is alive); step 3: a new one for F, then B's
    # tag goes in the box; step 4: E takes B's tag from the box; step 5: G keeps E's.
    tags = plan_tags([400, 400, 100, 100], [0, 1, 2, 3], [2, 3, 4, 4])
    assert tags.tag_of.tolist() == [0, 1, 2, 0]
    assert tags.tag_bytes.tolist() == [400, 400, 100]
    assert tags.pool_bytes == 900
    assert tags.offsets_bytes.tolist() == [0, 400, 800, 0]


def test_a_tag_goes_in_the_box_only_after_its_last_kernel() -> None:
    # b ends at kernel 1 where c starts: live together, so c cannot take b's tag; d can.
    tags = plan_tags([64, 64, 64], [0, 1, 2], [1, 2, 2])
    assert tags.tag_of.tolist() == [0, 1, 0]


def test_the_smallest_free_tag_that_holds_the_request_is_taken() -> None:
    # Three tags freed at kernel 0 (500, 300, 200 bytes); at kernel 1, 250 then 150 bytes.
    tags = plan_tags([500, 300, 200, 250, 150], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1])
    assert tags.tag_of.tolist() == [0, 1, 2, 1, 2]  # 250 -> 300; 150 -> 200
    assert tags.tag_bytes.tolist() == [500, 300, 200]


def test_a_smaller_free_tag_grows_and_match_range_bounds_both_sides() -> None:
    # A free 100-byte tag serves requests from 100 // 16 ... 1600 // 16 = 100 up to 1615 bytes
    # (growing), the tag's own size up to 16 times the request.
    assert plan_tags([100, 1600], [0, 1], [0, 1]).tag_bytes.tolist() == [1600]
    assert plan_tags([100, 1615], [0, 1], [0, 1]).tag_bytes.tolist() == [1615]
    assert plan_tags([100, 1616], [0, 1], [0, 1]).tag_bytes.tolist() == [100, 1616]
    assert plan_tags([1600, 100], [0, 1], [0, 1]).tag_bytes.tolist() == [1600]
    assert plan_tags([1616, 100], [0, 1], [0, 1]).tag_bytes.tolist() == [1616, 100]
    # match_range 1: only a free tag of exactly the request's size
    assert plan_tags([100, 100], [0, 1], [0, 1], match_range=1).tag_bytes.tolist() == [100]
    assert plan_tags([100, 101], [0, 1], [0, 1], match_range=1).tag_bytes.tolist() == [100, 101]
    assert plan_tags([101, 100], [0, 1], [0, 1], match_range=1).tag_bytes.tolist() == [101, 100]
    assert plan_tags([100, 101], [0, 1], [0, 1], match_range=2).tag_bytes.tolist() == [101]


def test_equal_free_tags_go_earliest_freed_first_and_grow_latest_freed_first() -> None:
    # Tags 0 and 1 (64 bytes) are freed at kernels 0 and 1; at kernel 2 a 64-byte request
    # takes tag 0. Freed the same way, a larger request grows the one freed last, tag 1.
    assert plan_tags([64, 64, 64], [0, 0, 2], [0, 1, 2]).tag_of.tolist() == [0, 1, 0]
    grown = plan_tags([64, 64, 96], [0, 0, 2], [0, 1, 2])
    assert grown.tag_of.tolist() == [0, 1, 1]
    assert grown.tag_bytes.tolist() == [64, 96]


def test_a_kernel_gives_tags_largest_first() -> None:
    # Freed at kernel 0: a 100-byte tag. At kernel 1 a 60- and a 90-byte buffer start: the
    # 90 goes first and takes it; the 60 gets a new tag.
    assert plan_tags([100, 60, 90], [0, 1, 1], [0, 1, 1]).tag_of.tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1, 2], [0], [0]), "one length"),
        (([0], [0], [0]), "size must be positive"),
        (([4], [-1], [1]), "first kernel is negative"),
        (([4], [3], [1]), "first kernel after last"),
    ],
)
def test_bad_buffers_are_refused(
    args: tuple[list[int], list[int], list[int]], message: str
) -> None:
    with pytest.raises(TmsimError, match=message):
        plan_tags(*args)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_match_range_is_refused(bad: object) -> None:
    with pytest.raises(TmsimError, match="match_range"):
        plan_tags([1], [0], [0], match_range=bad)  # type: ignore[arg-type]


def reference_tags(
    sizes: list[int], first: list[int], last: list[int], match: int
) -> tuple[list[int], list[int]]:
    """The same algorithm written plainly: every free tag scanned at every request."""
    n = len(sizes)
    tag_of, tag_size = [-1] * n, []
    free: list[tuple[int, int]] = []  # (tag, when it was freed)
    freed = 0
    for k in range(max(last, default=-1) + 1):
        for b in sorted((b for b in range(n) if first[b] == k), key=lambda b: (-sizes[b], b)):
            need = sizes[b]
            fits = [
                (tag_size[t], when, t) for t, when in free if need <= tag_size[t] <= need * match
            ]
            under = [
                (tag_size[t], when, t) for t, when in free if need // match <= tag_size[t] < need
            ]
            if fits:
                pick = min(fits)[2]
            elif under:
                pick = max(under)[2]
                tag_size[pick] = need
            else:
                tag_size.append(need)
                pick = len(tag_size) - 1
            free = [(t, w) for t, w in free if t != pick]
            tag_of[b] = pick
        for b in range(n):
            if last[b] == k:
                free.append((tag_of[b], freed))
                freed += 1
    return tag_of, tag_size


@st.composite
def buffers(draw: st.DrawFn, equal: bool = False) -> tuple[list[int], list[int], list[int]]:
    n = draw(st.integers(0, 14))
    size = st.just(48) if equal else st.sampled_from([1, 7, 16, 16, 64, 100, 250, 1000, 5000])
    sizes = [draw(size) for _ in range(n)]
    first = [draw(st.integers(0, 8)) for _ in range(n)]
    last = [f + draw(st.integers(0, 4)) for f in first]
    return sizes, first, last


@settings(max_examples=300, deadline=None)
@given(buffers(), st.sampled_from([1, 2, 4, DEFAULT_MATCH_RANGE]))
def test_the_plain_reimplementation_agrees(
    case: tuple[list[int], list[int], list[int]], match: int
) -> None:
    sizes, first, last = case
    tags = plan_tags(sizes, first, last, match)
    assert (tags.tag_of.tolist(), tags.tag_bytes.tolist()) == reference_tags(*case, match)


@settings(max_examples=300, deadline=None)
@given(buffers())
def test_tags_are_never_shared_by_buffers_live_together(
    case: tuple[list[int], list[int], list[int]],
) -> None:
    sizes, first, last = case
    tags = plan_tags(sizes, first, last)
    n = len(sizes)
    for a in range(n):
        for b in range(a + 1, n):
            if first[a] <= last[b] and first[b] <= last[a]:
                assert tags.tag_of[a] != tags.tag_of[b]
    for t, size in enumerate(tags.tag_bytes.tolist()):
        assert size == max(s for s, tag in zip(sizes, tags.tag_of, strict=True) if tag == t)
    peak = int(occupancy(first, last, sizes, 13).max()) if n else 0
    assert peak <= tags.pool_bytes <= sum(sizes)


@settings(max_examples=200, deadline=None)
@given(buffers(equal=True))
def test_one_size_for_all_reaches_the_peak(case: tuple[list[int], list[int], list[int]]) -> None:
    # With one size, taking any free tag before making one colours an interval graph in order
    # of start, which needs no more colours than buffers live at once.
    sizes, first, last = case
    peak = int(occupancy(first, last, sizes, 13).max()) if sizes else 0
    assert plan_tags(sizes, first, last).pool_bytes == peak
    assert np.all(plan_tags(sizes, first, last).offsets_bytes % 48 == 0)
