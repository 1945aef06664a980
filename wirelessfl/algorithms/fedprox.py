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

from typing import Any

from wirelessfl.algorithms.base import Context, MixingAlgorithm, register
from wirelessfl.algorithms.specs.fedprox import SPEC
from wirelessfl.learning.lockstep import GradientCorrection


@register
class FedProx(MixingAlgorithm):
    """FedAvg's mixing with ``mu (w - w^t)`` added to every local gradient."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)

    def local_training(self, round, members):
        start = self.received(members)
        return self.train_clients(round, members, start, GradientCorrection(float(self.params.mu), anchor=start))
