"""FedProx (Li et al., MLSys 2020): FedAvg with a proximal term mu/2 ||w - w_global||^2."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import AlgorithmSpec, Params, finite


class FedProxParams(Params):
    mu: finite(0.0) = 0.01
    """The proximal weight (eq. 2); 0 is FedAvg."""


SPEC = AlgorithmSpec(
    name="fedprox",
    paper="Li et al., MLSys 2020",
    description="FedAvg with a proximal term mu/2 ||w - w_global||^2 in each client's objective",
    params=FedProxParams,
    implementation="wirelessfl.algorithms.fedprox:FedProx",
    search_space={**COMMON_SEARCH_SPACE, "mu": Param.of(0.001, 0.01, 0.1, 1.0)},  # the paper's grid (§5.3)
    levers=frozenset({"scheduling", "compression", "server_optimizer"}),  # FedAvg's uploads and server step (docs/levers.md)
)
