"""Memory layout and reuse: buffers given addresses from their live ranges.

The static memory planner of the CSE599G1 lecture on memory optimisation (storage tags,
:mod:`.tags`), how much a step needs with and without sharing dead buffers (:mod:`.reuse`),
one buffer placed among those already placed (:mod:`.arena`), every buffer of a step given an
address (:mod:`.addresses`, exact under a capacity by :mod:`.packing` over :mod:`.sections`),
and a plan's fast-tier buffers laid out, with where the layout overflows
(:mod:`.fast_tier`). It reads plans and never changes them.
"""
