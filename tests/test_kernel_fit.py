"""The H200 kernel model: the fit reruns from its data to the preset's numbers, and the
preset predicts the measured training steps (calibration/h200, measured 2026-11-28)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hwmodels import KernelFamily, load_preset
from tmsim.calibration.kernel_fit import (
    H200_CONFIGS,
    H200_DIR,
    fit_dispatch,
    fit_h200,
    fit_kernels,
    kernels_toml,
    read_measured,
)
from tmsim.calibration.op_profiles import line_up, read_eager_profile
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.workload.files import load_graph

#: The bound on |predicted / measured - 1| of each measured step (the issue's target).
STEP_TOLERANCE = 0.10


@pytest.fixture(scope="module")
def fitted() -> object:
    return fit_h200()


def test_the_fit_reruns_to_the_preset(fitted: object) -> None:
    """Every number of the preset's [compute.kernels] is the fit's, to its printed digits."""
    preset = load_preset("h200-host-nvme").compute.kernels
    assert preset is not None
    model = fitted.model  # type: ignore[attr-defined]
    pairs = [
        (model.stream_bw_bytes_per_s, preset.stream_bw_bytes_per_s),
        (model.fixed_s, preset.fixed_s),
        (model.dispatch_s, preset.dispatch_s),
        (model.unaligned_efficiency, preset.unaligned_efficiency),
    ]
    for fam in KernelFamily:
        got, kept = model.family(fam), preset.family(fam)
        pairs += [
            (got.passes, kept.passes),
            (got.compute_efficiency, kept.compute_efficiency),
            (got.element_s, kept.element_s),
            (got.fixed_s or 0.0, kept.fixed_s or 0.0),
            (got.saturation_units, kept.saturation_units),
        ]
    for got, kept in pairs:
        assert got == pytest.approx(kept, rel=1e-3, abs=1e-15)
    assert "[compute.kernels.families]" in kernels_toml(model)


@pytest.mark.parametrize("config", H200_CONFIGS)
def test_the_preset_predicts_each_measured_step(config: str) -> None:
    """The all-on-device step the preset predicts for each traced graph, against the step
    measured on the H200 (the prediction is computed; the measurement is data)."""
    measured = read_measured(H200_DIR / "results.json").step_s[config]
    graph = load_graph(H200_DIR / "graphs" / f"{config}.json")
    cost = CostModel(graph, load_preset("h200-host-nvme"))
    predicted = float(cost.kernel_times_s(np.zeros(cost.op_tensor.size, dtype=np.int64)).sum())
    assert abs(predicted / measured - 1) <= STEP_TOLERANCE


def test_batch_norms_reach_their_rate_from_a_few_hundred_channels(fitted: object) -> None:
    """cuDNN's batch norms reduce each channel on its own: on the H200 the same 154 MB backward
    took 79 us on 1024 channels and 296 us on 64 (ops_resnet50_b64.csv). The fit puts the
    channels they need near one or two per streaming multiprocessor (132), and with them each
    family's samples fit within 26% (rms of the log ratio; 38% and 54% with none)."""
    model = fitted.model  # type: ignore[attr-defined]
    per_family = fitted.per_family  # type: ignore[attr-defined]
    for fam in (KernelFamily.BATCH_NORM, KernelFamily.BATCH_NORM_BACKWARD):
        assert 100 < model.family(fam).saturation_units < 400
        assert per_family[fam.value][1] < 0.26
    assert model.family(KernelFamily.CONV).saturation_units == 0.0


def test_a_step_held_out_of_the_fit_is_predicted_within_10_percent() -> None:
    """Fitted to the other three profiles (ResNet-50 b32, GPT-2 fp32 and bf16), the model
    predicts ResNet-50 b64's step within 10% (1.084 of the measured 32.13 ms; 1.119 without
    the batch norms' channels)."""
    from dataclasses import replace

    measured = read_measured(H200_DIR / "results.json")
    base = load_preset("h200-host-nvme")
    data = {
        n: (
            load_graph(H200_DIR / "graphs" / f"{n}.json"),
            read_eager_profile(H200_DIR / f"ops_{n}.csv"),
        )
        for n in H200_CONFIGS
    }
    keep = [n for n in H200_CONFIGS if n != "resnet50_b64"]
    dispatch = fit_dispatch([([o.device_s for o in data[n][1]], measured.step_s[n]) for n in keep])
    model = fit_kernels([data[n] for n in keep], measured, base, dispatch).model
    graph = data["resnet50_b64"][0]
    cost = CostModel(graph, replace(base, compute=replace(base.compute, kernels=model)))
    step = float(cost.kernel_times_s(np.zeros(cost.op_tensor.size, dtype=np.int64)).sum())
    assert abs(step / measured.step_s["resnet50_b64"] - 1) <= STEP_TOLERANCE


