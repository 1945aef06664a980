"""FedAvg+ (FedEM paper §4): FedAvg training, clients evaluate a locally fine-tuned copy."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import wirelessfl.algorithms.fedavg_ft  # noqa: F401  (registers fedavg_ft)
from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.algorithms.base import torch_generator
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, mlp_logits, tiny_data

SIZES = (3, 8, 5, 6)


def make_ctx(train=None, participation=1.0) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = train or TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.9)
    return Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=7, participation=participation)


@pytest.fixture(scope="module")
def ctx():
    return make_ctx()


ROUNDS = [(1, frozenset(range(4))), (2, frozenset({0, 2}))]


def test_global_model_trains_exactly_as_fedavg(ctx):
    tuned = get_algorithm("fedavg_ft")(ctx)
    fedavg = get_algorithm("fedavg")(ctx)
    for round_, arrived in ROUNDS:
        tuned.step(round_, arrived)
        fedavg.step(round_, arrived)
        tuned.evaluate()  # fine-tuning for evaluation must not feed back into training
    assert torch.equal(tuned.global_params(), fedavg.client_params())
    assert not torch.allclose(tuned.client_params(), fedavg.client_params())


def test_zero_finetune_epochs_is_fedavg(ctx):
    tuned = get_algorithm("fedavg_ft")(ctx, finetune_epochs=0)
    fedavg = get_algorithm("fedavg")(ctx)
    for round_, arrived in ROUNDS:
        tuned.step(round_, arrived)
        fedavg.step(round_, arrived)
    assert torch.equal(tuned.client_params(), fedavg.client_params())


@pytest.mark.parametrize("epochs", [1, 2])
def test_fine_tuning_is_local_gradient_descent_on_the_global_model(epochs):
    """Full batch, no momentum: client i's model is ``epochs`` GD steps on l_i from the global model."""
    lr = 0.4
    ctx = make_ctx(train=TrainConfig(epochs=1, batch_size=16, lr=0.1, momentum=0.0))
    algo = get_algorithm("fedavg_ft")(ctx, finetune_epochs=epochs, finetune_lr=lr)
    algo.step(1, frozenset(range(4)))
    start = algo.global_params().double()
    expected = []
    for i, c in enumerate(ctx.data.clients):
        flat = start[i]
        for _ in range(epochs):
            leaf = flat.clone().requires_grad_(True)
            loss = F.cross_entropy(mlp_logits(ctx.arch, leaf, c.x_train), c.y_train)
            flat = flat - lr * torch.autograd.grad(loss, leaf)[0]
        expected.append(flat)
    expected = torch.stack(expected)
    assert (expected - start).abs().max() > 1e-3
    assert torch.allclose(algo.client_params().double(), expected, atol=1e-6, rtol=0)


def test_evaluation_uses_the_fine_tuned_models(ctx):
    algo = get_algorithm("fedavg_ft")(ctx)
    algo.step(1, frozenset(range(4)))
    result = algo.evaluate()
    direct = ctx.engine.evaluate(algo.client_params(), ctx.test_sets(range(4)))
    global_ = ctx.engine.evaluate(algo.global_params(), ctx.test_sets(range(4)))
    assert torch.equal(result.loss, direct.loss) and not torch.equal(result.loss, global_.loss)


def test_plan_is_fedavg_plan_fine_tuning_not_counted():
    plan = get_algorithm("fedavg_ft")(make_ctx(participation=0.5)).plan(3)
    reference = get_algorithm("fedavg")(make_ctx(participation=0.5)).plan(3)
    assert plan.participants == reference.participants and len(plan.participants) == 2
    assert plan.uplink == reference.uplink and plan.work == reference.work
    assert [(s.payload, s.receivers) for s in plan.streams] == [(s.payload, s.receivers) for s in reference.streams]


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"finetune_epochs": -1}, "fedavg_ft: finetune_epochs must be a finite number >= 0, got -1"),
        ({"finetune_epochs": "one"}, "fedavg_ft: finetune_epochs must be a finite number >= 0, got 'one'"),
        ({"finetune_lr": 0.0}, "fedavg_ft: finetune_lr must be a finite number > 0 or null (= train.lr), got 0.0"),
    ],
)
def test_bad_hparams_are_rejected(ctx, hparams, message):
    with pytest.raises(ValueError) as error:
        get_algorithm("fedavg_ft")(ctx, **hparams)
    assert str(error.value) == message


def test_state_round_trip_reproduces_fine_tuned_models(ctx):
    algo = get_algorithm("fedavg_ft")(ctx)
    algo.step(1, frozenset(range(4)))
    algo.step(2, frozenset(range(4)))
    clone = get_algorithm("fedavg_ft")(ctx)
    clone.load_state_dict(algo.state_dict())
    assert torch.equal(clone.client_params(), algo.client_params())
    algo.step(3, frozenset({1, 3}))
    clone.step(3, frozenset({1, 3}))
    assert torch.equal(clone.client_params(), algo.client_params())


def test_the_default_is_the_papers_single_pass_at_the_training_rate(ctx):
    """FedEM paper §4: FedAvg+ updates the local model "through a single pass on the local dataset"."""
    default = get_algorithm("fedavg_ft")(ctx)
    single = get_algorithm("fedavg_ft")(ctx, finetune_epochs=1, finetune_lr=ctx.train.lr)
    for algo in (default, single):
        algo.step(*ROUNDS[0])
    assert torch.equal(default.client_params(), single.client_params())


@pytest.mark.parametrize("keep", [False, True])
def test_fine_tuning_keeps_its_own_optimizer_state_between_evaluations_only_when_asked(keep):
    """With ``keep_optimizer_state`` the second evaluation's fine-tuning continues the momentum the first left
    (the FedEM authors' tuned learners, client.py); without, it starts fresh. Training is FedAvg's either way."""
    ctx = replace(make_ctx(), keep_optimizer_state=keep)
    algo, fedavg = get_algorithm("fedavg_ft")(ctx), get_algorithm("fedavg")(ctx)
    algo.step(1, frozenset(range(4)))
    fedavg.step(1, frozenset(range(4)))
    first = ctx.engine.train(algo.global_params(), ctx.train_sets(range(4)), ctx.train, torch_generator(ctx.seed, 1, "finetune"))
    assert torch.equal(algo.client_params(), first.params)
    algo.step(2, frozenset({0, 2}))
    fedavg.step(2, frozenset({0, 2}))
    assert torch.equal(algo.global_params(), fedavg.client_params())
    again = dict(datasets=ctx.train_sets(range(4)), cfg=ctx.train)
    fresh = ctx.engine.train(algo.global_params(), **again, generator=torch_generator(ctx.seed, 2, "finetune"))
    continued = ctx.engine.train(algo.global_params(), **again, generator=torch_generator(ctx.seed, 2, "finetune"),
                                 opt_state=first.opt_state)  # fmt: skip
    assert not torch.allclose(fresh.params, continued.params)
    assert torch.equal(algo.client_params(), continued.params if keep else fresh.params)
    clone = get_algorithm("fedavg_ft")(ctx)
    clone.load_state_dict(algo.state_dict())
    clone.follow(fedavg, 2)  # following the trainer's state leaves the fine-tuning state alone
    algo.step(3, frozenset({1, 3}))
    clone.step(3, frozenset({1, 3}))
    assert torch.equal(clone.client_params(), algo.client_params())
    assert (algo.state_dict()["finetune_optimizer"] is None) is not keep
