"""The memory controller's fitted interference mechanisms against the measurements they were
fitted to and checked on, as a table: what the ``interference_calibration`` figure draws."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tmsim.api.inputs import platform as load_platform
from tmsim.calibration import channel_fit, mixing

#: The relative error within which a modelled co-run side counts as matching its measurement.
INTERFERENCE_TOLERANCE = channel_fit.TOLERANCE


def interference_rows(platform: str = "cascadelake-optane", *, refit: bool = False) -> pd.DataFrame:
    """One row per measured rate: ``set`` (``corun``: every side of every DRAM/PMM co-run of
    :data:`tmsim.calibration.channel_fit.CORUNS`, modelled with the fitted mechanisms;
    ``mixing``: the 16-thread reader/writer split of :mod:`tmsim.calibration.mixing` on
    ``platform``, with its PMM tier's write overlap and its controller replaced by them),
    ``case``, ``side``,
    ``measured_gbps``, ``modelled_gbps``, ``error`` (relative) and, for the mixing curve,
    ``line_gbps`` (the straight line between the measured pure ends). ``refit``: fit the
    mechanisms again from :data:`tmsim.calibration.channel_fit.START` (seconds) instead of
    using the stored :data:`~tmsim.calibration.channel_fit.FITTED`."""
    params = channel_fit.fit().params if refit else channel_fit.FITTED
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
    return pd.DataFrame(out)


__all__ = ["INTERFERENCE_TOLERANCE", "interference_rows"]
