"""FedProx (Li et al., MLSys 2020): the proximal pull by hand, mu = 0 is FedAvg, the plugin example is the built-in."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, mlp_logits, tiny_data
from simulated import COLUMNS, curve, run

PLUGIN = "examples.fedprox_plugin:FedProxPlugin"


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([
        {"name": "fedavg"},
        {"name": "fedprox", "variants": {"mu": [0.0, 0.5]}},
        {"name": PLUGIN, "label": "plugin", "variants": {"mu": [0.5]}},
    ])


def test_mu_zero_is_fedavgs_trace_exactly(trace):
    pd.testing.assert_frame_equal(curve(trace, "fedprox mu=0.0"), curve(trace, "fedavg"), check_exact=True)


def test_a_proximal_pull_changes_training(trace):
    assert not curve(trace, "fedprox mu=0.5")["mean_loss"].equals(curve(trace, "fedavg")["mean_loss"])


def test_the_plugin_example_gives_the_built_ins_trace_exactly(trace):
    pd.testing.assert_frame_equal(curve(trace, "plugin mu=0.5"), curve(trace, "fedprox mu=0.5"), check_exact=True)
    assert set(trace.loc[trace["curve"] == "plugin mu=0.5", "algorithm"]) == {PLUGIN}


def test_two_full_batch_steps_are_pulled_towards_the_round_start_by_hand():
    """theta_1 = theta_0 - lr grad F(theta_0) (the pull is 0 at the start); theta_2 = theta_1 - lr (grad F(theta_1) + mu (theta_1 - theta_0))."""
    lr, mu = 0.5, 2.0
    sizes = (3, 6)
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    ctx = Context(tiny_data(sizes), arch, LockstepEngine(arch, "cpu"), TrainConfig(epochs=2, batch_size=16, lr=lr, momentum=0.0), seed=3)
    algo = get_algorithm("fedprox")(ctx, mu=mu)
    start = algo.models[0].double()

    def grad(flat, client):
        flat = flat.clone().requires_grad_(True)
        return torch.autograd.grad(F.cross_entropy(mlp_logits(arch, flat, client.x_train), client.y_train), flat)[0]

    trained = []
    for client in ctx.data.clients:
        first = start - lr * grad(start, client)
        trained.append(first - lr * (grad(first, client) + mu * (first - start)))
    expected = (sizes[0] * trained[0] + sizes[1] * trained[1]) / sum(sizes)
    algo.step(1, frozenset({0, 1}))
    assert torch.allclose(algo.models[0].double(), expected, atol=1e-6, rtol=0)
    fedavg = get_algorithm("fedavg")(ctx)
    fedavg.step(1, frozenset({0, 1}))
    assert (fedavg.models[0] - algo.models[0]).abs().max() > 1e-3


def test_plan_is_fedavgs():
    arch = get_architecture("mlp", SHAPE, CLASSES)
    ctx = Context(tiny_data((2, 3, 4)), arch, LockstepEngine(arch, "cpu"), TrainConfig(), seed=0)
    plan, reference = get_algorithm("fedprox")(ctx).plan(1), get_algorithm("fedavg")(ctx).plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(1.0, frozenset({0, 1, 2}))]
    assert [(s.payload, s.receivers) for s in reference.streams] == [(1.0, frozenset({0, 1, 2}))]
    assert plan.uplink == reference.uplink == {0: 1.0, 1: 1.0, 2: 1.0}
    assert plan.work == reference.work


@pytest.mark.parametrize("mu", [-0.1, float("nan"), "big", True])
def test_a_bad_mu_is_one_line(mu):
    arch = get_architecture("mlp", SHAPE, CLASSES)
    ctx = Context(tiny_data((2, 3)), arch, LockstepEngine(arch, "cpu"), TrainConfig(), seed=0)
    with pytest.raises(ValueError, match=r"^fedprox: mu must be a finite number >= 0, got "):
        get_algorithm("fedprox")(ctx, mu=mu)
