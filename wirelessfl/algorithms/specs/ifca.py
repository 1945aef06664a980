"""IFCA (Ghosh et al., NeurIPS 2020) with the epsilon-greedy choice of Isaksson et al.
(adaptive-expert-models.txt): J cluster models, each client trains its lowest-loss one."""

from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, ClientBound, Footprint, FootprintInputs, Params, Unit, at_least


class IFCAParams(Params):
    clusters: at_least(1) = 3
    """J, the cluster models."""
    epsilon: Unit = 0.0
    """Probability of training a random cluster model instead of the lowest-loss one."""
    early_stopping_patience: at_least(0) = 0
    """Rounds without validation gain before a cluster model stops (0 = off)."""


CLUSTER_BOUND = ClientBound("clusters", lambda m: m, "one cluster per user", default_too=True)


def footprint(params: IFCAParams, at: FootprintInputs) -> Footprint:
    """J cluster models; the cluster choice evaluates T x J slots over J copies of the training data."""
    m, J = at.clients, params.clusters
    choice = at.participants * J
    return Footprint(
        kept=J, train_slots=at.participants, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=max(m, choice), eval_copies=J,
        extra_bytes=choice * at.model_params * FLOAT, checkpoint_rows=J, work=1.0 + J / (3 * max(at.epochs, 1)),
    )


SPEC = AlgorithmSpec(
    name="ifca",
    paper="Ghosh et al., NeurIPS 2020; epsilon-greedy: Isaksson et al. (adaptive-expert-models.txt)",
    description="J cluster models broadcast (payload J); each client trains its lowest-loss one (epsilon-greedy)",
    params=IFCAParams,
    implementation="wirelessfl.algorithms.ifca:IFCA",
    client_bounds=(CLUSTER_BOUND,),
    footprint=footprint,
)
