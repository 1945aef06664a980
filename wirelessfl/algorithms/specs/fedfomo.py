"""FedFomo (Zhang et al., ICLR 2021): each client mixes downloaded peer models by validation-loss gains."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, ClientBound, Footprint, FootprintInputs, Params, Unit, at_least


class FedFomoParams(Params):
    models_per_client: at_least(1) = 5
    """M, the peer models each client downloads."""
    epsilon: Unit = 0.3
    """Exploration rate of the epsilon-greedy choice of peers ..."""
    epsilon_decay: Unit = 0.05
    """... decaying by this each round."""


def footprint(params: FedFomoParams, at: FootprintInputs) -> Footprint:
    """``base``, ``current`` and ``server`` (3m rows); a round stacks the (2 + M) candidates of every participant
    and evaluates them on (2 + M) copies of the validation splits."""
    m, T = at.clients, at.participants
    downloads = min(params.models_per_client, max(m - 1, 0))
    stacked = T * (2 + downloads)
    train_n, val_n = sum(at.train_sizes), sum(at.val_sizes)
    return Footprint(
        kept=3 * m, kept_bytes=m * m * 8, train_slots=T, state=at.optimizer_rows, eval_rows=0, eval_slots=stacked,
        eval_copies=2 + downloads, extra_bytes=stacked * at.model_params * FLOAT, checkpoint_rows=3 * m,
        work=1.0 + (2 + downloads) * val_n / max(3 * train_n * max(at.epochs, 1), 1),
    )


SPEC = AlgorithmSpec(
    name="fedfomo",
    paper="Zhang et al., ICLR 2021",
    description="each client downloads M peer models (affinity, epsilon-greedy) and mixes them by validation-loss gains",
    params=FedFomoParams,
    implementation="wirelessfl.algorithms.fedfomo:FedFomo",
    # M models downloaded per client (at most 5 so the default space fits 6 clients) and the exploration rate
    search_space={**COMMON_SEARCH_SPACE, "models_per_client": Param.range(1, 5), "epsilon": Param.range(0.0, 0.5)},
    client_bounds=(ClientBound("models_per_client", lambda m: m - 1, "the other users a client can download from"),),
    footprint=footprint,
)
