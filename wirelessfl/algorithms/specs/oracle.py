"""Oracle (user-centric-fl.txt §V baseline): FedAvg within each ground-truth group."""

from wirelessfl.algorithms.spec import AlgorithmSpec, Footprint, FootprintInputs, Params


class OracleParams(Params):
    """Oracle has no parameters."""


def footprint(params: OracleParams, at: FootprintInputs) -> Footprint:
    """One model per ground-truth group; one train call over the T participants."""
    del params
    m, kept = at.clients, max(1, at.groups)
    return Footprint(kept=kept, train_slots=at.participants, state=at.optimizer_rows, eval_rows=m, eval_by_row=True, eval_slots=m, checkpoint_rows=kept)


SPEC = AlgorithmSpec(
    name="oracle",
    paper="user-centric-fl.txt §V (baseline)",
    description="FedAvg per ground-truth group (knows the groups); one multicast stream per group",
    params=OracleParams,
    implementation="wirelessfl.algorithms.oracle:Oracle",
    footprint=footprint,
    knows_truth=True,
    levers=frozenset({"scheduling", "compression"}),
)
