"""``tmsim platforms`` and ``tmsim platform``: placeholder until the hardware models land."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the platform subcommands on ``sub``."""
