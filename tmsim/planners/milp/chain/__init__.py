"""The chain of formulations, static -> sync -> async, each solved from the one it contains.

What a solve knows before it builds (:mod:`.preflight`, :mod:`.gpu`), which formulation
contains which and the order and concurrency of their solves (:mod:`.nesting`,
:mod:`.schedule`), warm starts (:mod:`.starts`, the sync plan overlapped for async
:mod:`.overlap`, a smaller formulation's solution lifted into a larger one
:mod:`.handover`), a solve within limits on the HiGHS driver (:mod:`.solve`), a solved
formulation and its label (:mod:`.solution`), the layout round's bound raised
(:mod:`.rebound`), one formulation inside AutoTM's layout loop (:mod:`.rounds`), and the
chain's entry points (:mod:`.plan`).
"""
