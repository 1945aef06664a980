"""FedEM (Marfoq et al., NeurIPS 2021): M shared components mixed per client by EM-fitted weights."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, at_least


class FedEMParams(Params):
    components: at_least(1) = 3
    """M, the shared component models."""
    unseen_em_steps: at_least(1) = 1
    """EM steps an unseen client takes to fit its mixture weights."""


def footprint(params: FedEMParams, at: FootprintInputs) -> Footprint:
    """M components; training runs T x M slots over M copies of the training data; evaluation runs m x M slots
    (logits, padded, log-softmax in float64 and the mixture's temporaries)."""
    m, T, M = at.clients, at.participants, params.components
    longest = max(max(at.train_sizes, default=0), max(at.val_sizes, default=0), max(at.test_sizes, default=0))
    mixture = m * M * longest * at.classes * (FLOAT + FLOAT + 8 + 8 + 8)
    return Footprint(
        kept=M, train_slots=T * M, train_copies=M, state=at.optimizer_rows, keep_rows=m * M, eval_rows=m * M, eval_slots=m * M,
        eval_copies=M, eval_extra_bytes=mixture, checkpoint_rows=M, work=M * (1.0 + 1.0 / (3 * max(at.epochs, 1))),
    )


SPEC = AlgorithmSpec(
    name="fedem",
    paper="Marfoq et al., NeurIPS 2021",
    description="M shared component models mixed per client by EM-fitted weights; broadcast of M models, M uploads",
    params=FedEMParams,
    implementation="wirelessfl.algorithms.fedem:FedEM",
    # each component sees about 1/M of the gradient, so its rate and M are searched together
    search_space={**COMMON_SEARCH_SPACE, "components": Param.range(1, 4)},
    footprint=footprint,
)
