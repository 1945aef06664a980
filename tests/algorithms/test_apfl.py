"""APFL (Deng et al. 2020): alpha = 0 is FedAvg's trace, the global model is FedAvg's, the v and alpha steps by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
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


def make_ctx(participation=1.0, train=None, keep=False) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = train or TrainConfig(epochs=2, batch_size=4, lr=0.05, optimizer="adam")
    ctx = Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5, participation=participation)
    return replace(ctx, keep_optimizer_state=keep)


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([{"name": "fedavg"}, {"name": "apfl", "variants": {"alpha": [0.0, 0.5]}}])


def test_alpha_zero_is_fedavgs_trace_exactly(trace):
    columns = [*LEARNING, "dl_payload", "ul_payload", "aggregated", "participants"]
    pd.testing.assert_frame_equal(curve(trace, "apfl alpha=0.0", columns), curve(trace, "fedavg", columns), check_exact=True)


def test_a_personal_share_changes_the_models(trace):
    assert not curve(trace, "apfl alpha=0.5")["mean_loss"].equals(curve(trace, "fedavg")["mean_loss"])


def test_apfl_communicates_as_fedavg_and_computes_twice():
    plan = get_algorithm("apfl")(make_ctx()).plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(1.0, frozenset(range(4)))]
    assert plan.uplink == {i: 1.0 for i in range(4)} and plan.work == {i: 2.0 for i in range(4)}


@pytest.mark.parametrize(("participation", "keep"), [(1.0, False), (0.5, True)])
def test_the_global_model_is_fedavgs_for_any_alpha(participation, keep):
    ctx = make_ctx(participation, keep=keep)
    apfl = get_algorithm("apfl")(ctx, alpha=0.6, adaptive_alpha=True, alpha_lr=0.1)
    fedavg = get_algorithm("fedavg")(ctx)
    for round_, arrived in [(1, frozenset(range(4))), (2, frozenset({0, 3})), (3, frozenset({1, 2, 3}))]:
        apfl.step(round_, arrived)
        fedavg.step(round_, arrived)
        assert torch.equal(apfl.models, fedavg.models)
    assert (apfl.client_params() - fedavg.client_params()).abs().max() > 1e-3


def gradient(ctx, flat, client):
    flat = flat.clone().requires_grad_(True)
    return torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, client.x_train), client.y_train), flat)[0]


@pytest.mark.parametrize("adaptive", [False, True])
def test_the_personal_and_alpha_steps_by_hand(adaptive):
    """Full batch, plain SGD, 2 steps: v^t = v^{t-1} - lr a g(v_bar^{t-1}), a <- clip(a - eta_a <v - w, g(v_bar)>)."""
    lr, alpha, alpha_lr = 0.5, 0.4, 2.0
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=16, lr=lr, momentum=0.0))
    algo = get_algorithm("apfl")(ctx, alpha=alpha, adaptive_alpha=adaptive, alpha_lr=alpha_lr)
    algo.personal = algo.personal + 0.3 * torch.randn(algo.personal.shape, generator=torch.Generator().manual_seed(0))
    w0, v0 = algo.models[0].double(), algo.personal.double()
    expected_v, expected_alpha = v0.clone(), torch.full((4,), alpha, dtype=torch.float64)
    for i in range(4):
        client, w, v, a = ctx.data.clients[i], w0, v0[i], alpha
        for _ in range(2):
            g = gradient(ctx, a * v + (1 - a) * w, client)
            slope = float((v - w) @ g)
            v = v - lr * a * g
            w = w - lr * gradient(ctx, w, client)
            if adaptive:
                a = min(max(a - alpha_lr * slope, 0.0), 1.0)
        expected_v[i], expected_alpha[i] = v, a
    algo.step(1, frozenset({1, 2}))
    assert torch.allclose(algo.personal.double(), expected_v, atol=1e-6, rtol=0)
    assert torch.allclose(algo.alpha, expected_alpha, atol=1e-6, rtol=0)
    if adaptive:
        assert (algo.alpha != alpha).all()
    mixed = expected_alpha[:, None] * expected_v + (1 - expected_alpha[:, None]) * algo.models[0].double()
    assert torch.allclose(algo.client_params().double(), mixed, atol=1e-6, rtol=0)


def test_alpha_is_clipped_to_the_unit_interval():
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=16, lr=0.5, momentum=0.0))
    algo = get_algorithm("apfl")(ctx, alpha=0.5, adaptive_alpha=True, alpha_lr=1e6)
    algo.personal = algo.personal + torch.randn(algo.personal.shape, generator=torch.Generator().manual_seed(1))
    algo.step(1, frozenset(range(4)))
    assert set(algo.alpha.tolist()) <= {0.0, 1.0}


def test_held_out_clients_get_the_global_model_and_state_round_trips():
    ctx = replace(make_ctx(keep=True), held_out=np.array([2]))
    params = {"alpha": 0.5, "adaptive_alpha": True, "alpha_lr": 0.5}
    algo = get_algorithm("apfl")(ctx, **params)
    algo.step(1, frozenset({0, 1, 3}))
    assert torch.equal(algo.client_params()[2], algo.models[0])
    assert not torch.equal(algo.client_params()[0], algo.models[0])
    copy = get_algorithm("apfl")(ctx, **params)
    copy.load_state_dict(algo.state_dict())
    algo.step(2, frozenset({0, 1, 3}))
    copy.step(2, frozenset({0, 1, 3}))
    assert torch.equal(algo.client_params(), copy.client_params()) and torch.equal(algo.alpha, copy.alpha)


@pytest.mark.parametrize(("params", "message"), [
    ({"alpha": 1.5}, "apfl: alpha must be a number in [0, 1], got 1.5"),
    ({"alpha": True}, "apfl: alpha must be a number in [0, 1], got True"),
    ({"adaptive_alpha": "yes"}, "apfl: adaptive_alpha must be true or false, got 'yes'"),
    ({"alpha_lr": -0.1}, "apfl: alpha_lr must be a finite number >= 0, got -0.1"),
])
def test_bad_parameters_are_one_line(params, message):
    with pytest.raises(ValueError) as err:
        get_algorithm("apfl")(make_ctx(), **params)
    assert str(err.value) == message
