"""Memory tiers and the read/write interference model, against the Optane study's data.

Data: Yang, Kim, Hoseinzadeh, Izraelevitz, Swanson, "An Empirical Guide to the Behavior and Use
of Scalable Persistent Memory", USENIX FAST 2020 (figure data of NVSL/OptaneStudy, copied
into reference/optane-study/). Numbers below are copied from those CSV files.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodels import HardwareModelError, Interference, MemoryTier, load_preset

GB = 1e9

# Fig. 17, 17-numa.csv, column Optane-4 (local socket, 4 threads): GB/s by read fraction.
FIG17_OPTANE_4 = {
    1.0: 14.61962891,  # R
    4 / 5: 13.84111328,  # R:W 4:1
    3 / 4: 12.74951172,  # R:W 3:1
    2 / 3: 10.40605469,  # R:W 2:1
    1 / 2: 6.898730469,  # R:W 1:1
    0.0: 13.50947266,  # W
}

# Fig. 4, 04-bandwidth_thcount_optane.csv, the middle column, which reference/README.md
# identifies as ntstore (peak 12.5 GB/s at 4 threads): GB/s by thread count.
FIG4_OPTANE_NTSTORE = dict(
    zip(
        range(1, 25),
        [
            4.13,
            8.19,
            11.81,
            12.50,
            12.50,
            12.31,
            12.25,
            12.00,
            11.81,
            11.63,
            11.38,
            10.69,
            10.56,
            10.00,
            9.38,
            10.00,
            9.56,
            9.00,
            9.13,
            8.75,
            7.88,
            8.25,
            8.19,
            7.50,
        ],
        strict=True,
    )
)


def pmm() -> MemoryTier:
    return load_preset("cascadelake-optane").tier("PMM")


def dram() -> MemoryTier:
    return load_preset("cascadelake-optane").tier("DRAM")


def test_mix_model_reproduces_fig17_four_thread_mixes_within_15_percent() -> None:
    """The fitted mix factor, applied to the pure-mode rates measured at the same thread
    count (Fig. 17: read 14.6, write 13.5 GB/s), predicts each measured mix within 15%."""
    at_4_threads = replace(
        pmm(),
        read_bw_bytes_per_s=FIG17_OPTANE_4[1.0] * GB,
        write_bw_bytes_per_s=FIG17_OPTANE_4[0.0] * GB,
    )
    for f, measured in FIG17_OPTANE_4.items():
        predicted = float(at_4_threads.effective_bw_bytes_per_s(f, n_writers=4)) / GB
        assert predicted == pytest.approx(measured, rel=0.15), f
    # The headline: a 1:1 mix gets about 6.9 GB/s in total, less than either pure mode.
    one_to_one = float(at_4_threads.effective_bw_bytes_per_s(0.5, 4)) / GB
    assert one_to_one < min(FIG17_OPTANE_4[1.0], FIG17_OPTANE_4[0.0]) / 1.8
    assert one_to_one == pytest.approx(6.9, rel=0.05)


def test_write_falloff_reproduces_fig4_from_4_to_24_threads_within_15_percent() -> None:
    """Below 4 threads each thread, not the device, limits writes, so the device model
    claims 4..24 writers: 12.5 GB/s at 4, about 7.5 at 24."""
    tier = pmm()
    for n in range(4, 25):
        predicted = float(tier.write_bw_at(n)) / GB
        assert predicted == pytest.approx(FIG4_OPTANE_NTSTORE[n], rel=0.15), n
    assert float(tier.write_bw_at(4)) / GB == pytest.approx(12.5)
    assert float(tier.write_bw_at(24)) / GB == pytest.approx(7.5, rel=0.05)


def test_dram_has_no_interference_and_keeps_its_write_bandwidth() -> None:
    """04-bandwidth_thcount_dram.csv: DRAM ntstore bandwidth rises up to 24 threads (76.8)."""
    tier = dram()
    assert float(tier.write_bw_at(24)) == tier.write_bw_bytes_per_s == 76.8 * GB
    assert float(tier.service_time_s(3e9, 5e9)) == pytest.approx(3e9 / 104.6e9 + 5e9 / 76.8e9)


def test_a_written_byte_costs_more_than_a_read_byte_on_optane() -> None:
    tier = pmm()
    assert float(tier.service_time_s(0, 1e9)) > float(tier.service_time_s(1e9, 0))
    assert float(tier.service_time_s(0, 1e9, 24)) > float(tier.service_time_s(0, 1e9, 4))


@given(
    r=st.floats(1.0, 1e12),
    w=st.floats(1.0, 1e12),
    writers=st.integers(0, 64),
)
def test_a_mix_costs_more_than_its_parts_on_optane(r: float, w: float, writers: int) -> None:
    tier = pmm()
    together = float(tier.service_time_s(r, w, writers))
    apart = float(tier.service_time_s(r, 0, writers) + tier.service_time_s(0, w, writers))
    assert together >= apart  # equal only when one side is negligible
    factor = 1 + (4 * r * w / (r + w) ** 2) ** 8  # the fitted penalty 1, exponent 8
    assert together == pytest.approx(apart * factor, rel=1e-9)


@given(f=st.floats(0.0, 1.0), writers=st.integers(0, 40))
def test_effective_bandwidth_is_the_inverse_of_service_time(f: float, writers: int) -> None:
    tier = pmm()
    nbytes = 1e9
    t = float(tier.service_time_s(f * nbytes, (1 - f) * nbytes, writers))
    assert float(tier.effective_bw_bytes_per_s(f, writers)) * t == pytest.approx(nbytes)


@given(
    penalty=st.floats(0.0, 5.0),
    exponent=st.floats(0.1, 20.0),
    # multiples of 2**-20, so that 1 - f is exact and symmetry can be asked of floats
    f=st.integers(0, 1 << 20).map(lambda n: n / (1 << 20)),
)
def test_mix_factor_shape(penalty: float, exponent: float, f: float) -> None:
    i = Interference(mix_penalty=penalty, mix_exponent=exponent)
    assert float(i.mix_factor(0.0)) == float(i.mix_factor(1.0)) == 1.0
    assert float(i.mix_factor(0.5)) == pytest.approx(1 + penalty)
    assert float(i.mix_factor(f)) == pytest.approx(float(i.mix_factor(1 - f)))  # symmetric
    assert 1.0 <= float(i.mix_factor(f)) <= 1 + penalty + 1e-12


def test_service_time_of_nothing_is_zero_and_arrays_broadcast() -> None:
    tier = pmm()
    assert float(tier.service_time_s(0, 0)) == 0.0
    out = tier.service_time_s(np.array([1e9, 0, 5e8]), np.array([0, 1e9, 5e8]), 4)
    assert out.shape == (3,)
    assert out[0] == pytest.approx(1e9 / 37.6e9)
    assert out[1] == pytest.approx(1e9 / 12.5e9)
    assert out[2] == pytest.approx((5e8 / 37.6e9 + 5e8 / 12.5e9) * 2)  # 1:1 mix doubles


def test_small_accesses_cost_whole_granules() -> None:
    """Optane's XPLine is 256 B: 64 B random accesses move four times their size. Fig. 5
    (05-bandwidth_accesssize_optane.csv) measures 9.67 GB/s at 64 B against 33.65 at 256 B,
    a ratio of 0.287; the model's 1/4 is within 15%."""
    tier = pmm()
    assert float(tier.device_bytes(1024, 64)) == 4096
    assert float(tier.device_bytes(1024, 256)) == 1024
    assert float(tier.device_bytes(1000, 300)) == pytest.approx(1000 * 512 / 300)
    assert 1024 / float(tier.device_bytes(1024, 64)) == pytest.approx(9.67 / 33.65, rel=0.15)
    assert float(dram().device_bytes(1024, 64)) == 1024


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"capacity_bytes": 0}, "capacity_bytes must be a positive integer"),
        ({"capacity_bytes": 1.5}, "capacity_bytes must be a positive integer"),
        ({"read_bw_bytes_per_s": 0.0}, "read_bw_bytes_per_s must be a number of 1 to 1e21 per"),
        ({"write_bw_bytes_per_s": -1.0}, "write_bw_bytes_per_s must be a number of 1 to 1e21"),
        ({"read_bw_bytes_per_s": 5e-324}, "read_bw_bytes_per_s must be .*, got 5e-324"),
        ({"read_bw_bytes_per_s": 10**400}, "read_bw_bytes_per_s must be .*, got about 2"),
        ({"capacity_bytes": 2**62 + 1}, "capacity_bytes must be a positive integer of at most"),
        ({"access_granularity_bytes": 2**70}, "access_granularity_bytes must be a positive"),
        ({"write_bw_bytes_per_s": float("inf")}, "write_bw_bytes_per_s"),
        ({"read_latency_s": -1e-9}, "read_latency_s must be a number of 0 to 1 s"),
        ({"write_latency_s": 1.5}, "write_latency_s must be a number of 0 to 1 s, got 1.5"),
        ({"access_granularity_bytes": 0}, "access_granularity_bytes"),
        ({"name": ""}, "name must be a non-empty string"),
    ],
)
def test_bad_tiers_are_rejected_naming_tier_and_field(
    change: dict[str, object], match: str
) -> None:
    with pytest.raises(HardwareModelError, match=match) as info:
        replace(pmm(), **change)  # type: ignore[arg-type]
    if "name" not in change:
        assert "tier 'PMM'" in str(info.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"mix_penalty": -0.1}, "mix_penalty"),
        ({"mix_exponent": 0.0}, "mix_exponent"),
        ({"write_falloff_per_writer": float("nan")}, "write_falloff_per_writer"),
        ({"write_falloff_onset_writers": -1}, "write_falloff_onset_writers"),
    ],
)
def test_bad_interference_is_rejected(change: dict[str, object], match: str) -> None:
    with pytest.raises(HardwareModelError, match=match):
        Interference(**change)  # type: ignore[arg-type]


def test_bad_arguments_are_rejected() -> None:
    tier = pmm()
    with pytest.raises(HardwareModelError, match="read_fraction"):
        tier.effective_bw_bytes_per_s(1.5)
    with pytest.raises(HardwareModelError, match="n_writers"):
        tier.write_bw_at(-1)
    with pytest.raises(HardwareModelError, match="byte counts"):
        tier.service_time_s(-1, 0)
    with pytest.raises(HardwareModelError, match="access_bytes"):
        tier.device_bytes(10, 0)
