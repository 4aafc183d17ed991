"""Declarative sweeps and the engine under them: TOML specs expanded into points
(:mod:`.spec`), platform fields overridden by dotted path (:mod:`.overrides`), one resumable
record per finished point (:mod:`.store`), tasks run in this process, a local pool or on Dask
(:mod:`.pool`), a sweep's points evaluated into one table (:mod:`.engine`), and the generic
path for work whose result is a list of rows, such as the figures' points (:mod:`.jobs`)."""
