"""FedRep (Collins et al., ICML 2021): shared body averaged; each client trains its personal head first."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, at_least


class FedRepParams(Params):
    head_epochs: at_least(0) = 10
    """Epochs of head training (body frozen) before the body's local epochs."""
    personal_layers: at_least(0) = 1


def footprint(params: FedRepParams, at: FootprintInputs) -> Footprint:
    """One body plus ``m`` heads (in a client store; the model's head, as FedPer's footprint counts it, none for
    ``personal_layers: 0``); a head train call then a body train call over the T participants, each with its own
    optimizer state kept per client; evaluated group by group of slots."""
    m, P = at.clients, at.model_params
    head = at.head_size if params.personal_layers else 0
    return Footprint(
        kept=1, kept_bytes=m * head * FLOAT, train_slots=at.participants, state=at.optimizer_rows, keep_rows=2 * m,
        eval_rows=m, eval_slots=m, eval_by_row=True, checkpoint_rows=1 + m * head / P, stored=m * head / P,
    )


SPEC = AlgorithmSpec(
    name="fedrep",
    paper="Collins et al., ICML 2021",
    description="shared body averaged by n_j; each client trains its personal head first (body frozen), then the body",
    params=FedRepParams,
    implementation="wirelessfl.algorithms.fedrep:FedRep",
    search_space={**COMMON_SEARCH_SPACE, "head_epochs": Param.of(1, 5, 10)},
    footprint=footprint,
)
