"""hwmodels: parameterized hardware models (memory tiers, compute and the host CPU beside it,
copy paths, kernel links, 2LM cache, memory mode, the unified-memory driver).

Pure values (frozen dataclasses, SI units, the unit in every field name) and pure, numpy-
vectorized cost functions; presets are TOML files under ``hwmodels/presets/``. Every number
of a value lies in a range (``hwmodels/_checks.py``: rates 1 to 1e21 per second, latencies at
most 1 s, fractions of a peak at least 1e-6, ...) that keeps every time the models give
finite for any graph of fewer than 2**62 bytes and 2**62 FLOPs. The one mutable
object is :class:`CacheState`, the explicit state of the 2LM cache simulator.
"""

from hwmodels.cache import DramCache
from hwmodels.cachesim import CacheTraffic, simulate_accesses
from hwmodels.cachestate import CacheState, new_cache_state
from hwmodels.compute import (
    ClassEfficiency,
    Compute,
    HostCompute,
)
from hwmodels.dtypes import canonical_dtype
from hwmodels.energy import Energy, LinkEnergy, TierEnergy
from hwmodels.errors import HardwareModelError
from hwmodels.kernels import (
    FamilyCost,
    KernelFamily,
    KernelModel,
    MathMode,
    MathModes,
    family_of,
)
from hwmodels.memory_mode import MemoryMode
from hwmodels.opclass import OpClass, op_class
from hwmodels.paths import CopyPath, KernelLink
from hwmodels.platform import Platform
from hwmodels.presets import (
    load_platform,
    load_preset,
    platform_from_toml,
    platform_to_toml,
    preset_descriptions,
    preset_names,
    save_platform,
)
from hwmodels.serialize import platform_from_dict, platform_to_dict
from hwmodels.tiers import Interference, MemoryTier
from hwmodels.timing import (
    KernelTimes,
    MoveMode,
    Overlap,
    PlacementProfile,
    cache_traffic_by_tier,
    move_time_s,
    placement_profile,
    roofline,
)
from hwmodels.unified_memory import UnifiedMemory

__all__ = [
    "CacheState",
    "CacheTraffic",
    "ClassEfficiency",
    "Compute",
    "CopyPath",
    "DramCache",
    "Energy",
    "FamilyCost",
    "HardwareModelError",
    "HostCompute",
    "Interference",
    "KernelFamily",
    "KernelLink",
    "KernelModel",
    "KernelTimes",
    "LinkEnergy",
    "MathMode",
    "MathModes",
    "MemoryMode",
    "MemoryTier",
    "MoveMode",
    "OpClass",
    "Overlap",
    "PlacementProfile",
    "Platform",
    "TierEnergy",
    "UnifiedMemory",
    "cache_traffic_by_tier",
    "canonical_dtype",
    "family_of",
    "load_platform",
    "load_preset",
    "move_time_s",
    "new_cache_state",
    "op_class",
    "placement_profile",
    "platform_from_dict",
    "platform_from_toml",
    "platform_to_dict",
    "platform_to_toml",
    "preset_descriptions",
    "preset_names",
    "roofline",
    "save_platform",
    "simulate_accesses",
]
