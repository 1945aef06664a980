"""FedPer (Arivazhagan et al., arXiv:1912.00818, 2019): shared body averaged, personal last layer(s) on each device."""

from typing import Annotated, Any

from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, checked, at_least


def _paths(value: Any) -> bool:
    return value is None or (isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value))


class FedPerParams(Params):
    personal_layers: at_least(0) = 1
    """The last layers with parameters kept on each device."""
    personal_params: Annotated[Any, checked(_paths, "a list of parameter paths (e.g. [fc2])")] = None
    """The personal parameters by path, in place of ``personal_layers``."""


def footprint(params: FedPerParams, at: FootprintInputs) -> Footprint:
    """One body plus ``m`` heads (in a client store); one train call over T slots; evaluated group by group."""
    del params
    m = at.clients
    return Footprint(
        kept=1, kept_bytes=m * at.head_size * FLOAT, train_slots=at.participants, state=at.optimizer_rows, keep_rows=m, eval_rows=m,
        eval_slots=m, eval_by_row=True, checkpoint_rows=1 + m * at.head_size / at.model_params, stored=m * at.head_size / at.model_params,
    )


SPEC = AlgorithmSpec(
    name="fedper",
    paper="Arivazhagan et al., arXiv:1912.00818 (2019)",
    description="shared body averaged by n_j, personal last layer(s) trained and kept on each device",
    params=FedPerParams,
    implementation="wirelessfl.algorithms.fedper:FedPer",
    footprint=footprint,
    # scheduling picks who trains and uploads the body; compression compresses the body's update alone (docs/levers.md)
    levers=frozenset({"scheduling", "compression"}),
)