def test_every_family_of_the_profiles_is_fitted(fitted: object) -> None:
    per_family = fitted.per_family  # type: ignore[attr-defined]
    for fam in ("conv", "conv_backward", "matmul", "batch_norm", "softmax", "optimizer"):
        n, rms = per_family[fam]
        assert n >= 2
        assert math.isfinite(rms)
    # Matrix products: 394 kernels within about 16% (rms of the log ratio).
    assert per_family["matmul"][1] < 0.2


def test_profiles_line_up_with_their_graphs() -> None:
    """ResNet-50's convolutions pair one for one, in order: the k-th forward convolution of
    the profile is the k-th of the graph (the first, 7x7 on 3 channels, is the slowest)."""
    graph = load_graph(H200_DIR / "graphs" / "resnet50_b32.json")
    ops = read_eager_profile(H200_DIR / "ops_resnet50_b32.csv")
    samples = line_up(graph, ops)
    convs = [s for s in samples if s.family is KernelFamily.CONV]
    assert len(convs) == 53
    assert all(len(s.kernels) == 1 for s in convs)
    assert convs[0].kernels == (0,)
    assert convs[0].seconds == max(s.seconds for s in convs)
    # The optimizer's 161 per-parameter kernels against PyTorch's 3 multi-tensor ops: a sum.
    (update,) = [s for s in samples if s.family is KernelFamily.OPTIMIZER]
    assert len(update.kernels) == 161


def test_fit_dispatch_by_hand() -> None:
    """Ops of 1, 1 and 10 us in a step of 16 us: the host issuing one every 2 us makes the
    device wait 2 + 1 + 1 us (tests/test_kernel_model.py)."""
    assert fit_dispatch([([1e-6, 1e-6, 1e-5], 1.6e-5)]) == pytest.approx(2e-6, rel=1e-3)


def test_a_bad_profile_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "ops.csv"
    bad.write_text("name,device_us,shapes\naten::add,fast,[]\n")
    with pytest.raises(TmsimError, match=r"ops.csv:2: device_us 'fast' is not a number"):
        read_eager_profile(bad)
    bad.write_text("name,shapes\n")
    with pytest.raises(TmsimError, match="missing column"):
        read_eager_profile(bad)
    with pytest.raises(TmsimError, match="cannot read"):
        read_eager_profile(tmp_path / "absent.csv")
    with pytest.raises(TmsimError, match=r"not an h200_measure\.py results file"):
        read_measured(bad)
    assert line_up(load_graph(H200_DIR / "graphs" / "resnet50_b32.json"), []) == []


def test_save_on_cpu_predicts_the_measured_step() -> None:
    """ResNet-50 fp32 b64 under PyTorch's save_on_cpu(pin_memory=True) measured 376 ms on the
    H200; the save-on-cpu plan on the preset is predicted within 20% (the issue's bound)."""
    import json

    import tmsim

    doc = json.loads((H200_DIR / "results.json").read_text())
    measured = doc["training"]["resnet50_b64"]["save_on_cpu"]["step_s"]
    graph = load_graph(H200_DIR / "graphs" / "resnet50_b64.json")
    plan = tmsim.plan(graph, load_preset("h200-host-nvme"), "save-on-cpu")
    assert abs(plan.predicted_s / measured - 1) <= 0.20


@pytest.mark.parametrize("config", H200_CONFIGS)
def test_the_peak_is_within_5_percent_of_the_measured_one(config: str) -> None:
    """The all-fast plan's device peak against torch.cuda.max_memory_allocated on the H200
    (measured 3.06, 5.83, 22.47 and 11.99 GB; tmsim 2.5, 1.2, 0.5 and 1.0% below)."""
    import json

    import tmsim

    doc = json.loads((H200_DIR / "results.json").read_text())["training"][config]
    graph = load_graph(H200_DIR / "graphs" / f"{config}.json")
    platform = load_preset("h200-host-nvme")
    plan = tmsim.plan(graph, platform, "all-fast")
    peak = tmsim.validate(plan, graph, platform).fast_peak_bytes
    assert abs(peak / doc["peak_allocated"] - 1) <= 0.05


@pytest.mark.parametrize("name", ["h100-host-nvme", "h100-pcie5", "gh200"])
def test_the_other_hopper_presets_carry_the_h200_model(name: str) -> None:
    """The same Hopper GPU: the H200's fitted families, fixed and dispatch times and peaks;
    only the stream rate is the machine's own (the H100's HBM3 scaled by the H200's measured
    stream efficiency; GH200's GPU STREAM)."""
    h200 = load_preset("h200-host-nvme").compute
    other = load_preset(name).compute
    assert h200.kernels is not None and other.kernels is not None
    assert other.kernels.families == h200.kernels.families
    assert (other.kernels.fixed_s, other.kernels.dispatch_s) == (
        h200.kernels.fixed_s,
        h200.kernels.dispatch_s,
    )
    assert dict(other.peak_flop_per_s) == dict(h200.peak_flop_per_s)
    assert other.kernels.stream_bw_bytes_per_s < h200.kernels.stream_bw_bytes_per_s
