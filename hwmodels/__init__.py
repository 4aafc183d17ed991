"""hwmodels: parameterized hardware models (memory tiers, compute, copy paths, 2LM cache)."""
