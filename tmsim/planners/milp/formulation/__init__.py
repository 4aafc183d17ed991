"""The placement MILP as AutoTM formulates it, over K tiers, as a cvxpy problem.

Where a tensor may be and how it may move (:mod:`.states`), the kernels at which it may
change location per formulation (:mod:`.gadgets`; asynchronous windows in the gaps between
uses, :mod:`.windows`, pruned where they cannot pay, :mod:`.prune`), what may be recomputed
(:mod:`.candidates`, :mod:`.recompute`), the flow networks' index structures
(:mod:`.network`), copy costs (:mod:`.copies`), each kernel's cost rows (:mod:`.kernel_rows`,
measured times :mod:`.measured`), capacity cliques (:mod:`.conflicts`), the energy terms
(:mod:`.energy`), the problem itself (:mod:`.build`) and a plan read back from its solution
(:mod:`.readback`). Nothing here solves.
"""
