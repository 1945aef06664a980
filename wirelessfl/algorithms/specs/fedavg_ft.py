"""FedAvg+ (Marfoq et al., NeurIPS 2021, fedem-mixture-of-distributions.txt §4): FedAvg, each client evaluates
the global model fine-tuned on its own data."""

from wirelessfl.algorithms.spec import AlgorithmSpec, Footprint, FootprintInputs, Params, finite


class FedAvgFineTunedParams(Params):
    finetune_epochs: finite(0.0) = 1.0
    """Local epochs of fine-tuning before each evaluation."""
    finetune_lr: finite(0.0, above=True, nullable="train.lr") = None


def footprint(params: FedAvgFineTunedParams, at: FootprintInputs) -> Footprint:
    """FedAvg plus the cached fine-tuned models (m rows) and a train call over all m clients; fine-tuning runs
    at evaluation, for every client, not in every round's training."""
    m = at.clients
    return Footprint(kept=1 + m, train_slots=m, state=at.optimizer_rows, eval_rows=m, eval_slots=m, checkpoint_rows=1,
                     eval_work=float(params.finetune_epochs))


SPEC = AlgorithmSpec(
    name="fedavg_ft",
    paper="FedAvg+ of Marfoq et al., NeurIPS 2021 (fedem-mixture-of-distributions.txt §4)",
    description="FedAvg; each client evaluates the global model fine-tuned on its own data (FedAvg+)",
    params=FedAvgFineTunedParams,
    implementation="wirelessfl.algorithms.fedavg_ft:FedAvgFineTuned",
    footprint=footprint,
    trains_as="fedavg",
    evaluation_params=frozenset({"finetune_epochs", "finetune_lr"}),
    levers=frozenset({"scheduling", "compression", "aggregation", "server_optimizer"}),
)
