"""APFL (Deng et al., arXiv:2003.13461, 2020): a personal model mixed with FedAvg's global one by alpha."""

from typing import Annotated

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, Unit, checked, finite


class APFLParams(Params):
    alpha: Unit = 0.25
    """The mixing weight of the personal model v in alpha v + (1 - alpha) w (its start when learned)."""
    adaptive_alpha: Annotated[bool, checked(lambda v: isinstance(v, bool), "true or false")] = False
    """Learn each client's alpha by its gradient step (§3.3), clipped to [0, 1]."""
    alpha_lr: finite(0.0) = 0.01
    """The rate of the alpha step."""


def footprint(params: APFLParams, at: FootprintInputs) -> Footprint:
    """The global model and m personal models (in a client store); FedAvg's train call over the T participants
    (its optimizer state kept per client), then the step-by-step retrace of w beside v (w, v and the mixed rows
    of the T participants); work: the lockstep call, the retrace and the gradient at v_bar. Evaluated group by
    group of slots."""
    del params
    m, T = at.clients, at.participants
    return Footprint(
        kept=1 + m, train_slots=T, state=at.optimizer_rows, keep_rows=m, eval_rows=m, eval_slots=m,
        extra_bytes=3 * T * at.model_params * FLOAT, checkpoint_rows=1 + m, work=3.0, eval_by_row=True, stored=m,
    )


SPEC = AlgorithmSpec(
    name="apfl",
    paper="Deng et al., arXiv:2003.13461 (2020)",
    description="FedAvg global model + per-client personal model v mixed as alpha v + (1 - alpha) w; alpha fixed or learned",
    params=APFLParams,
    implementation="wirelessfl.algorithms.apfl:APFL",
    # the fixed mixing weights the paper's experiments compare
    search_space={**COMMON_SEARCH_SPACE, "alpha": Param.of(0.25, 0.5, 0.75)},
    footprint=footprint,
    levers=frozenset({"server_optimizer"}),
)
