"""Ditto (Li et al., ICML 2021): FedAvg's global model plus personal models pulled towards it."""

from pydantic import Field

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import AlgorithmSpec, Footprint, FootprintInputs, Params, finite


class DittoParams(Params):
    lambda_: finite(0.0) = Field(0.1, alias="lambda")
    """The proximal pull of a personal model towards the global one (eq. 2)."""


def footprint(params: DittoParams, at: FootprintInputs) -> Footprint:
    """The global model and ``m`` personal ones (in a client store); two train calls a round over the T
    participants (work 2: the time estimate counts both), each with its own optimizer state kept per client; evaluated group by group of slots."""
    del params
    m = at.clients
    return Footprint(
        kept=1 + m, train_slots=at.participants, state=at.optimizer_rows, keep_rows=2 * m, eval_rows=m, eval_slots=m,
        eval_by_row=True, checkpoint_rows=1 + m, stored=m, work=2.0,
    )


SPEC = AlgorithmSpec(
    name="ditto",
    paper="Li et al., ICML 2021",
    description="FedAvg global model + per-client personal models trained with a proximal pull lambda towards it",
    params=DittoParams,
    implementation="wirelessfl.algorithms.ditto:Ditto",
    search_space={**COMMON_SEARCH_SPACE, "lambda": Param.of(0.01, 0.1, 1.0, 2.0)},  # the paper's grid (§5)
    footprint=footprint,
    levers=frozenset({"server_optimizer"}),
)
