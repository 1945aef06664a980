"""FedRep (Collins et al., ICML 2021): shared body averaged; each client trains its personal head first."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import AlgorithmSpec, Params, at_least


class FedRepParams(Params):
    head_epochs: at_least(0) = 10
    """Epochs of head training (body frozen) before the body's local epochs."""
    personal_layers: at_least(0) = 1


SPEC = AlgorithmSpec(
    name="fedrep",
    paper="Collins et al., ICML 2021",
    description="shared body averaged by n_j; each client trains its personal head first (body frozen), then the body",
    params=FedRepParams,
    implementation="wirelessfl.algorithms.fedrep:FedRep",
    search_space={**COMMON_SEARCH_SPACE, "head_epochs": Param.of(1, 5, 10)},
)
