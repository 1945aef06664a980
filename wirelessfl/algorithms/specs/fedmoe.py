"""FedMoE (Isaksson et al., adaptive expert models): IFCA with epsilon-greedy choice, a local expert and a gate."""

from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Unit, at_least, finite, one_of
from wirelessfl.algorithms.specs.ifca import CLUSTER_BOUND, IFCAParams


class FedMoEParams(IFCAParams):
    epsilon: Unit = 0.33
    local_epochs: at_least(0) = 1
    local_lr: finite(0.0, above=True) = 2.69e-4
    local_weight_decay: finite(0.0) = 9.89e-3
    gate_epochs: at_least(0) = 1
    gate_lr: finite(0.0, above=True) = 3e-6
    gate_weight_decay: finite(0.0) = 6.88e-4
    gate_hidden: at_least(1) = 8
    gate_split: one_of("train", "val") = "train"


def footprint(params: FedMoEParams, at: FootprintInputs) -> Footprint:
    """IFCA's plus the local experts with their AdamW moments (3m rows), trained with AdamW."""
    m, J = at.clients, params.clusters
    choice = at.participants * J
    P = at.model_params
    return Footprint(
        kept=J + 3 * m, train_slots=at.participants, state=2, eval_rows=m, eval_slots=max(m, choice), eval_copies=J,
        extra_bytes=choice * P * FLOAT + at.participants * P * FLOAT * 6, checkpoint_rows=J + 3 * m,
        work=1.0 + (J + 1) / (3 * max(at.epochs, 1)) + params.local_epochs / max(at.epochs, 1),
    )


SPEC = AlgorithmSpec(
    name="fedmoe",
    paper="Isaksson et al., adaptive expert models (IFCA: Ghosh et al., NeurIPS 2020)",
    description="IFCA with epsilon-greedy choice; each client mixes the J cluster models and a local expert with a gate",
    params=FedMoEParams,
    implementation="wirelessfl.algorithms.fedmoe:FedMoE",
    # the experts paper tunes the gate's rate and epsilon (its Ray Tune stages) besides the models' rate
    search_space={**COMMON_SEARCH_SPACE, "gate_lr": Param.range(1e-6, 1e-2, log=True), "epsilon": Param.range(0.0, 0.5)},
    client_bounds=(CLUSTER_BOUND,),
    footprint=footprint,
)
