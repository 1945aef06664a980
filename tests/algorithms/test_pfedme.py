"""pFedMe (Dinh et al., NeurIPS 2020): one round by hand, beta = 1 is the plain average, beta mixes, state round trips."""

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
from simulated import curve, run, scenario

SIZES = (2, 5, 3, 10)


def make_ctx(participation=1.0, train=None, keep=False) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = train or TrainConfig(epochs=2, batch_size=4, lr=0.05, optimizer="adam")
    ctx = Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5, participation=participation)
    return replace(ctx, keep_optimizer_state=keep)


def gradient(ctx, flat, x, y):
    flat = flat.clone().requires_grad_(True)
    return torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, x), y), flat)[0]


def clipped(grad: torch.Tensor, clip_norm: float | None) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_``'s scaling of one gradient."""
    return grad if clip_norm is None else grad * min(1.0, clip_norm / (grad.norm().item() + 1e-6))


@pytest.mark.parametrize(("beta", "batch_size", "clip_norm"), [(1.0, 16, None), (2.0, 16, None), (1.0, 4, None), (1.0, 4, 0.3)])
def test_one_round_by_hand(beta, batch_size, clip_norm):
    """2 epochs of the round's batches (full batches, or 1 to 3 per epoch: uneven step counts), K = 3 inner steps
    each: theta <- theta - plr clip(g(theta) + lam (theta - w)), then w <- w - lr lam (w - theta); server:
    (1 - beta) w + beta sum n_i w_i / sum n_i over the arrived. clip: the scenario's clip_norm (none: the paper's
    plain step)."""
    lr, plr, lam, K = 0.05, 0.2, 2.0, 3
    cfg = TrainConfig(epochs=2, batch_size=batch_size, lr=lr, momentum=0.9, optimizer="sgd", clip_norm=clip_norm)
    ctx = make_ctx(train=cfg)
    algo = get_algorithm("pfedme")(ctx, **{"lambda": lam, "inner_steps": K, "personal_lr": plr, "beta": beta})
    w0 = algo.models[0].double()
    batches = shuffle_schedule(list(SIZES), batch_size, [2.0] * 4, torch_generator(ctx.seed, 1, "train"))
    locals_, thetas = [], []
    for client, own in zip(ctx.data.clients, batches):
        w, theta = w0, w0
        for batch in own:
            for _ in range(K):
                step = gradient(ctx, theta, client.x_train[batch], client.y_train[batch]) + lam * (theta - w)
                theta = theta - plr * clipped(step, clip_norm)
            w = w - lr * lam * (w - theta)
        locals_.append(w)
        thetas.append(theta)
    arrived = [1, 3]
    sizes = torch.tensor([SIZES[i] for i in arrived], dtype=torch.float64)
    average = sum(n * locals_[i] for n, i in zip(sizes, arrived)) / sizes.sum()
    algo.step(1, frozenset(arrived))
    assert torch.allclose(algo.personal.full().double(), torch.stack(thetas), atol=1e-6, rtol=0)
    assert torch.allclose(algo.models[0].double(), (1 - beta) * w0 + beta * average, atol=1e-6, rtol=0)
    assert torch.equal(algo.client_params(), algo.personal.full())


def test_beta_one_is_the_plain_average_exactly():
    ctx = make_ctx()
    algo = get_algorithm("pfedme")(ctx, beta=1.0)
    members = algo.participants(1)
    local, _ = algo.local_updates(1, members, algo.received(members))
    again = get_algorithm("pfedme")(ctx, beta=1.0)
    again.step(1, frozenset({0, 2, 3}))
    assert torch.equal(again.models, algo.aggregate({i: local[i] for i in (0, 2, 3)}))


def test_no_arrival_keeps_the_global_model_for_any_beta():
    algo = get_algorithm("pfedme")(make_ctx(), beta=2.0)
    before = algo.models.clone()
    algo.step(1, frozenset())
    assert torch.equal(algo.models, before) and not torch.equal(algo.personal.full()[0], before[0])


@pytest.mark.parametrize("inner_steps", [1, 4])
def test_pfedme_sends_fedavgs_payload_and_computes_k_passes(inner_steps):
    plan = get_algorithm("pfedme")(make_ctx(0.5), inner_steps=inner_steps).plan(1)
    assert [s.payload for s in plan.streams] == [1.0] and len(plan.work) == 2
    assert set(plan.uplink.values()) == {1.0} and set(plan.work.values()) == {float(inner_steps)}


def test_held_out_clients_get_the_global_model_and_state_round_trips():
    ctx = replace(make_ctx(0.5, keep=True), held_out=np.array([2]))
    algo = get_algorithm("pfedme")(ctx, beta=1.5)
    algo.step(1, frozenset({0, 1, 3}))
    assert torch.equal(algo.client_params()[2], algo.models[0])
    copy = get_algorithm("pfedme")(ctx, beta=1.5)
    copy.load_state_dict(algo.state_dict())
    for round_ in (2, 3):
        algo.step(round_, frozenset({0, 1, 3}))
        copy.step(round_, frozenset({0, 1, 3}))
    assert torch.equal(algo.client_params(), copy.client_params()) and torch.equal(algo.models, copy.models)


def test_defaults_are_the_documented_ones_and_the_search_space_the_documented_grid():
    pfedme = get_algorithm("pfedme")
    assert {key: str(value) for key, value in pfedme.hparams.items()} == documented_defaults("pfedme")
    assert pfedme.search_space["lambda"].choices == (1.0, 5.0, 15.0) and pfedme.search_space["beta"].choices == (1.0, 2.0)


@pytest.mark.parametrize(("params", "message"), [
    ({"lambda": 0}, "lambda: must be a finite number > 0, got 0"),
    ({"beta": float("inf")}, "beta: must be a finite number > 0, got inf"),
    ({"personal_lr": True}, "personal_lr: must be a finite number > 0, got True"),
    ({"inner_steps": 0}, "inner_steps: must be an int >= 1, got 0"),
    ({"inner_steps": 2.0}, "inner_steps: must be an int >= 1, got 2.0"),
])
def test_bad_parameters_are_one_line_at_their_yaml_path(params, message):
    """The declaration (specs/pfedme.py) refuses them when the scenario is read."""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario([{"name": "pfedme", "params": params}]))
    assert str(err.value) == f"scenario: algorithms[0].params.{message}"


def test_the_class_refuses_them_too():
    with pytest.raises(ValueError) as err:
        get_algorithm("pfedme")(make_ctx(), **{"lambda": 0})
    assert str(err.value) == "pfedme: lambda must be a finite number > 0, got 0"



def test_runs_through_simulate_with_its_payload():
    trace = run([{"name": "fedavg"}, {"name": "pfedme", "params": {"lambda": 1.0, "personal_lr": 0.05}}])
    pfedme, fedavg = curve(trace, "pfedme"), curve(trace, "fedavg")
    assert (pfedme["dl_payload"] == fedavg["dl_payload"]).all() and (pfedme["ul_payload"] == fedavg["ul_payload"]).all()
    assert pfedme["avg_acc"].notna().all() and not pfedme["avg_acc"].equals(fedavg["avg_acc"])
