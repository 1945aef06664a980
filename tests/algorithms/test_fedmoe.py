"""FedMoE (adaptive-expert-models.txt eq. 5, Algorithms 1-4, Table 1): IFCA federation + per-client gated experts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from wirelessfl.algorithms.base import Context
from wirelessfl.algorithms.base import FORWARD_COST, torch_generator
from wirelessfl.algorithms.fedmoe import FedMoE
from wirelessfl.algorithms.ifca import IFCA
from wirelessfl.learning import optim
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.gating import train_gates
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

FAST = {"local_lr": 0.01, "gate_lr": 0.01}


@pytest.fixture(scope="module")
def ctx():
    spec = DataSpec(
        dataset="digits",
        num_clients=6,
        samples={"total": 300, "distribution": "lognormal", "sigma": 0.8},
        partition=({"name": "iid"}, {"name": "label_permutation", "groups": 2}),
    )
    data = build_federated_data(spec, seed=1)
    arch = get_architecture("mlp", data.input_shape, data.num_classes, hidden=(16,))
    train = TrainConfig(epochs=2, batch_size=8, lr=0.05, momentum=0.5)
    return Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), train, seed=4)


def test_defaults_are_table_1(ctx):
    algo = FedMoE(ctx)
    assert algo.params.epsilon == 0.33
    assert (algo.local_cfg.optimizer, algo.local_cfg.lr, algo.local_cfg.weight_decay) == ("adamw", 2.69e-4, 9.89e-3)
    assert (algo.gate_cfg.optimizer, algo.gate_cfg.lr, algo.gate_cfg.weight_decay) == ("adamw", 3e-6, 6.88e-4)
    assert algo.gate.experts == 4 and algo.gate.hidden == 8 and algo.gate.input_dim == 64


def test_plan_is_ifcas_traffic_with_the_on_device_work_added(ctx):
    algo = FedMoE(ctx, clusters=3)
    plan = algo.plan(1)
    assert len(plan.streams) == 1 and plan.streams[0].payload == 3.0 and plan.streams[0].receivers == frozenset(range(6))
    assert dict(plan.uplink) == {i: 1.0 for i in range(6)}
    E = ctx.train.epochs
    gate_share = algo.gate.param_count / ctx.arch.param_count
    expected = 1 + FORWARD_COST * 4 / E + 1 / E + gate_share / E
    assert dict(plan.work) == pytest.approx({i: expected for i in range(6)})


def test_work_with_early_stopping_divides_the_validation_pass_by_the_local_epochs(ctx):
    """The early-stopping validation pass is F n_val / (n_train E), like the other passes (E = 2 here)."""
    algo = FedMoE(ctx, clusters=3, early_stopping_patience=2)
    E = ctx.train.epochs
    assert E == 2
    base = 1 + FORWARD_COST * 4 / E + 1 / E + algo.gate.param_count / ctx.arch.param_count / E
    plan = algo.plan(1)
    for i, client in enumerate(ctx.data.clients):
        assert plan.work[i] == pytest.approx(base + FORWARD_COST * len(client.y_val) / (len(client.y_train) * E), rel=1e-12)


def test_federation_is_exactly_ifca(ctx):
    moe, ifca = FedMoE(ctx, clusters=2, epsilon=0.33, **FAST), IFCA(ctx, clusters=2, epsilon=0.33)
    for r, arrived in enumerate([frozenset(range(6)), frozenset({0, 2, 3, 5})], start=1):
        moe.step(r, arrived)
        ifca.step(r, arrived)
        assert np.array_equal(moe.assignment, ifca.assignment)
        assert torch.allclose(moe.models, ifca.models, atol=1e-6, rtol=0)
    assert torch.equal(moe.client_params(), moe.models[torch.as_tensor(moe.assignment)])
    assert moe.client_params().shape == (6, ctx.arch.param_count)


def one_hot_gate(algo: FedMoE, expert: int) -> None:
    """Every gate ignores x and puts all its weight on ``expert``."""
    algo.gates.zero_()
    algo.gates[:, algo.gate.param_count - algo.gate.experts + expert] = 60.0


def test_evaluate_is_the_gated_mixture(ctx):
    algo = FedMoE(ctx, clusters=2, **FAST)
    algo.step(1, frozenset(range(6)))
    clients = np.arange(6)
    tests = ctx.test_sets(clients)
    one_hot_gate(algo, 2)  # the local expert alone
    expected = ctx.engine.evaluate(algo.local, tests)
    result = algo.evaluate("test")
    torch.testing.assert_close(result.loss, expected.loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(result.accuracy, expected.accuracy)
    one_hot_gate(algo, 1)  # cluster model 1 alone
    expected = ctx.engine.evaluate(algo.models[[1] * 6], tests)
    torch.testing.assert_close(algo.evaluate("test").loss, expected.loss, atol=1e-5, rtol=0)
    # equal weights on all three experts: p = mean of the three softmax outputs
    algo.gates.zero_()
    val = ctx.val_sets(clients)
    probs = [
        [torch.softmax(z, -1) for z in ctx.engine.logits(slots, val)]
        for slots in (algo.models[[0] * 6], algo.models[[1] * 6], algo.local)
    ]
    result = algo.evaluate("val")
    for i, (_, y) in enumerate(val):
        mix = (probs[0][i] + probs[1][i] + probs[2][i]) / 3
        nll = -torch.log(mix[torch.arange(len(y)), y]).mean()
        assert result.loss[i].item() == pytest.approx(nll.item(), abs=1e-5)
        assert result.accuracy[i].item() == pytest.approx((mix.argmax(1) == y).float().mean().item())


def test_only_participants_train_their_local_expert_and_gate(ctx):
    algo = FedMoE(replace(ctx, participation=0.5), clusters=2, **FAST)
    members = algo.participants(2)
    plan = algo.plan(2)
    assert plan.participants == frozenset(int(i) for i in members) and plan.streams[0].receivers == plan.participants
    local, gates = algo.local.clone(), algo.gates.clone()
    algo.step(2, frozenset(range(6)))
    moved_local = {i for i in range(6) if not torch.equal(algo.local[i], local[i])}
    moved_gate = {i for i in range(6) if not torch.equal(algo.gates[i], gates[i])}
    assert moved_local == moved_gate == set(members.tolist())


def test_removed_model_is_delivered_once_more_then_leaves_the_broadcast(ctx):
    algo = FedMoE(ctx, clusters=3, early_stopping_patience=50, **FAST)  # removal by hand below
    algo.step(1, frozenset(range(6)))
    algo.selectable[1] = False
    algo.held[:, 1] = False  # as after a round in which cluster 1 was updated and then removed
    algo.held[0, 1] = True
    plan = algo.plan(2)
    payloads = {s.label: (s.payload, s.receivers) for s in plan.streams}
    assert payloads == {"cluster-models": (2.0, frozenset(range(6))), "final-cluster-1": (1.0, frozenset(range(1, 6)))}
    algo.step(2, frozenset(range(6)))
    assert [s.label for s in algo.plan(3).streams] == ["cluster-models"]


@pytest.mark.parametrize("split", ["train", "val"])
def test_gate_learns_from_the_split_it_is_given(ctx, split):
    """Round 2's gates are AdamW on ``gate_split``'s samples against the round's frozen experts: the received
    cluster models and the local expert just trained, continuing each gate's optimizer state."""
    algo = FedMoE(ctx, clusters=2, gate_split=split, **FAST)
    everyone, members = frozenset(range(6)), np.arange(6)
    algo.step(1, everyone)
    models, gates = algo.models.clone(), algo.gates.clone()
    gate_opt = optim.map_state(torch.clone, algo.gate_opt)

    algo.step(2, everyone)

    sets = ctx.train_sets(members) if split == "train" else ctx.val_sets(members)
    local = ctx.engine.logits(algo.local, sets)  # the experts trained this round, before the gates
    experts = [torch.cat([c, z.unsqueeze(1)], dim=1) for c, z in zip(algo.expert_logits(models, members, sets), local)]
    expected = train_gates(
        algo.gate, gates, [ctx.data.normalise(x) for x, _ in sets], experts, [y for _, y in sets], algo.gate_cfg,
        torch_generator(ctx.seed, 2, "gate"), epochs=[1.0] * 6, opt_state=gate_opt,
    )
    torch.testing.assert_close(algo.gates, expected.params, atol=0, rtol=0)


