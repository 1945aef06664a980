"""Ditto (Li et al., ICML 2021): lambda = 0 is Local's trace, the global model is FedAvg's, the pull by hand."""

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
    return run([{"name": "local"}, {"name": "ditto", "variants": {"lambda": [0.0, 1.0]}}])


def test_lambda_zero_personal_models_are_locals_trace_exactly(trace):
    pd.testing.assert_frame_equal(curve(trace, "ditto lambda=0.0", LEARNING), curve(trace, "local", LEARNING), check_exact=True)


def test_a_pull_towards_the_global_model_changes_the_personal_models(trace):
    assert not curve(trace, "ditto lambda=1.0")["mean_loss"].equals(curve(trace, "local")["mean_loss"])


def test_ditto_communicates_as_fedavg_and_computes_twice(trace):
    ditto = curve(trace, "ditto lambda=1.0")
    assert (ditto.loc[0]["dl_payload"].iloc[1:] == 1.0).all() and (ditto.loc[0]["ul_payload"].iloc[1:] == 3.0).all()
    plan = get_algorithm("ditto")(make_ctx()).plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(1.0, frozenset(range(4)))]
    assert plan.uplink == {i: 1.0 for i in range(4)} and plan.work == {i: 2.0 for i in range(4)}


@pytest.mark.parametrize(("participation", "keep"), [(1.0, False), (0.5, True)])
def test_the_global_model_is_fedavgs_for_any_lambda(participation, keep):
    ctx = make_ctx(participation, keep=keep)
    ditto, fedavg = get_algorithm("ditto")(ctx, **{"lambda": 0.7}), get_algorithm("fedavg")(ctx)
    for round_, arrived in [(1, frozenset(range(4))), (2, frozenset({0, 3})), (3, frozenset({1, 2, 3}))]:
        ditto.step(round_, arrived)
        fedavg.step(round_, arrived)
        assert torch.equal(ditto.models, fedavg.models)
    assert (ditto.client_params() - fedavg.client_params()).abs().max() > 1e-3


def test_a_personal_step_is_pulled_towards_the_received_global_model_by_hand():
    """Full batch, plain SGD, 2 epochs: v_1 = v_0 - lr grad F(v_0) - lr lam (v_0 - w), v_2 likewise from v_1."""
    lr, lam = 0.5, 3.0
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=16, lr=lr, momentum=0.0))
    algo = get_algorithm("ditto")(ctx, **{"lambda": lam})
    algo.personal.scatter(np.arange(4), algo.personal.full() + 0.05 * torch.randn(algo.personal.full().shape, generator=torch.Generator().manual_seed(0)))
    w, v = algo.models[0].double(), algo.personal.full().double()

    def grad(flat, client):
        flat = flat.clone().requires_grad_(True)
        return torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, client.x_train), client.y_train), flat)[0]

    expected = []
    for i, client in enumerate(ctx.data.clients):
        row = v[i]
        for _ in range(2):
            row = row - lr * (grad(row, client) + lam * (row - w))
        expected.append(row)
    algo.step(1, frozenset({1, 2}))
    assert torch.allclose(algo.personal.full().double(), torch.stack(expected), atol=1e-6, rtol=0)


def test_held_out_clients_get_the_global_model_and_state_round_trips():
    ctx = replace(make_ctx(), held_out=np.array([2]))
    algo = get_algorithm("ditto")(ctx, **{"lambda": 0.5})
    algo.step(1, frozenset({0, 1, 3}))
    params = algo.client_params()
    assert torch.equal(params[2], algo.models[0]) and torch.equal(params[0], algo.personal.full()[0])
    copy = get_algorithm("ditto")(ctx, **{"lambda": 0.5})
    copy.load_state_dict(algo.state_dict())
    algo.step(2, frozenset({0, 1, 3}))
    copy.step(2, frozenset({0, 1, 3}))
    assert torch.equal(algo.client_params(), copy.client_params())


def test_a_bad_lambda_is_one_line():
    with pytest.raises(ValueError, match=r"^ditto: lambda must be a finite number >= 0, got -1$"):
        get_algorithm("ditto")(make_ctx(), **{"lambda": -1})
