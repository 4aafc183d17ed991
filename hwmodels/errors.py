"""Exceptions of the hardware models."""


class HardwareModelError(ValueError):
    """A platform description is invalid; the message names the file, tier or field at fault."""
