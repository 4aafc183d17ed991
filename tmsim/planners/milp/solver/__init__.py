"""A MIP driver on HiGHS for a compiled cvxpy problem: it knows nothing of tensors.

The problem's matrices as a HiGHS model (:mod:`.compiled`), one run of HiGHS with options,
a start and callbacks (:mod:`.instance`), and the driver (:mod:`.driver`'s ``run_highs``)
that runs the solve's phases (:mod:`.phases`): the LP relaxation after MIP presolve
(:mod:`.presolved`) or by interior point with a vertex near its optimum (:mod:`.vertex`), a
first point where there is no start (:mod:`.feasibility`),
large-neighbourhood search, RENS and RINS (:mod:`.neighbourhood`), and the branch and bound
with cutoffs, each improving point and limit check kept as a trace; how the solve ended is
:mod:`.outcome`'s.
"""
