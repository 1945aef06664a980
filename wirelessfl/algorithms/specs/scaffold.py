"""SCAFFOLD (Karimireddy et al., ICML 2020): FedAvg with control variates."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import AlgorithmSpec, Params, finite


class ScaffoldParams(Params):
    server_lr: finite(0.0, above=True) = 1.0
    """The global step eta_g (Algorithm 1, line 17)."""


SPEC = AlgorithmSpec(
    name="scaffold",
    paper="Karimireddy et al., ICML 2020",
    description="FedAvg with control variates c - c_i in every local step; model and control variate sent both ways",
    params=ScaffoldParams,
    implementation="wirelessfl.algorithms.scaffold:Scaffold",
    # the paper's experiments use eta_g = 1 and tune the client rate; the global rate is searched around 1
    search_space={**COMMON_SEARCH_SPACE, "server_lr": Param.of(0.5, 1.0, 1.5)},
)
