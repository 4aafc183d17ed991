"""The names and defaults the argument parsers need, in a module that imports nothing heavy.

``tmsim --help`` and ``tmsim --version`` build every parser, so what a parser shows (choices,
defaults in help texts) must not import numpy, cvxpy, pandas or the simulator. The values here
mirror the ones of the library, which stay the reference: ``tests/test_cli_startup.py`` checks
that each mirror equals its source.

- :data:`MODEL_NAMES`: :data:`tmsim.workload.zoo.MODELS` (the CNNs), in its order;
- :data:`TRANSFORMER_NAMES`: :data:`tmsim.workload.zoo.TRANSFORMERS`, in its order, and
  :data:`ATTENTIONS`: the values of :class:`tmsim.workload.zoo.transformer.shapes.Attention`;
- :data:`ZOO_NAMES`: both, the names a command takes as a zoo MODEL;
- :data:`DTYPES`: the keys of :data:`tmsim.workload.tensors.DTYPE_BYTES`, sorted;
- :data:`PLANNER_NAMES`: :data:`tmsim.planners.PLANNERS` (derived from :mod:`tmsim.strategies`,
  which is light, as the planners derive it);
- :data:`TABLE_FORMATS`: :data:`tmsim.sweeps.engine.FORMATS`;
- :data:`IMPORT_LOSSES`, :data:`IMPORT_OPTIMIZERS`: :data:`tmsim.workload.torchimport.LOSSES`
  and :data:`~tmsim.workload.torchimport.OPTIMIZERS`, in their order, and
  :data:`IMPORT_MODEL_DTYPES`: :data:`tmsim.workload.torchimport.sources.MODEL_DTYPES` (which
  needs torch to import; ``tests/test_torch_import.py`` checks it);
"""

from __future__ import annotations

from tmsim import STRATEGIES

#: The model zoo's names, in :data:`tmsim.workload.zoo.MODELS` order.
MODEL_NAMES: tuple[str, ...] = (
    "vgg19",
    "vgg416",
    "resnet50",
    "resnet200",
    "inception_v4",
    "densenet121",
    "densenet264",
)

#: The transformers of the zoo, in :data:`tmsim.workload.zoo.TRANSFORMERS` order.
TRANSFORMER_NAMES: tuple[str, ...] = (
    "gpt2_small",
    "gpt2_medium",
    "gpt2_large",
    "gpt2_xl",
    "llama_7b",
    "llama_13b",
)

#: Every zoo model a command takes by name: the CNNs, then the transformers.
ZOO_NAMES: tuple[str, ...] = MODEL_NAMES + TRANSFORMER_NAMES

#: How a transformer's attention core may run.
ATTENTIONS: tuple[str, ...] = ("materialized", "fused")

#: Element types a graph may have (sorted keys of ``DTYPE_BYTES``).
DTYPES: tuple[str, ...] = tuple(
    sorted(("fp64", "fp32", "fp16", "bf16", "fp8", "int64", "int32", "int8", "uint8", "bool"))
)

#: Every planner strategy: the heuristics, then the MILP formulations.
PLANNER_NAMES: tuple[str, ...] = tuple(
    n for kind in ("heuristic", "milp") for n, s in STRATEGIES.items() if s.kind == kind
)

#: The losses and optimizers ``tmsim import`` offers, the first of each its default.
IMPORT_LOSSES: tuple[str, ...] = ("cross_entropy", "mse", "sum")
IMPORT_OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adamw")
#: The floating types ``tmsim import --dtype`` casts a model to.
IMPORT_MODEL_DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp64")

#: Formats of a sweep's results table.
TABLE_FORMATS: tuple[str, ...] = ("parquet", "csv")


#: Batch size of a command that builds a zoo model or imports one, when ``--batch`` is not
#: given (as :data:`tmsim.api.inputs.DEFAULT_BATCH`).
DEFAULT_BATCH = 32

__all__ = [
    "ATTENTIONS",
    "DEFAULT_BATCH",
    "DTYPES",
    "IMPORT_LOSSES",
    "IMPORT_MODEL_DTYPES",
    "IMPORT_OPTIMIZERS",
    "MODEL_NAMES",
    "PLANNER_NAMES",
    "TABLE_FORMATS",
    "TRANSFORMER_NAMES",
    "ZOO_NAMES",
]
