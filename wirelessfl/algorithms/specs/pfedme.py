"""pFedMe (Dinh et al., NeurIPS 2020): personalized models as Moreau-envelope proximal points of the local model."""

from pydantic import Field

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, at_least, finite


class PFedMeParams(Params):
    """The authors' MNIST command (lambda 15, personal rate 0.1, beta 1) and the paper's K = 5."""

    lambda_: finite(0.0, above=True) = Field(15.0, alias="lambda")
    """The Moreau envelope's pull of the personalized model theta towards the local model w."""
    inner_steps: at_least(1) = 5
    """K, the gradient steps of each inner proximal solve (on one batch)."""
    personal_lr: finite(0.0, above=True) = 0.1
    """The inner solve's (plain SGD) rate."""
    beta: finite(0.0, above=True) = 1.0
    """The server's mixing (1 - beta) w + beta avg; 1 is the plain average."""


def footprint(params: PFedMeParams, at: FootprintInputs) -> Footprint:
    """The server's model and m personalized models (in a client store); each local step is a train call over
    the T participants (K passes on its batch), beside the T rows of w and theta; evaluated group by group."""
    m, T = at.clients, at.participants
    return Footprint(
        kept=1 + m, train_slots=T, state=at.optimizer_rows, eval_rows=m, eval_slots=m,
        extra_bytes=2 * T * at.model_params * FLOAT, checkpoint_rows=1 + m, work=float(params.inner_steps),
        eval_by_row=True, stored=m,
    )


SPEC = AlgorithmSpec(
    name="pfedme",
    paper="Dinh et al., NeurIPS 2020",
    description="personalized models as proximal points (K inner steps) of local models pulled by lambda; server mixes by beta",
    params=PFedMeParams,
    implementation="wirelessfl.algorithms.pfedme:PFedMe",
    search_space={**COMMON_SEARCH_SPACE, "lambda": Param.of(1.0, 5.0, 15.0), "beta": Param.of(1.0, 2.0)},
    footprint=footprint,
)
