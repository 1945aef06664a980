"""FedProx: FedAvg whose clients minimise their loss plus a proximal pull towards the round's global model.

Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
Heterogeneous Networks", MLSys 2020, Algorithm 2. Client k approximately solves
eq. (2),

    min_w  h_k(w; w^t) = F_k(w) + (mu / 2) ||w - w^t||^2,

by the scenario's local optimizer (E epochs of minibatch steps on the gradient
of h_k: ``grad F_k(w) + mu (w - w^t)``, the engine's ``GradientCorrection``),
and the server averages the uploads that arrived by sample count, as FedAvg.
mu = 0 is FedAvg exactly (tested through ``simulate``). Plan, payload and work
are FedAvg's: the proximal term costs one vector operation per step.

Departure: Algorithm 2 samples devices with probability p_k and averages them
uniformly; here participants are the scenario's (all, or a uniform sample)
and the average is weighted by n_k, FedAvg's rule (the same in expectation).
"""

from __future__ import annotations

import math
from typing import Any

from wirelessfl.algorithms.base import COMMON_SEARCH_SPACE, Context, MixingAlgorithm, register
from wirelessfl.learning.lockstep import GradientCorrection
from wirelessfl.tune.space import Param


@register
class FedProx(MixingAlgorithm):
    """FedAvg's mixing with ``mu (w - w^t)`` added to every local gradient."""

    name = "fedprox"
    paper = "Li et al., MLSys 2020"
    description = "FedAvg with a proximal term mu/2 ||w - w_global||^2 in each client's objective"
    hparams = {"mu": 0.01}
    #: the paper's grid for mu (§5.3: {0.001, 0.01, 0.1, 1})
    search_space = {**COMMON_SEARCH_SPACE, "mu": Param.of(0.001, 0.01, 0.1, 1.0)}
    levers = frozenset({"server_optimizer"})

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        mu = self.params["mu"]
        if not (isinstance(mu, (int, float)) and not isinstance(mu, bool) and mu >= 0 and math.isfinite(mu)):
            raise ValueError(f"fedprox: mu must be a finite number >= 0, got {mu!r}")

    def local_training(self, round, members):
        start = self.received(members)
        return self.train_clients(round, members, start, GradientCorrection(float(self.params["mu"]), anchor=start))
