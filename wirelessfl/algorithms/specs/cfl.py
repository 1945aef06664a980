"""Clustered FL (Sattler, Müller, Samek, IEEE TNNLS 2021): FedAvg per cluster, clusters split by cosine similarity."""

from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, at_least, finite, one_of


class ClusteredFLParams(Params):
    eps1: finite(0.0) = 0.4
    """Split when the mean update's norm is below eps1 (Algorithm 1) ..."""
    eps2: finite(0.0) = 1.6
    """... and the largest client update's norm above eps2."""
    min_rounds_before_split: at_least(0) = 20
    min_cluster_size: at_least(2) = 3
    linkage: one_of("single", "complete", wanted="'single' (Sattler et al., Algorithm 1) or 'complete' (the authors' demo code)") = "single"


def footprint(params: ClusteredFLParams, at: FootprintInputs) -> Footprint:
    """One model growing by splits, counted as up to twice the ground-truth groups (at most ``m``); a step
    also holds the starts and the T updates."""
    del params
    m, T = at.clients, at.participants
    kept = min(m, 2 * max(1, at.groups))
    return Footprint(
        kept=kept, train_slots=T, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=m,
        extra_bytes=(m + 2 * T) * at.model_params * FLOAT, checkpoint_rows=kept,
    )


SPEC = AlgorithmSpec(
    name="cfl",
    paper="Sattler, Müller, Samek, IEEE TNNLS 2021",
    description="FedAvg per cluster; clusters bi-partitioned by cosine similarity of updates; one stream per cluster",
    params=ClusteredFLParams,
    implementation="wirelessfl.algorithms.cfl:ClusteredFL",
    footprint=footprint,
)
