"""PFLEGO (Nikoloutsopoulos, Koutsopoulos, Titsias; pflego.txt, Algorithm 1): exact distributed SGD on eq. 1."""

from wirelessfl.algorithms.search_space import Param
from wirelessfl.algorithms.spec import FLOAT, AlgorithmSpec, Footprint, FootprintInputs, Params, at_least, finite, one_of


class PFLEGOParams(Params):
    tau: at_least(1) = 50
    """Head steps per round (tau - 1 head-only steps, then the joint one)."""
    server_lr: finite(0.0, above=True, nullable="train.lr") = None
    """rho of eq. 3-4."""
    client_lr: finite(0.0, above=True, nullable="train.lr") = None
    """beta of the tau - 1 head-only steps."""
    sampling: one_of("fixed", "binomial") = "fixed"
    final_head_step: one_of("exact", "eq3") = "exact"
    server_optimizer: one_of("sgd", "adam") = "sgd"


def footprint(params: PFLEGOParams, at: FootprintInputs) -> Footprint:
    """One body and ``m`` heads (in a client store); a step holds the joint parameters, the head-step copy, the cached features and
    the full gradients (float32 and float64); evaluated group by group of slots."""
    del params
    m, T, P = at.clients, at.participants, at.model_params
    features = T * max(at.train_sizes[:T], default=0) * (at.head_inputs + 1) * FLOAT
    return Footprint(
        kept=1, kept_bytes=m * at.head_size * FLOAT, train_slots=0, state=0, eval_rows=m, eval_slots=m, eval_by_row=True,
        extra_bytes=T * P * (FLOAT * 3 + 8) + features, checkpoint_rows=1 + m * at.head_size / P, stored=m * at.head_size / P,
    )


SPEC = AlgorithmSpec(
    name="pflego",
    paper="Nikoloutsopoulos, Koutsopoulos, Titsias, PFLEGO (pflego.txt), Algorithm 1",
    description="shared body updated by the server with I/r-scaled body gradients; per-client heads (tau GD steps)",
    params=PFLEGOParams,
    implementation="wirelessfl.algorithms.pflego:PFLEGO",
    # its own server and client rates replace training.lr, and tau head steps replace local epochs
    search_space={
        "server_lr": Param.range(1e-3, 1.0, log=True),
        "client_lr": Param.range(1e-3, 1.0, log=True),
        "tau": Param.range(5, 50),
    },
    footprint=footprint,
)
