"""FedPer (Arivazhagan et al. 2019): n_j-weighted body averaging, personal heads, FedAvg with no personal layer."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import wirelessfl.algorithms.fedper  # noqa: F401  (registers fedper)
from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, mlp_logits, tiny_data

SIZES = (2, 5, 3, 10)


def make_ctx(hidden=(5,), participation=1.0, train=None) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=hidden)
    train = train or TrainConfig(epochs=2, batch_size=4, lr=0.1, momentum=0.9)
    return Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5, participation=participation)


@pytest.fixture(scope="module")
def ctx():
    return make_ctx()


def test_aggregation_weights_bodies_by_client_size_by_hand(ctx):
    algo = get_algorithm("fedper")(ctx)
    split = algo.split.shared_size
    uploads = {0: torch.full((split,), 1.0), 1: torch.full((split,), 2.0), 3: torch.full((split,), 4.0)}
    body = algo.aggregate(uploads)
    # sizes 2, 5, (3 did not arrive), 10: (2*1 + 5*2 + 10*4) / 17
    assert torch.allclose(body, torch.full((split,), 52 / 17), atol=1e-6)


def test_step_is_local_gradient_step_then_size_weighted_body_mean():
    """Full batch, no momentum, 1 epoch: each member takes psi_i - lr grad l_i(psi_i); body = n_j-mean over arrived."""
    lr = 0.5
    ctx = make_ctx(train=TrainConfig(epochs=1, batch_size=16, lr=lr, momentum=0.0))
    algo = get_algorithm("fedper")(ctx)
    split = algo.split.shared_size
    start = algo.client_params().double()
    trained = []
    for i, c in enumerate(ctx.data.clients):
        flat = start[i].clone().requires_grad_(True)
        grad = torch.autograd.grad(F.cross_entropy(mlp_logits(ctx.arch, flat, c.x_train), c.y_train), flat)[0]
        trained.append(start[i] - lr * grad)
    arrived = frozenset({1, 2, 3})
    expected_body = (5 * trained[1][:split] + 3 * trained[2][:split] + 10 * trained[3][:split]) / 18

    info = algo.step(1, arrived)

    assert info.aggregated == 3
    assert (expected_body - start[0, :split]).abs().max() > 1e-3
    assert torch.allclose(algo.body.double(), expected_body, atol=1e-6, rtol=0)
    # every member keeps its trained head, arrived or not (client 0 missed the deadline)
    for i in range(len(SIZES)):
        assert torch.allclose(algo.heads.full()[i].double(), trained[i][split:], atol=1e-6, rtol=0)
    assert not torch.allclose(algo.heads.full()[0], algo.heads.full()[1])


@pytest.mark.parametrize(("participation", "keep"), [(1.0, False), (0.5, False), (0.5, True)])
def test_no_personal_layer_is_fedavg(participation, keep):
    ctx = replace(make_ctx(participation=participation), keep_optimizer_state=keep)
    fedper = get_algorithm("fedper")(ctx, personal_layers=0)
    fedavg = get_algorithm("fedavg")(ctx)
    plan, reference = fedper.plan(1), fedavg.plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(s.payload, s.receivers) for s in reference.streams]
    assert plan.uplink == reference.uplink and plan.work == reference.work
    for round_, arrived in [(1, frozenset(range(4))), (2, frozenset({0, 3})), (3, frozenset({1, 2, 3}))]:
        fedper.step(round_, arrived)
        fedavg.step(round_, arrived)
        assert torch.allclose(fedper.client_params(), fedavg.client_params(), atol=1e-6, rtol=0)


def test_plan_payload_is_the_body_fraction():
    # mlp 16 -> 6 -> 4 -> 3: P = 102 + 28 + 15 = 145; personal 1 layer: 15, 2 layers: 28 + 15
    ctx = make_ctx(hidden=(6, 4))
    assert ctx.arch.param_count == 145
    for layers, body in [(1, 130), (2, 102), (0, 145)]:
        plan = get_algorithm("fedper")(ctx, personal_layers=layers).plan(1)
        assert plan.streams[0].payload == pytest.approx(body / 145)
        assert dict(plan.uplink) == pytest.approx({i: body / 145 for i in range(4)})
        assert dict(plan.work) == {i: 1.0 for i in range(4)}


def test_partial_participation_plan_and_step_touch_only_the_sample():
    ctx = make_ctx(participation=0.5)
    algo = get_algorithm("fedper")(ctx)
    members = frozenset(int(i) for i in algo.participants(2))
    plan = algo.plan(2)
    assert len(members) == 2 and plan.participants == members and plan.streams[0].receivers == members
    before = algo.heads.full().clone()
    algo.step(2, members)
    for i in range(len(SIZES)):
        assert torch.equal(algo.heads.full()[i], before[i]) == (i not in members)


def test_model_without_body_is_rejected():
    with pytest.raises(ValueError) as error:
        get_algorithm("fedper")(make_ctx(hidden=()))
    assert str(error.value) == (
        "fedper: model 'mlp' has no shared body (its only layer with parameters is the personal head); "
        "it needs at least one hidden layer"
    )


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        (2, "fedper: personal_layers must be < 2 (model 'mlp' has 2 layers with parameters and at least one must be shared), got 2"),
        (-1, "fedper: personal_layers must be an int >= 0, got -1"),
        ("head", "fedper: personal_layers must be an int >= 0, got 'head'"),
    ],
)
def test_bad_personal_layers_are_rejected(ctx, layers, message):
    with pytest.raises(ValueError) as error:
        get_algorithm("fedper")(ctx, personal_layers=layers)
    assert str(error.value) == message


@pytest.mark.parametrize("keep", [False, True])
def test_state_round_trip_continues_identically(keep):
    ctx = replace(make_ctx(), participation=0.5, keep_optimizer_state=keep)
    algo = get_algorithm("fedper")(ctx)
    algo.step(1, frozenset(range(4)))
    clone = get_algorithm("fedper")(ctx)
    clone.load_state_dict(algo.state_dict())
    assert torch.equal(clone.client_params(), algo.client_params())
    algo.step(2, frozenset({0, 1}))
    clone.step(2, frozenset({0, 1}))
    assert torch.equal(clone.client_params(), algo.client_params())


def test_personal_parameters_named_by_path_equal_counting_layers():
    """``personal_params: [3, 5]`` (mlp 16 -> 6 -> 4 -> 3: modules 1, 3, 5) is the last two layers; a step gives the same models."""
    ctx = make_ctx(hidden=(6, 4))
    by_path = get_algorithm("fedper")(ctx, personal_params=["3", "5"])
    by_count = get_algorithm("fedper")(ctx, personal_layers=2)
    assert by_path.plan(1) == by_count.plan(1)
    members = frozenset(range(len(SIZES)))
    by_path.step(1, members)
    by_count.step(1, members)
    assert torch.equal(by_path.client_params(), by_count.client_params())


def test_personal_paths_that_name_nothing_or_everything_are_rejected(ctx):
    with pytest.raises(ValueError, match=r"^fedper: personal_params names no parameters of model 'mlp': fc9 \(its layers: 1, 3\)$"):
        get_algorithm("fedper")(ctx, personal_params=["fc9"])
    with pytest.raises(ValueError, match=r"^fedper: personal_params covers every parameter of model 'mlp'; at least one must be shared$"):
        get_algorithm("fedper")(ctx, personal_params=["1", "3"])
    with pytest.raises(ValueError, match=r"^fedper: personal_params must be a list of parameter paths \(e.g. \[fc2\]\), got '3'$"):
        get_algorithm("fedper")(ctx, personal_params="3")
