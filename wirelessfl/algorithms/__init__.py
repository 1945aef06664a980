"""Federated algorithms: their torch-free declarations, and the public API a user's own algorithm is written against.

Importing this package loads nothing heavy: ``wirelessfl.algorithms.spec``,
``.specs`` (the built-ins' declarations), ``.registry`` and ``.search_space``
are torch-free, so the schema validates a scenario without torch. The names
below are loaded on first use (PEP 562 ``__getattr__``): what a plugin may use
(docs/extending.md) -- the bases ``Algorithm`` and ``MixingAlgorithm``, what
they are built from and report (``Context``, ``StepInfo``), the round's plan
(``CommPlan``, ``Stream``), the engine's ``GradientCorrection`` and per-client
``ClientOptimizerState``, the seeded generators (``derive_seed``,
``torch_generator``, ``numpy_generator``), the round's batches step by step
(``shuffle_schedule``), the declaration types
(``AlgorithmSpec``, ``Params``, ``ClientBound``, ``Footprint``, ...) and
``Param`` / ``COMMON_SEARCH_SPACE`` for a search space. ``ALGORITHMS`` imports
every built-in implementation.
"""

from __future__ import annotations

import importlib
from typing import Any

_FROM = {
    **dict.fromkeys(
        ("FORWARD_COST", "Algorithm", "ClientOptimizerState", "Context", "MixingAlgorithm", "StepInfo", "derive_seed",
         "get_algorithm", "mean_finite", "numpy_generator", "register", "torch_generator"),
        "wirelessfl.algorithms.base",
    ),
    **dict.fromkeys(
        ("AlgorithmSpec", "ClientBound", "Footprint", "FootprintInputs", "ParamError", "Params", "Unit", "at_least", "finite",
         "model_per_client", "one_of"),
        "wirelessfl.algorithms.spec",
    ),
    "COMMON_SEARCH_SPACE": "wirelessfl.algorithms.search_space",
    "Param": "wirelessfl.algorithms.search_space",
    "GradientCorrection": "wirelessfl.learning.lockstep",
    "shuffle_schedule": "wirelessfl.learning.lockstep",
    "CommPlan": "wirelessfl.seam",
    "Stream": "wirelessfl.seam",
}

__all__ = sorted([*_FROM, "ALGORITHMS"])


def __getattr__(name: str) -> Any:
    if name == "ALGORITHMS":
        from wirelessfl.algorithms import registry

        for built_in in registry.BUILT_INS:
            registry.implementation(built_in)
        return importlib.import_module("wirelessfl.algorithms.base").ALGORITHMS
    if name in _FROM:
        return getattr(importlib.import_module(_FROM[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
