"""APFL (Deng et al. 2020): alpha = 0 is FedAvg's trace, the global model is FedAvg's, the v and alpha steps by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from wirelessfl.algorithms import Context, get_algorithm, shuffle_schedule, torch_generator
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, documented_defaults, mlp_logits, tiny_data
from simulated import LEARNING, curve, run, scenario

SIZES = (2, 5, 3, 10)


def make_ctx(participation=1.0, train=None, keep=False) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = train or TrainConfig(epochs=2, batch_size=4, lr=0.05, optimizer="adam")
    ctx = Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5, participation=participation)
    return replace(ctx, keep_optimizer_state=keep)


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


def gradient(ctx, flat, x, y):
    flat = flat.clone().requires_grad_(True)
    return torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, x), y), flat)[0]


@pytest.mark.parametrize(("adaptive", "batch_size"), [(False, 16), (True, 16), (True, 4)])
def test_the_personal_and_alpha_steps_by_hand(adaptive, batch_size):
    """Plain SGD, 2 epochs of the round's batches (full batches, or 1 to 3 per epoch: uneven step counts):
    v^t = v^{t-1} - lr a g(v_bar^{t-1}), a <- clip(a - eta_a <v - w, g(v_bar)>), w^t = w^{t-1} - lr g(w^{t-1})."""
    lr, alpha, alpha_lr = 0.5, 0.4, 2.0
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=batch_size, lr=lr, momentum=0.0))
    algo = get_algorithm("apfl")(ctx, alpha=alpha, adaptive_alpha=adaptive, alpha_lr=alpha_lr)
    algo.personal.scatter(np.arange(4), algo.personal.full() + 0.3 * torch.randn(algo.personal.full().shape, generator=torch.Generator().manual_seed(0)))
    w0, v0 = algo.models[0].double(), algo.personal.full().double()
    batches = shuffle_schedule(list(SIZES), batch_size, [2.0] * 4, torch_generator(ctx.seed, 1, "train"))
    expected_v, expected_alpha = v0.clone(), torch.full((4,), alpha, dtype=torch.float64)
    for i, own in enumerate(batches):
        client, w, v, a = ctx.data.clients[i], w0, v0[i], alpha
        for batch in own:
            x, y = client.x_train[batch], client.y_train[batch]
            g = gradient(ctx, a * v + (1 - a) * w, x, y)
            slope = float((v - w) @ g)
            v = v - lr * a * g
            w = w - lr * gradient(ctx, w, x, y)
            if adaptive:
                a = min(max(a - alpha_lr * slope, 0.0), 1.0)
        expected_v[i], expected_alpha[i] = v, a
    algo.step(1, frozenset({1, 2}))
    assert torch.allclose(algo.personal.full().double(), expected_v, atol=1e-6, rtol=0)
    assert torch.allclose(algo.alpha, expected_alpha, atol=1e-6, rtol=0)
    if adaptive:
        assert (algo.alpha != alpha).all()
    mixed = expected_alpha[:, None] * expected_v + (1 - expected_alpha[:, None]) * algo.models[0].double()
    assert torch.allclose(algo.client_params().double(), mixed, atol=1e-6, rtol=0)


def test_learning_alpha_at_rate_zero_is_the_fixed_alpha_run():
    ctx = make_ctx()
    learned, fixed = get_algorithm("apfl")(ctx, alpha=0.3, adaptive_alpha=True, alpha_lr=0.0), get_algorithm("apfl")(ctx, alpha=0.3)
    for algo in (learned, fixed):
        algo.step(1, frozenset(range(4)))
    assert torch.equal(learned.client_params(), fixed.client_params()) and (learned.alpha == 0.3).all()


def test_alpha_is_clipped_to_the_unit_interval():
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=16, lr=0.5, momentum=0.0))
    algo = get_algorithm("apfl")(ctx, alpha=0.5, adaptive_alpha=True, alpha_lr=1e6)
    algo.personal.scatter(np.arange(4), algo.personal.full() + torch.randn(algo.personal.full().shape, generator=torch.Generator().manual_seed(1)))
    algo.step(1, frozenset(range(4)))
    assert set(algo.alpha.tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_the_ends_of_alpha_are_allowed_and_pick_one_model(alpha):
    algo = get_algorithm("apfl")(make_ctx(), alpha=alpha)
    algo.personal.scatter(np.arange(4), algo.personal.full() + 1.0)
    assert torch.equal(algo.client_params(), algo.personal.full() if alpha == 1.0 else algo.models.expand(4, -1))


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


def test_defaults_are_the_documented_ones_and_tune_searches_the_papers_alphas():
    apfl = get_algorithm("apfl")
    assert {key: str(value).lower() for key, value in apfl.hparams.items()} == documented_defaults("apfl")
    assert apfl.search_space["alpha"].choices == (0.25, 0.5, 0.75)


@pytest.mark.parametrize(("params", "message"), [
    ({"alpha": 1.5}, "alpha: must be a number in [0, 1], got 1.5"),
    ({"alpha": True}, "alpha: must be a number in [0, 1], got True"),
    ({"adaptive_alpha": "yes"}, "adaptive_alpha: must be true or false, got 'yes'"),
    ({"alpha_lr": -0.1}, "alpha_lr: must be a finite number >= 0, got -0.1"),
])
def test_bad_parameters_are_one_line_at_their_yaml_path(params, message):
    """The declaration (specs/apfl.py) refuses them when the scenario is read."""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario([{"name": "apfl", "params": params}]))
    assert str(err.value) == f"scenario: algorithms[0].params.{message}"


def test_the_class_refuses_them_too():
    with pytest.raises(ValueError) as err:
        get_algorithm("apfl")(make_ctx(), alpha=1.5)
    assert str(err.value) == "apfl: alpha must be a number in [0, 1], got 1.5"



@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([{"name": "fedavg"}, {"name": "apfl", "variants": {"alpha": [0.0, 0.5]}}])


def test_alpha_zero_is_fedavgs_trace_exactly(trace):
    columns = [*LEARNING, "dl_payload", "ul_payload", "aggregated", "participants"]
    pd.testing.assert_frame_equal(curve(trace, "apfl alpha=0.0", columns), curve(trace, "fedavg", columns), check_exact=True)


def test_a_personal_share_changes_the_models(trace):
    assert not curve(trace, "apfl alpha=0.5")["mean_loss"].equals(curve(trace, "fedavg")["mean_loss"])


@pytest.mark.parametrize("name", ["apfl", "pfedme"])
def test_the_step_by_step_passes_keep_no_data_copies(name):
    """Each local step's batches are new tensors, so the engine keeps no copy of them: only the round's training call
    (the members' whole splits, read again every round) may be cached. Before, every step left one, up to the
    engine's 1 GiB bound (APFL on the cross-paper EMNIST split: 758 MB measured against 257 MB estimated)."""
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=1, lr=0.05))
    algorithm = get_algorithm(name)(ctx)
    algorithm.step(1, frozenset(range(4)))
    kept = [entry for entry in ctx.engine._data_cache.values() if any(len(x) == 1 for x, _ in entry.sources)]
    assert kept == [] and len(ctx.engine._data_cache) <= 1
