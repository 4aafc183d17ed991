"""Fits of the hardware models' parameters to published measurements (one module per fit)."""