def test_held_tracks_who_has_each_models_current_version(ctx):
    """Client i holds model j's current version iff it last received the models in a round after j last changed
    (j changes when a chooser's upload arrives); a removed model is re-sent to exactly the participants lacking it."""
    algo = FedMoE(replace(ctx, participation=0.5), clusters=3, epsilon=1.0, **FAST)
    received, changed = np.zeros(6, dtype=np.int64), np.zeros(3, dtype=np.int64)
    for round_ in (1, 2, 3):
        members = algo.participants(round_).tolist()
        arrived = frozenset(members[1:])  # the first participant straggles
        algo.step(round_, arrived)
        received[members] = round_
        changed[sorted({int(algo.assignment[i]) for i in arrived})] = round_
        assert algo.held.tolist() == (received[:, None] > changed[None, :]).tolist()
    assert 0 < algo.held.sum() < algo.held.size
    algo.selectable[:] = [True, False, False]  # models 1 and 2 removed: their final versions are sent once more
    members = algo.participants(4).tolist()
    lacking = {f"final-cluster-{j}": frozenset(i for i in members if received[i] <= changed[j]) for j in (1, 2)}
    streams = {s.label: s.receivers for s in algo.plan(4).streams}
    assert streams == {"cluster-models": frozenset(members), **{k: v for k, v in lacking.items() if v}}


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"clusters": 7}, "fedmoe: clusters must be an int in [1, 6] (the number of clients), got 7"),
        ({"epsilon": 2}, "fedmoe: epsilon must be a number in [0, 1], got 2"),
        ({"local_lr": 0.0}, "fedmoe: local_lr must be a finite number > 0, got 0.0"),
        ({"gate_weight_decay": -1.0}, "fedmoe: gate_weight_decay must be a finite number >= 0, got -1.0"),
        ({"gate_hidden": 0}, "fedmoe: gate_hidden must be an int >= 1, got 0"),
        ({"local_epochs": 1.5}, "fedmoe: local_epochs must be an int >= 0, got 1.5"),
        ({"local_lr": True}, "fedmoe: local_lr must be a finite number > 0, got True"),
        ({"gate_lr": float("inf")}, "fedmoe: gate_lr must be a finite number > 0, got inf"),
    ],
)
def test_bad_parameters_are_one_line_errors(ctx, hparams, message):
    with pytest.raises(ValueError) as info:
        FedMoE(ctx, **hparams)
    assert str(info.value) == message


