"""Local training (user-centric-fl.txt §V baseline): each client alone."""

from wirelessfl.algorithms.spec import AlgorithmSpec, Footprint, FootprintInputs, Params


class LocalParams(Params):
    """Local has no parameters."""


def footprint(params: LocalParams, at: FootprintInputs) -> Footprint:
    """``m`` models, their optimizer state kept per client."""
    del params
    m = at.clients
    return Footprint(kept=m, train_slots=at.participants, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=m, checkpoint_rows=m, keep_rows=m, stored=m)


SPEC = AlgorithmSpec(
    name="local",
    paper="user-centric-fl.txt §V (baseline)",
    description="each client trains its own model; no communication",
    params=LocalParams,
    implementation="wirelessfl.algorithms.local:Local",
    footprint=footprint,
    timing_independent=True,
)
