"""The memory controller's fitted interference mechanisms against the measurements they were
fitted to and checked on, as a table: what the ``interference_calibration`` figure draws."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tmsim.api.inputs import platform as load_platform
from tmsim.calibration import channel_fit, mixing

#: The relative error within which a modelled co-run side counts as matching its measurement.
INTERFERENCE_TOLERANCE = channel_fit.TOLERANCE

#: AutoTM's synchronous PMM -> DRAM copy, measured on a Cascade Lake machine (GB/s;
#: ``cpu_pmem_dram_sync`` in darchr/AutoTM, the preset's copy path).
COPY_MEASURED_GBPS = 29.0


def interference_rows(platform: str = "cascadelake-optane", *, refit: bool = False) -> pd.DataFrame:
    """One row per measured rate: ``set`` (``corun``: every side of every DRAM/PMM co-run of
    :data:`tmsim.calibration.channel_fit.CORUNS`, modelled with the fitted mechanisms;
    ``mixing``: the 16-thread reader/writer split of :mod:`tmsim.calibration.mixing` on
    ``platform``, with its PMM tier's write overlap and its controller replaced by them),
    ``case``, ``side``,
    ``measured_gbps``, ``modelled_gbps``, ``error`` (relative) and, for the mixing curve,
    ``line_gbps`` (the straight line between the measured pure ends); then ``local-mix``:
    one flow's own read/write mix against Yang et al.'s Fig. 17 (:func:`mixing.local_mix`,
    ``case`` the read fraction), and ``copy``: AutoTM's synchronous PMM -> DRAM copy against
    the channels' rate for it (:func:`channel_fit.copy_check`), checked, not fitted.
    ``refit``: search the mechanisms again, about two minutes
    (:func:`~tmsim.calibration.channel_fit.fit_from_starts`), instead of using the stored
    :data:`~tmsim.calibration.channel_fit.FITTED`."""
    params = channel_fit.fit_from_starts().params if refit else channel_fit.FITTED
    out: list[dict[str, object]] = []
    for run in channel_fit.CORUNS:
        a, b = channel_fit.modelled(params, run)
        for side, got, want in (
            (f"{run.a_kind} x{run.a_threads}", a, run.a_together),
            (f"{run.b_kind} x{run.b_threads}", b, run.b_together),
        ):
            if want is None:
                continue
            out.append(
                {
                    "set": "corun",
                    "case": run.name,
                    "side": side,
                    "measured_gbps": want,
                    "modelled_gbps": got,
                    "error": got / want - 1,
                    "line_gbps": np.nan,
                }
            )
    calibrated = channel_fit.calibrated(load_platform(platform), params)
    for p in mixing.thread_mix(calibrated):
        out.append(
            {
                "set": "mixing",
                "case": f"{p.readers}-{p.writers}",
                "side": "readers-writers",
                "measured_gbps": p.measured,
                "modelled_gbps": p.modelled,
                "error": p.modelled / p.measured - 1,
                "line_gbps": p.line,
            }
        )
    for f, want, got in mixing.local_mix(calibrated):
        out.append(
            {
                "set": "local-mix",
                "case": f"{f:.2f}",
                "side": "one flow's own mix",
                "measured_gbps": want,
                "modelled_gbps": got,
                "error": got / want - 1,
                "line_gbps": np.nan,
            }
        )
    copy = channel_fit.copy_check(params)
    out.append(
        {
            "set": "copy",
            "case": "AutoTM sync PMM -> DRAM",
            "side": "copy",
            "measured_gbps": COPY_MEASURED_GBPS,
            "modelled_gbps": copy,
            "error": copy / COPY_MEASURED_GBPS - 1,
            "line_gbps": np.nan,
        }
    )
    return pd.DataFrame(out)


__all__ = ["COPY_MEASURED_GBPS", "INTERFERENCE_TOLERANCE", "interference_rows"]
