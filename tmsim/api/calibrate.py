"""The machine at hand as a platform: :func:`calibrate` measures it and writes a platform
file that ``--platform`` and :func:`tmsim.platform` take."""

from __future__ import annotations

import os

from hwmodels.platform import Platform
from tmsim.calibration.machine import measure_machine
from tmsim.calibration.machine_toml import NAME, calibrated_platform
from tmsim.errors import TmsimError, shown_path


def calibrate(
    out: str | os.PathLike[str] | None = None,
    *,
    name: str = "this-machine",
    device: str = "auto",
    quick: bool = False,
) -> Platform:
    """Measure this machine (:mod:`tmsim.calibration.machine`: memory read, write and copy
    rates, matrix-product peaks per dtype, dispatch; on a CUDA device also its memory, peaks
    and the copy rates each way, pinned and pageable, alone and both at once) and return it
    as a platform named ``name``, written to ``out`` as a platform file if given (whole or
    not at all). ``device``: ``auto`` (a CUDA device where torch has one), ``cpu`` (the host
    alone: one tier, ``host``) or ``cuda``. ``quick``: small sizes, seconds instead of tens of
    seconds. Every number of the file says it was measured, on what machine and day, or
    assumed.

    Raises :class:`TmsimError` for a bad argument, ``cuda`` where there is none, or a file
    that cannot be written.

    .. code-block:: python

       here = tmsim.calibrate("here.toml", quick=True)
       g, prof = tmsim.profile(model, (64, 1024), "mlp.csv")
       plan = tmsim.plan(g, here, "all-fast", profile=prof)
    """
    if not isinstance(name, str) or not NAME.match(name):
        raise TmsimError(f"name must be letters, digits, '.', '_' or '-', got {name!r}")
    if not isinstance(quick, bool):
        raise TmsimError(f"quick must be True or False, got {quick!r}")
    rates = measure_machine(device=device, quick=quick)
    platform, text = calibrated_platform(rates, name)
    if out is not None:
        target = os.fspath(out)
        partial = f"{target}.partial"
        try:
            with open(partial, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(partial, target)
        except OSError as exc:
            raise TmsimError(f"cannot write {shown_path(target)}: {exc.strerror or exc}") from None
    return platform


__all__ = ["calibrate"]
