"""Where a run's draws come from: every generator is derived from ``(seed, purpose, ...)``, so none is carried.

Common random numbers across curves and profiles, and resumption without any
generator state in a checkpoint, both rest on these three functions.
"""

from __future__ import annotations

import numpy as np

from wirelessfl.algorithms.base import derive_seed
from wirelessfl.network import SystemProfile


def learning_seed(seed: int) -> int:
    """The seed every curve's algorithm is built from: the same for every curve of a scenario seed.

    Common random numbers: FedAvg, FedEM, IFCA, FedPer... of one seed start from the
    same initial model (``(learning_seed, "init")``), draw the same participants
    (``(learning_seed, round, "participation")``) and the same batch order
    (``(learning_seed, round, "train")``), so the difference between two curves is
    the methods' difference and not initialisation noise (a one-component FedEM
    reproduces FedAvg's trace).
    """
    return derive_seed(seed, "learning")


def network_rng(seed: int, profile: str, round: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, "network", profile, round))


def static_rng(seed: int, profile: SystemProfile) -> np.random.Generator:
    """The draws a network makes once (user positions, LOS states, shadowing), per seed and profile; with
    ``physical.drop: common`` per seed only, so every such profile of a scenario places the same users
    (the same uniform draws, scaled to each cell) and a difference between profiles is their channels'."""
    common = profile.physical is not None and profile.physical.drop == "common"
    return np.random.default_rng(derive_seed(seed, "static", "common drop" if common else profile.name))
