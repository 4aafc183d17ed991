"""When no MILP plan fits because a slower tier is too small, the error names that tier and
its bytes, not only the fast tier's limit.

ResNet-50 at batch 8 has 930 MB live at its peak; at 4:1 the fast tier may hold 186 MB of
them, so the slower tiers must hold the other 744 MB at that kernel. Shrunk to 200 MB (the
Optane PMM) or 10 MB (a GPU's host memory, through which the NVMe drive is reached), they
cannot: the fast tier's limit alone would do with the preset's slower tiers.
"""

from __future__ import annotations

import re

import pytest

import tmsim
from tmsim.errors import InfeasibleError

PEAK = 930451168
LIMIT = 186090233


@pytest.fixture(scope="module")
def resnet() -> tmsim.Graph:
    g = tmsim.graph("resnet50", batch=8)
    assert g.peak_live_bytes == PEAK
    return g


def _message(
    graph: tmsim.Graph, name: str, overrides: dict[str, int], strategy: str, **settings: object
) -> str:
    with pytest.raises(InfeasibleError) as info:
        tmsim.plan(graph, tmsim.platform(name, overrides), strategy, fast="4:1", **settings)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("strategy", ["static", "sync"])
def test_a_small_slow_tier_is_named_with_its_bytes(resnet: tmsim.Graph, strategy: str) -> None:
    message = _message(
        resnet, "cascadelake-optane", {"tiers.PMM.capacity_bytes": 200_000_000}, strategy
    )
    assert "tier 'PMM'" in message and "200000000 bytes" in message
    assert str(LIMIT) in message  # the fast tier's limit, beside it
    assert re.search(r"kernel \d+ \(", message)


def test_a_gpus_small_host_tier_is_named(resnet: tmsim.Graph) -> None:
    message = _message(resnet, "h100-pcie5", {"tiers.host.capacity_bytes": 10_000_000}, "sync")
    assert "tier 'host'" in message and "10000000 bytes" in message


def test_the_middle_tier_of_three_is_named_when_it_binds(resnet: tmsim.Graph) -> None:
    """The drive holds terabytes, but every copy to it passes through the 10 MB host tier:
    the tensors larger than that can never leave the device."""
    message = _message(resnet, "h100-host-nvme", {"tiers.host.capacity_bytes": 10_000_000}, "sync")
    assert "tier 'host'" in message and "10000000 bytes" in message
    assert "'nvme'" in message


def test_the_fast_limit_alone_keeps_its_message(resnet: tmsim.Graph) -> None:
    """Where the slower tiers hold everything, a plan that does not fit is the fast tier's:
    the static formulation on a GPU at a ratio where the live tensors cannot all stay."""
    message = _message(resnet, "h100-pcie5", {}, "static")
    assert "tier 'host'" not in message and str(LIMIT) in message


def test_a_formulation_that_may_drop_tensors_is_solved_and_names_the_tier_it_models(
    resnet: tmsim.Graph,
) -> None:
    """Recomputing, sync-rc may drop what no tier holds, so nothing is certain before the
    solve; when the solver proves there is no plan, the message names the slower tier whose
    capacity the model holds beside the fast tier's limit."""
    # at the deepest depth the planner deepens to: one solve (no depth fits here); with the
    # update kernels kept on the device, as the host's choices only lengthen the proof (207 s
    # against 6 s on two cores)
    host = {"tiers.host.capacity_bytes": 10_000_000}
    message = _message(
        resnet, "h100-host-nvme", host, "sync-rc", recompute_depth=8, host_kernels=False
    )
    assert message.startswith("no sync-rc plan fits in 0.186 GB of fast memory")
    assert "tier 'host'" in message


def test_a_chain_holds_the_error_for_what_it_was_asked_only(resnet: tmsim.Graph) -> None:
    p = tmsim.platform("cascadelake-optane", {"tiers.PMM.capacity_bytes": 200_000_000})
    chain = tmsim.plan_chain(resnet, p, "sync", fast="4:1")
    assert list(chain) == ["static", "sync"]
    assert all(isinstance(v, InfeasibleError) and "tier 'PMM'" in str(v) for v in chain.values())
