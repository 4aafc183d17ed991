"""The workload: tensors, the statically scheduled training-step graph, layers, the training
step builder, the model zoo and graph files.

Nothing here knows about hardware: a graph is sizes, dtypes, roles, FLOPs and an order.
"""
