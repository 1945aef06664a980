"""FedAvg: one global model, broadcast to everybody, averaged by data size.

McMahan et al., "Communication-Efficient Learning of Deep Networks from
Decentralized Data", AISTATS 2017. The baseline of user-centric-fl.txt §V.
"""

from __future__ import annotations

from wirelessfl.algorithms.base import MixingAlgorithm, register
from wirelessfl.algorithms.specs.fedavg import SPEC


@register
class FedAvg(MixingAlgorithm):
    """``theta <- sum_j n_j theta_j / sum_j n_j`` over the clients that arrived."""

    spec = SPEC
