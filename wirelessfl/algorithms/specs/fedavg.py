"""FedAvg (McMahan et al., AISTATS 2017): one global model, no parameters of its own."""

from wirelessfl.algorithms.spec import AlgorithmSpec, Footprint, FootprintInputs, Params


class FedAvgParams(Params):
    """FedAvg has no parameters."""


def footprint(params: FedAvgParams, at: FootprintInputs) -> Footprint:
    """The stream model; one train call over the T participants."""
    del params
    m = at.clients
    return Footprint(kept=1, train_slots=at.participants, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=m, checkpoint_rows=1)


SPEC = AlgorithmSpec(
    name="fedavg",
    paper="McMahan et al., AISTATS 2017",
    description="one global model; 1 broadcast stream, everybody uploads",
    params=FedAvgParams,
    implementation="wirelessfl.algorithms.fedavg:FedAvg",
    footprint=footprint,
    levers=frozenset({"scheduling", "compression", "aggregation", "server_optimizer"}),
)
