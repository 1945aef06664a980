"""Registered federated algorithms and the public API a user's own algorithm is written against.

Importing this package registers the built-ins. What a plugin may use
(docs/extending.md) is exported here: the bases ``Algorithm`` and
``MixingAlgorithm``, what they are built from and report (``Context``,
``StepInfo``), the round's plan (``CommPlan``, ``Stream``), the engine's
``GradientCorrection`` and per-client ``ClientOptimizerState``, the seeded
generators (``derive_seed``, ``torch_generator``, ``numpy_generator``), the
round's batches step by step (``shuffle_schedule``), and
``Param`` / ``COMMON_SEARCH_SPACE`` for ``search_space``.
"""

from wirelessfl.algorithms import (  # noqa: F401  (registration)
    apfl,
    cfl,
    ditto,
    fedavg,
    fedavg_ft,
    fedem,
    fedfomo,
    fedmoe,
    fedper,
    fedprox,
    fedrep,
    ifca,
    local,
    oracle,
    pfedme,
    pflego,
    scaffold,
    ucfl,
)
from wirelessfl.algorithms.base import (
    ALGORITHMS,
    COMMON_SEARCH_SPACE,
    FORWARD_COST,
    Algorithm,
    ClientOptimizerState,
    Context,
    MixingAlgorithm,
    StepInfo,
    derive_seed,
    get_algorithm,
    mean_finite,
    numpy_generator,
    register,
    torch_generator,
)
from wirelessfl.learning.lockstep import GradientCorrection, shuffle_schedule
from wirelessfl.seam import CommPlan, Stream
from wirelessfl.tune.space import Param

__all__ = [
    "ALGORITHMS", "COMMON_SEARCH_SPACE", "FORWARD_COST", "Algorithm", "ClientOptimizerState", "CommPlan", "Context",
    "GradientCorrection", "MixingAlgorithm", "Param", "StepInfo", "Stream", "derive_seed", "get_algorithm",
    "mean_finite", "numpy_generator", "register", "shuffle_schedule", "torch_generator",
]
