"""Table: async over sync simulated step time at each interference level and under variants
of the copy thread and the PMM device, on the Optane preset (the simulation guide's "What
the three levels give").

For each workload at 4:1 the sync and async plans are made once on the preset as shipped
(:func:`tmsim.plan`, :data:`SETTINGS`) and replayed at each level, then at the
``controller`` level on variants of the preset: no core term (``core_slowdown`` 0), dynamic
partitioning (``straggler`` 1/24), a dedicated copy core, no write overlap. A cell is the
async plan's simulated step over the sync plan's on the same level and variant.
``python -m experiments.level_table`` prints the table as the guide's CSV rows.
"""

from __future__ import annotations

from dataclasses import replace

import tmsim
from experiments.common import label as workload_label
from tmsim import Capacity, PlanSettings, Platform

#: (zoo model, batch) pairs.
WORKLOADS = (("inception_v4", 16), ("vgg19", 256), ("resnet50", 8), ("densenet121", 16))

#: The planners' settings: 4:1, a 1% gap, a 60 s cap per formulation.
SETTINGS = PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=60.0, gap=0.01)


def variants(platform: Platform) -> dict[str, Platform]:
    """The ``controller``-level variants of ``platform`` by column label."""
    thread = platform.copy_thread
    assert thread is not None
    pmm = platform.tier("PMM")
    no_overlap = replace(pmm, interference=replace(pmm.interference, write_overlap=0.0))
    return {
        "no core term (s = 0)": replace(platform, copy_thread=replace(thread, core_slowdown=0.0)),
        "sigma = 1/24": replace(platform, copy_thread=replace(thread, straggler=1 / 24)),
        "dedicated core": replace(platform, copy_thread=replace(thread, core="dedicated")),
        "no write overlap": replace(
            platform,
            tiers=tuple(no_overlap if t.name == "PMM" else t for t in platform.tiers),
        ),
    }


def rows(platform_name: str = "cascadelake-optane") -> list[list[str]]:
    """The table: a header, then per workload the predicted ratio and one per column."""
    platform = tmsim.platform(platform_name)
    extra = variants(platform)
    levels = ("none", "bandwidth", "controller")
    out = [["workload", "predicted", *levels, *extra]]
    for model, batch in WORKLOADS:
        graph = tmsim.graph(model, batch=batch)
        sync = tmsim.plan(graph, platform, "sync", settings=SETTINGS)
        asyn = tmsim.plan(graph, platform, "async", settings=SETTINGS)
        label = workload_label(model, batch)
        if asyn.predicted_s >= sync.predicted_s:
            out.append([label, "1.000 (no async move)"] + [""] * (len(levels) + len(extra)))
            continue
        row = [label, f"{asyn.predicted_s / sync.predicted_s:.3f}"]
        for level in levels:
            a = tmsim.simulate(asyn, graph, platform, interference=level).step_time_s
            s = tmsim.simulate(sync, graph, platform, interference=level).step_time_s
            row.append(f"{a / s:.3f}")
        for variant in extra.values():
            a = tmsim.simulate(asyn, graph, variant).step_time_s
            s = tmsim.simulate(sync, graph, variant).step_time_s
            row.append(f"{a / s:.3f}")
        out.append(row)
    return out


def main() -> None:
    for row in rows():
        print(" | ".join(row))


if __name__ == "__main__":
    main()