def test_boundary_parameters_are_accepted(ctx):
    """No local-expert or gate epochs, one hidden unit and no weight decay are valid settings."""
    algo = FedMoE(ctx, local_epochs=0, gate_epochs=0, gate_hidden=1, local_weight_decay=0.0, gate_weight_decay=0.0)
    assert algo.gate.hidden == 1 and algo.local_cfg.weight_decay == 0.0 and algo.gate_cfg.weight_decay == 0.0


def test_stopped_federation_still_trains_experts_and_gates_but_not_a_cluster_model(ctx):
    """Every model removed: no cluster model is trained or uploaded (work loses its 1), the on-device models go on."""
    algo = FedMoE(ctx, clusters=2, early_stopping_patience=1, **FAST)
    algo.selectable[:] = False
    E = ctx.train.epochs
    expected = FORWARD_COST * 3 / E + 1 / E + algo.gate.param_count / ctx.arch.param_count / E
    assert dict(algo.plan(1).work) == pytest.approx({i: expected for i in range(6)}, rel=1e-12)
    models, local = algo.models.clone(), algo.local.clone()
    info = algo.step(1, frozenset(range(6)))
    assert info.aggregated == 0 and info.extra["stopped"] is True and np.isnan(info.train_loss)
    assert torch.equal(algo.models, models) and not torch.equal(algo.local, local)


def test_state_round_trip_continues_identically(ctx):
    algo = FedMoE(ctx, clusters=2, **FAST)
    algo.step(1, frozenset(range(6)))
    clone = FedMoE(ctx, clusters=2, **FAST)
    clone.load_state_dict(algo.state_dict())
    for a in (algo, clone):
        a.step(2, frozenset({1, 2, 4}))
    for key in ("models", "local", "gates"):
        assert torch.equal(getattr(clone, key), getattr(algo, key)), key
    assert np.array_equal(clone.held, algo.held)
    torch.testing.assert_close(clone.evaluate("val").loss, algo.evaluate("val").loss, atol=0, rtol=0)
