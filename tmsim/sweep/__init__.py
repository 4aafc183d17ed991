"""Declarative sweeps: TOML specs expanded into points (:mod:`.spec`), platform fields
overridden by dotted path (:mod:`.overrides`), and the engine that evaluates points in a
local pool or on Dask with resumable point files (:mod:`.engine`)."""
