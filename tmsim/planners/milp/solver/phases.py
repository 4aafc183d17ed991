"""The measured settings of :func:`~tmsim.planners.milp.solver.driver.run_highs`' phases: which
models go LP first and through HiGHS's MIP presolve, how the RENS and RINS sub-MIPs run, and
which of HiGHS's own searches the whole MIP keeps after them. Each value says what it was
measured on."""

from __future__ import annotations

#: Largest model (columns) solved LP first. Above it HiGHS's own branch and bound goes
#: first: its root LP, after its MIP presolve, beat the standalone LP there (DenseNet-264
#: b512 at 1:1 on Optane, async window 15, 1.0M columns: dual simplex 172 s and 228k
#: iterations, interior point without crossover 72 s; HiGHS's branch and bound reached a 1.09%
#: gap in 195 s), while below it the LP first won (Inception v4 b16 at 4:1, 294k columns:
#: LP 7 s against 76 s for the root LP inside the branch and bound; a 0.5% gap in 14 s after
#: RINS against 0.4% in 126 s).
LP_FIRST_MAX_COLUMNS = 600_000
#: Smallest MIP (columns) whose LP relaxation is solved after HiGHS's MIP presolve where
#: that is asked for (``lp_presolve``) and no basis is offered. Measured on the bench's
#: synchronous chains (seconds, LP alone / after MIP presolve): ResNet-200 b512 on Optane
#: (82k columns) 9.3, 5.9, 5.3 / 3.6, 3.0, 3.5 at 1:1, 4:1, 8:1; ResNet-380, -560, -752 b64
#: at 4:1 (156k to 307k) 14.9, 27.3, 44.0 / 8.1, 12.1, 16.8; below it presolve cost more
#: than it saved: Inception v4 b1024 (40k) 0.9 / 1.7 s at 1:1 and 4:1.
PRESOLVE_MIN_COLUMNS = 60_000
#: HiGHS options of phase 4 once phases 2 and 3 have run (options the caller sets win): no
#: RENS or RINS sub-MIPs of HiGHS's own (its neighbourhoods of the same LP point and start)
#: and no restart after the root (a second presolve with the root's fixings, for what is by
#: then a gap of about 1-2%). Inception v4 b1024 static at 8:1 on Optane (phase 4 from RINS's
#: 61.7259 against the LP's 61.0348): 3.8-3.9 s with HiGHS's defaults, of which 1.7 s in 54
#: sub-MIPs and a restart; 0.9-1.3 s without its RENS and RINS; 0.55-0.74 s without the
#: restart as well, both with a bound of 61.14-61.16 and the same plan. On the bench's other
#: conventional and GPU chains the plans and gaps stay the same and the times move within
#: their run-to-run noise. A solve for a bound alone (``reached``) runs with them too: the
#: first layout round of VGG19 b8 async at 4:1 (:mod:`~tmsim.planners.milp.chain.rebound`) went
#: from its bound of 0.73070 to 0.73179 in 4.5 s with them, and to 0.73217 in 36 s without.
AFTER_NEIGHBOURHOODS: dict[str, object] = {
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_allow_restart": False,
}
#: A point of phases 2-3 this many gaps or less above the LP's bound starts phase 4 with
#: :data:`AFTER_NEIGHBOURHOODS`; one farther from it, with HiGHS's own searches, which find
#: better points where the bound alone cannot close the gap. VGG19 b8 async at 1:1 on Optane
#: (RINS's 0.61824 s, 2.96% above the LP's 0.59994): without them the bound stalled at 1.55%
#: after 2,700 nodes and the 60 s cap; with them in that solve alone, a point of 0.61623 s and
#: 0.96% in 20.4 s; with this rule (sync's phase 4 moves too), 0.61354 s at 0.98% in 20-22 s.
#: Inception v4 b1024 static at 8:1 (1.1% from its bound) keeps the speed above (1.0-1.1 s).
NEAR_GAPS = 2.0
#: Most RINS sub-MIPs in a row (each around the point the last one found).
RINS_ROUNDS = 3
#: The gap a RENS or RINS sub-MIP aims at, as a share of the solve's. A sub-MIP is also
#: interrupted at a point within the solve's gap of the LP's bound, which ends the whole solve
#: (on Inception v4 b1024's synchronous model at 8:1 on Optane a RINS sub-MIP then took 0.04 s
#: where it proved its own gap in 0.8 s; its point: 1.00% above the LP's bound, not 0.68%).
RINS_GAP_SHARE = 0.25

__all__ = [
    "AFTER_NEIGHBOURHOODS",
    "LP_FIRST_MAX_COLUMNS",
    "NEAR_GAPS",
    "PRESOLVE_MIN_COLUMNS",
    "RINS_GAP_SHARE",
    "RINS_ROUNDS",
]
