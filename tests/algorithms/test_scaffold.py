"""SCAFFOLD (Karimireddy et al., ICML 2020): round 1 is FedAvg's, twice the payload, control variates by hand."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, mlp_logits, tiny_data
from simulated import LEARNING, curve, run

SIZES = (2, 5, 3, 10)


def make_ctx(train=None) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = train or TrainConfig(epochs=1, batch_size=16, lr=0.5, momentum=0.0)
    return Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5)


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([{"name": "fedavg"}, {"name": "scaffold"}], rounds=2)


def test_round_one_with_zero_control_variates_is_fedavgs_round_one_exactly(trace):
    scaffold, fedavg = curve(trace, "scaffold", LEARNING), curve(trace, "fedavg", LEARNING)
    pd.testing.assert_frame_equal(scaffold.loc[(0, slice(0, 1)), :], fedavg.loc[(0, slice(0, 1)), :], check_exact=True)
    assert scaffold.loc[(0, 2), "mean_loss"] != fedavg.loc[(0, 2), "mean_loss"]  # from round 2 the correction acts


def test_model_and_control_variate_travel_both_ways_at_twice_fedavgs_payload(trace):
    scaffold, fedavg = curve(trace, "scaffold"), curve(trace, "fedavg")
    rounds = [(0, 1), (0, 2)]
    assert (scaffold.loc[rounds, "dl_payload"] == 2 * fedavg.loc[rounds, "dl_payload"]).all()
    assert (scaffold.loc[rounds, "ul_payload"] == 2 * fedavg.loc[rounds, "ul_payload"]).all()
    assert (scaffold.loc[rounds, "time"] > fedavg.loc[rounds, "time"]).all()
    plan = get_algorithm("scaffold")(make_ctx()).plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(2.0, frozenset(range(4)))]
    assert plan.uplink == {i: 2.0 for i in range(4)} and plan.work == {i: 1.0 for i in range(4)}


def gradient(ctx, flat, client):
    flat = flat.clone().requires_grad_(True)
    return torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, client.x_train), client.y_train), flat)[0]


def test_control_variates_and_the_corrected_step_by_hand():
    """One full-batch SGD step (K = 1): c_i+ = (x - y_i) / lr = g_i(x); c = sum over arrived / N; round 2 steps on g - c_i + c."""
    lr = 0.5
    ctx = make_ctx()
    algo = get_algorithm("scaffold")(ctx)
    clients = ctx.data.clients
    x0 = algo.models[0].double()
    g0 = [gradient(ctx, x0, c) for c in clients]
    arrived = frozenset({0, 1, 3})
    algo.step(1, arrived)
    x1 = sum(SIZES[i] * (x0 - lr * g0[i]) for i in arrived) / sum(SIZES[i] for i in arrived)
    assert torch.allclose(algo.models[0].double(), x1, atol=1e-6, rtol=0)
    c_i = [g0[i] if i in arrived else torch.zeros_like(x0) for i in range(4)]
    c = sum(c_i) / 4
    assert torch.allclose(algo.client_controls.double(), torch.stack(c_i), atol=1e-5, rtol=0)
    assert torch.allclose(algo.control.double(), c, atol=1e-5, rtol=0)
    assert algo.client_controls[2].abs().max() == 0  # its upload did not arrive: it commits nothing

    algo.step(2, frozenset(range(4)))
    y = [x1 - lr * (gradient(ctx, x1, clients[i]) - c_i[i] + c) for i in range(4)]
    x2 = sum(SIZES[i] * y[i] for i in range(4)) / sum(SIZES)
    assert torch.allclose(algo.models[0].double(), x2, atol=1e-5, rtol=0)
    refreshed = [c_i[i] - c + (x1 - y[i]) / lr for i in range(4)]
    assert torch.allclose(algo.client_controls.double(), torch.stack(refreshed), atol=1e-4, rtol=0)
    assert torch.allclose(algo.control.double(), c + sum(refreshed[i] - c_i[i] for i in range(4)) / 4, atol=1e-4, rtol=0)


@pytest.mark.parametrize("rate", [0.5, 2.0])
def test_the_server_rate_scales_the_averaged_update(rate):
    ctx = make_ctx()
    plain, scaled, fedavg = get_algorithm("scaffold")(ctx), get_algorithm("scaffold")(ctx, server_lr=rate), get_algorithm("fedavg")(ctx)
    x0 = plain.models.clone()
    for algo in (plain, scaled, fedavg):
        algo.step(1, frozenset(range(4)))
    assert torch.equal(plain.models, fedavg.models)  # rate 1 takes the average itself, not x + 1 (avg - x)
    assert torch.allclose(scaled.models, x0 + rate * (plain.models - x0), atol=1e-7, rtol=0)


def test_a_client_that_took_no_step_keeps_its_control_variate():
    """epochs = 0 (K_i = 0): (x - y_i) / (K_i lr) is 0/0; c_i and c stay as they were, and so does x."""
    ctx = make_ctx()
    algo = get_algorithm("scaffold")(ctx)
    algo.step(1, frozenset(range(4)))
    models, control, client_controls = algo.models.clone(), algo.control.clone(), algo.client_controls.clone()
    assert control.abs().max() > 0
    ctx.train = replace(ctx.train, epochs=0)
    algo.step(2, frozenset(range(4)))
    assert torch.equal(algo.client_controls, client_controls) and torch.equal(algo.control, control)
    assert torch.allclose(algo.models, models, atol=1e-6, rtol=0)  # the average of unchanged copies


def test_the_state_round_trips_and_continues_identically():
    ctx = make_ctx(TrainConfig(epochs=1, batch_size=2, lr=0.1, momentum=0.9))
    algo = get_algorithm("scaffold")(ctx)
    algo.step(1, frozenset({0, 2, 3}))
    copy = get_algorithm("scaffold")(ctx)
    copy.load_state_dict(algo.state_dict())
    algo.step(2, frozenset(range(4)))
    copy.step(2, frozenset(range(4)))
    assert torch.equal(algo.models, copy.models) and torch.equal(algo.client_controls, copy.client_controls)


@pytest.mark.parametrize("rate", [0, -1.0, float("inf")])
def test_a_bad_server_rate_is_one_line(rate):
    with pytest.raises(ValueError, match=r"^scaffold: server_lr must be a finite number > 0, got "):
        get_algorithm("scaffold")(make_ctx(), server_lr=rate)
