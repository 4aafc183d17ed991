"""Platform presets (TOML files under ``hwmodels/presets/``) and user platform files."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.serialize import platform_from_dict, platform_to_dict


def _preset_dir() -> resources.abc.Traversable:
    return resources.files("hwmodels").joinpath("presets")


def preset_names() -> tuple[str, ...]:
    """Names of the shipped presets, sorted."""
    return tuple(
        sorted(
            entry.name.removesuffix(".toml")
            for entry in _preset_dir().iterdir()
            if entry.name.endswith(".toml")
        )
    )


def platform_from_toml(text: str, origin: str) -> Platform:
    """Parse TOML ``text`` into a :class:`Platform`; ``origin`` names the file in errors.

    Raises :class:`HardwareModelError` (one line: ``origin: place: problem``) if the text is
    not TOML (an integer of more digits than Python converts and nesting deeper than the parser
    follows count as not TOML) or does not describe a valid platform.
    """
    return platform_from_dict(parse_toml(text, origin), origin)


def parse_toml(text: str, origin: str) -> dict[str, Any]:
    """The TOML document ``text``; raises :class:`HardwareModelError` naming ``origin`` in one
    line for text that is not TOML, an integer of more than 4300 digits (which Python will not
    convert) or arrays and tables nested deeper than the parser follows."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HardwareModelError(f"{origin}: not valid TOML: {exc}") from None
    except ValueError:
        raise HardwareModelError(
            f"{origin}: not valid TOML: an integer with too many digits"
        ) from None
    except RecursionError:
        raise HardwareModelError(
            f"{origin}: not valid TOML: arrays or tables nested too deeply"
        ) from None


def load_preset(name: str) -> Platform:
    """The shipped preset ``name``. Raises :class:`HardwareModelError` if there is none."""
    if name not in preset_names():
        raise HardwareModelError(
            f"unknown platform preset {name!r}; presets are {', '.join(preset_names())}"
        )
    text = _preset_dir().joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return platform_from_toml(text, f"preset {name}")


def load_platform(name_or_path: str | Path) -> Platform:
    """A preset by name, or a platform TOML file by path.

    A string that is a preset name means the preset; anything else is a file path (write
    ``./name`` for a file that happens to share a preset's name). Raises
    :class:`HardwareModelError` if it is neither a preset nor an existing file, or the file is
    not a valid platform; ``OSError`` if an existing file cannot be read.
    """
    if isinstance(name_or_path, str) and name_or_path in preset_names():
        return load_preset(name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise HardwareModelError(
            f"{name_or_path}: neither a platform preset ({', '.join(preset_names())}) "
            "nor an existing file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise HardwareModelError(f"{path}: not valid TOML: not UTF-8 text") from None
    return platform_from_toml(text, str(path))


def platform_to_toml(platform: Platform) -> str:
    """TOML text of ``platform`` in SI units; :func:`platform_from_toml` reads it back equal."""
    return tomli_w.dumps(platform_to_dict(platform))


def save_platform(platform: Platform, path: str | Path) -> None:
    """Write ``platform`` as TOML to ``path`` (raises ``OSError`` if it cannot be written)."""
    Path(path).write_text(platform_to_toml(platform), encoding="utf-8")


def preset_descriptions() -> dict[str, str]:
    """``{name: one-line description}`` of every preset, in name order."""
    return {name: load_preset(name).description for name in preset_names()}
