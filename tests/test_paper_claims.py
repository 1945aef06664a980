"""user-centric-fl.txt claims that hold at small scale, checked on embedded digits.

The paper-scale versions are the scenarios in scenarios/paper/ (docs/research/reproduction.md).
These reduced runs (8 users, a dozen rounds) keep the qualitative orderings the
paper reports where they do not need EMNIST's scale.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.config import parse_scenario
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl_papers.user_centric import (
    local_beats_fedavg,
    oracle_far_above_fedavg,
    stream_overhead_small_when_ul_slow,
)
from wirelessfl.results.reproduction import Run
from wirelessfl.simulate import simulate


SMALL_CNN = {"name": "examples.user_models:two_conv_dropout", "options": {"width": 8, "hidden": 32, "p": 0.0}}
"""Two convolutions on the digits' own 8x8 pixels (concept shift: FedAvg 34.7, Local 64.7, Oracle 83.7; rotations:
FedAvg 39.7, Oracle 78.4): the orderings LeNet-5 upsampled to 32x32 gave, at a third of its CPU."""


def scenario(shift: dict, algorithms: list[dict], rounds: int = 12) -> dict:
    return {
        "name": "claims",
        "rounds": rounds,
        "eval_every": rounds,
        "device": "cpu",
        "data": {
            "dataset": "digits",
            "clients": 8,
            "samples": {"per_client": 200},
            "partition": [{"name": "iid"}, shift],
        },
        "model": SMALL_CNN,
        "training": {"batch_size": 16, "lr": 0.05, "momentum": 0.9},
        "algorithms": algorithms,
        "networks": [{"preset": "slow-ul-unreliable"}, {"preset": "wired"}],
    }


def final(trace, curve: str) -> float:
    rows = trace[(trace.curve == curve) & (trace["round"] == trace["round"].max())]
    return float(rows.avg_acc.iloc[0])


@pytest.fixture(scope="module")
def concept_shift():
    doc = scenario(
        {"name": "label_permutation", "groups": 2},
        [{"name": "fedavg"}, {"name": "local"}, {"name": "oracle"}, {"name": "ucfl", "variants": {"streams": [2, "m"]}}],
    )
    return simulate(parse_scenario(doc)).trace


def test_concept_shift_collaboration_hurts_and_the_oracle_recovers(concept_shift):
    """§IV-B, CIFAR concept shift: Local > FedAvg, Oracle >> FedAvg.

    The paper's "UCFL k=4 ~ Oracle" does NOT follow here with the paper's eq. 6
    defaults: k-means finds the groups exactly (next test) but the centroid rows
    are nearly uniform, so each stream mixes both groups (docs/research/reproduction.md).
    """
    fedavg, local, oracle = (final(concept_shift, c) for c in ("fedavg", "local", "oracle"))
    assert local > fedavg + 0.1
    assert oracle > fedavg + 0.2
    assert oracle > local
    run = Run.from_trace(concept_shift)  # the report's own claim checks agree on this real run
    assert local_beats_fedavg(run).holds and oracle_far_above_fedavg(run).holds


def test_ucfl_weights_find_label_permutation_groups():
    spec = DataSpec(
        dataset="digits", num_clients=8, samples={"per_client": 200},
        partition=({"name": "iid"}, {"name": "label_permutation", "groups": 2}),
    )
    data = build_federated_data(spec, seed=0)
    arch = get_architecture("lenet5", data.input_shape, data.num_classes)
    ctx = Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), TrainConfig(batch_size=16, lr=0.05), seed=0)
    algo = get_algorithm("ucfl")(ctx, streams=2)
    algo.plan(1)
    algo.step(1, frozenset(range(8)))
    assert adjusted_rand_score(data.groups, algo.assignment) == 1.0
    same = data.groups[:, None] == data.groups[None, :]
    assert algo.weights[same].mean() > algo.weights[~same].mean()  # nearly uniform, yet ordered (docs/research/ucfl-investigation.md)


def test_covariate_shift_oracle_beats_fedavg():
    """§IV-B scenario 2: with rotation groups the oracle largely outperforms FedAvg."""
    doc = scenario({"name": "rotation", "groups": 4}, [{"name": "fedavg"}, {"name": "oracle"}])
    trace = simulate(parse_scenario(doc)).trace
    assert final(trace, "oracle") > final(trace, "fedavg") + 0.05


def test_fig3_extra_streams_are_cheap_on_slow_uplink_and_costly_on_wired(concept_shift):
    """§IV-C: the extra DL cost of unicast personalization is negligible at rho=4, not at rho=1."""
    last = concept_shift[concept_shift["round"] == concept_shift["round"].max()].set_index(["curve", "profile"])["time"]
    overhead = {
        p: last[("ucfl streams=m", p)] / last[("ucfl streams=2", p)] - 1 for p in ("slow-ul-unreliable", "wired")
    }
    assert 0 < overhead["slow-ul-unreliable"] < 0.25
    assert overhead["wired"] > 2 * overhead["slow-ul-unreliable"]
    assert np.isfinite(list(overhead.values())).all()
    assert stream_overhead_small_when_ul_slow(Run.from_trace(concept_shift)).holds
