"""IFCA with epsilon-greedy choice (adaptive-expert-models.txt eq. 2-3, Algorithms 1-4)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from wirelessfl.algorithms.base import Context
from wirelessfl.algorithms.fedavg import FedAvg
from wirelessfl.algorithms.base import FORWARD_COST
from wirelessfl.algorithms.ifca import IFCA, cluster_mixing, epsilon_greedy_choice
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture


@pytest.fixture(scope="module")
def ctx():
    spec = DataSpec(
        dataset="digits",
        num_clients=6,
        samples={"total": 360, "distribution": "lognormal", "sigma": 1.0},
        partition=({"name": "iid"}, {"name": "label_permutation", "groups": 2}),
    )
    data = build_federated_data(spec, seed=0)
    arch = get_architecture("mlp", data.input_shape, data.num_classes, hidden=(16,))
    train = TrainConfig(epochs=1, batch_size=8, lr=0.05, momentum=0.5)
    return Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), train, seed=2)


def test_fixture_sizes_are_unequal(ctx):
    assert len(np.unique(ctx.sizes())) >= 4


@pytest.mark.parametrize("keep_optimizer_state", [False, True])
def test_one_cluster_equals_fedavg_with_unequal_sizes(ctx, keep_optimizer_state):
    ctx = replace(ctx, keep_optimizer_state=keep_optimizer_state)
    ifca, fedavg = IFCA(ctx, clusters=1), FedAvg(ctx)
    assert torch.equal(ifca.models, fedavg.models)
    arrivals = [frozenset(range(6)), frozenset({0, 1, 3, 5}), frozenset(range(6))]
    for r, arrived in enumerate(arrivals, start=1):
        ifca.step(r, arrived)
        fedavg.step(r, arrived)
        assert torch.allclose(ifca.models, fedavg.models, atol=1e-6, rtol=0)
    assert torch.allclose(ifca.client_params(), fedavg.client_params(), atol=1e-6, rtol=0)


def constant_logit_models(ctx, biases: torch.Tensor) -> torch.Tensor:
    """Cluster k: every weight 0 and output bias ``biases[k]``, so its logits are ``biases[k]`` for every input."""
    models = torch.zeros(biases.shape[0], ctx.arch.param_count)
    bias = ctx.arch.param_slices[-1]
    models[:, bias.offset : bias.stop] = biases
    return models


def test_epsilon_zero_picks_the_lowest_known_loss(ctx):
    biases = 2.0 * torch.randn(3, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    algo = IFCA(ctx, clusters=3, epsilon=0.0)
    algo.models = constant_logit_models(ctx, biases.float())
    # CE of constant logits c on label y is logsumexp(c) - c[y]; mean over the client's training labels
    freq = np.stack([np.bincount(c.y_train.numpy(), minlength=10) / len(c.y_train) for c in ctx.data.clients])
    lse = torch.logsumexp(biases, dim=1).numpy()
    expected_loss = lse[None, :] - freq @ biases.numpy().T
    np.testing.assert_allclose(algo.cluster_losses(np.arange(6)), expected_loss, atol=1e-5)
    ordered = np.sort(expected_loss, axis=1)
    assert np.all(ordered[:, 1] - ordered[:, 0] > 1e-3)  # a clear argmin for every client
    expected_choice = np.argmin(expected_loss, axis=1)
    assert len(np.unique(expected_choice)) >= 2
    algo.step(1, frozenset(range(6)))
    assert algo.assignment.tolist() == expected_choice.tolist()


def test_greedy_choice_by_hand_and_selectable_mask():
    losses = np.array([[3.0, 1.0, 2.0], [0.5, 0.7, 0.1], [1.0, 1.0, 4.0], [np.nan, 2.0, 3.0]])
    rng = np.random.default_rng(0)
    assert epsilon_greedy_choice(losses, np.ones(3, bool), 0.0, rng).tolist() == [1, 2, 0, 1]
    assert epsilon_greedy_choice(losses, np.array([True, False, True]), 0.0, rng).tolist() == [2, 2, 0, 2]


def test_epsilon_one_picks_uniformly_whatever_the_losses():
    rows = 30_000
    losses = np.tile([0.0, 5.0, 9.0], (rows, 1))
    choice = epsilon_greedy_choice(losses, np.ones(3, bool), 1.0, np.random.default_rng(7))
    freq = np.bincount(choice, minlength=3) / rows
    np.testing.assert_allclose(freq, [1 / 3] * 3, atol=0.02)  # sd ~ 0.0027 per class
    choice = epsilon_greedy_choice(losses, np.array([False, True, True]), 1.0, np.random.default_rng(8))
    np.testing.assert_allclose(np.bincount(choice, minlength=3) / rows, [0.0, 0.5, 0.5], atol=0.02)
    # epsilon 0.3: the argmin (0) is kept w.p. 0.7 + 0.3/3 = 0.8
    choice = epsilon_greedy_choice(losses, np.ones(3, bool), 0.3, np.random.default_rng(9))
    assert abs(np.mean(choice == 0) - 0.8) < 0.02


def test_exploration_is_seeded_per_round(ctx):
    algo = IFCA(ctx, clusters=3, epsilon=1.0)
    losses = np.zeros((6, 3))
    first = algo.choose(4, np.arange(6), losses)
    assert np.array_equal(first, algo.choose(4, np.arange(6), losses))
    assert any(not np.array_equal(first, algo.choose(r, np.arange(6), losses)) for r in range(5, 10))


def test_cluster_models_are_size_weighted_means_of_their_choosers(ctx):
    algo = IFCA(ctx, clusters=3)
    before = algo.models.clone()
    n = ctx.sizes()
    members = np.arange(6)
    choice = np.array([0, 0, 1, 1, 0, 0])
    trained = torch.stack([torch.full((ctx.arch.param_count,), float(r + 1)) for r in range(6)])
    algo.finish_round(members, choice, trained, 0.0, None, frozenset({0, 1, 2, 3, 5}))  # client 4 straggles
    cluster0 = (n[0] * 1 + n[1] * 2 + n[5] * 6) / (n[0] + n[1] + n[5])
    cluster1 = (n[2] * 3 + n[3] * 4) / (n[2] + n[3])
    assert torch.allclose(algo.models[0], torch.full_like(algo.models[0], cluster0), atol=1e-5)
    assert torch.allclose(algo.models[1], torch.full_like(algo.models[1], cluster1), atol=1e-5)
    assert torch.equal(algo.models[2], before[2])  # nobody chose cluster 2
    assert algo.assignment.tolist() == choice.tolist()
    assert torch.equal(algo.client_params()[4], algo.models[0])


def test_cluster_mixing_matrix_by_hand():
    mixing = cluster_mixing(np.array([1, -1, 1, 0]), np.array([2.0, 5.0, 3.0, 4.0]), 3)
    expected = [[0, 0, 0, 4.0], [2.0, 0, 3.0, 0], [0, 0, 0, 0]]
    assert torch.equal(mixing, torch.tensor(expected, dtype=torch.float64))


def test_plan_is_one_broadcast_of_all_cluster_models(ctx):
    algo = IFCA(ctx, clusters=3)
    plan = algo.plan(1)
    assert len(plan.streams) == 1
    assert plan.streams[0].payload == 3.0 and plan.streams[0].receivers == frozenset(range(6))
    assert dict(plan.uplink) == {i: 1.0 for i in range(6)}
    assert dict(plan.work) == pytest.approx({i: 1.0 + 3 * FORWARD_COST for i in range(6)})
    assert plan.model_params == ctx.arch.param_count


def test_a_single_participant_still_receives_the_broadcast(ctx):
    algo = IFCA(replace(ctx, participation=1 / 6), clusters=2)
    (member,) = algo.participants(1).tolist()
    plan = algo.plan(1)
    assert [(s.payload, s.receivers) for s in plan.streams] == [(2.0, frozenset({member}))]


def test_partial_participation_plans_and_trains_only_the_sample(ctx):
    algo = IFCA(replace(ctx, participation=0.5), clusters=2, epsilon=1.0)
    members = algo.participants(3)
    assert len(members) == 3
    plan = algo.plan(3)
    assert plan.participants == frozenset(int(i) for i in members)
    assert plan.streams[0].receivers == plan.participants and set(plan.uplink) == plan.participants
    algo.assignment[:] = -7  # not a cluster: shows who chose
    algo.step(3, frozenset(range(6)))
    chose = set(np.flatnonzero(algo.assignment >= 0).tolist())
    assert chose == set(members.tolist())


def test_early_stopping_removes_a_stalled_model_and_shrinks_the_broadcast(ctx):
    algo = IFCA(ctx, clusters=3, early_stopping_patience=2)
    members, everyone = np.arange(6), frozenset(range(6))
    choice = np.array([0, 0, 1, 1, 2, 2])
    epochs = ctx.train.epochs
    work_before = algo.plan(1).work[0]
    expected_before = 1 + 3 * FORWARD_COST / epochs + FORWARD_COST * len(ctx.data.clients[0].y_val) / len(ctx.data.clients[0].y_train)
    assert work_before == pytest.approx(expected_before)
    # cluster 1's validation loss: 1.0 (best), then 1.5 and 1.2 (no new best twice) -> removed
    for round_losses in ([2.0, 2.0, 1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 1.4, 1.6, 2.0, 2.0], [0.5, 0.5, 1.2, 1.2, 1.0, 1.0]):
        removed = algo.early_stopping(members, choice, np.array(round_losses), everyone)
    assert removed == [1]
    assert algo.selectable.tolist() == [True, False, True]
    plan = algo.plan(4)
    assert len(plan.streams) == 1 and plan.streams[0].payload == 2.0
    assert plan.work[0] == pytest.approx(expected_before - FORWARD_COST / epochs)
    frozen = algo.models[1].clone()
    algo.step(4, everyone)
    assert 1 not in algo.assignment.tolist()
    assert torch.equal(algo.models[1], frozen)


def test_an_equal_validation_loss_is_not_a_new_best(ctx):
    algo = IFCA(ctx, clusters=2, early_stopping_patience=1)
    members, choice, everyone = np.arange(6), np.zeros(6, dtype=np.int64), frozenset(range(6))
    assert algo.early_stopping(members, choice, np.full(6, 1.0), everyone) == []
    assert algo.early_stopping(members, choice, np.full(6, 1.0), everyone) == [0]


def test_a_straggler_does_not_report_validation_loss(ctx):
    algo = IFCA(ctx, clusters=2, early_stopping_patience=1)
    members, choice = np.arange(6), np.zeros(6, dtype=np.int64)
    algo.early_stopping(members, choice, np.full(6, 1.0), frozenset(range(6)))
    removed = algo.early_stopping(members, choice, np.array([2.0, 0.1, 2.0, 2.0, 2.0, 2.0]), frozenset({1}))
    assert removed == [] and algo.best_val_loss[0] == pytest.approx(0.1)


def test_all_models_removed_means_the_federation_stopped(ctx):
    algo = IFCA(ctx, clusters=2, early_stopping_patience=1)
    algo.selectable[:] = False
    plan = algo.plan(5)
    assert plan.streams == () and plan.uplink_payload == 0.0 and dict(plan.work) == {i: 0.0 for i in range(6)}
    before = algo.models.clone()
    info = algo.step(5, frozenset(range(6)))
    assert info.aggregated == 0 and info.extra == {"stopped": True}
    assert torch.equal(algo.models, before)


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"clusters": 0}, "ifca: clusters must be an int >= 1, got 0"),
        ({"clusters": 7}, "ifca: clusters must be an int in [1, 6] (the number of clients), got 7"),
        ({"clusters": 2.0}, "ifca: clusters must be an int >= 1, got 2.0"),
        ({"epsilon": 1.5}, "ifca: epsilon must be a number in [0, 1], got 1.5"),
        ({"epsilon": -0.1}, "ifca: epsilon must be a number in [0, 1], got -0.1"),
        ({"early_stopping_patience": -1}, "ifca: early_stopping_patience must be an int >= 0, got -1"),
    ],
)
def test_bad_parameters_are_one_line_errors(ctx, hparams, message):
    with pytest.raises(ValueError) as info:
        IFCA(ctx, **hparams)
    assert str(info.value) == message


def test_one_cluster_per_client_is_allowed(ctx):
    assert IFCA(ctx, clusters=6).models.shape == (6, ctx.arch.param_count)


def test_state_round_trip_continues_identically(ctx):
    algo = IFCA(ctx, clusters=2, epsilon=0.5, early_stopping_patience=3)
    algo.step(1, frozenset(range(6)))
    clone = IFCA(ctx, clusters=2, epsilon=0.5, early_stopping_patience=3)
    clone.load_state_dict(algo.state_dict())
    for a in (algo, clone):
        a.step(2, frozenset({0, 2, 3, 4}))
    assert torch.equal(clone.models, algo.models)
    assert np.array_equal(clone.assignment, algo.assignment)
    assert np.array_equal(clone.best_val_loss, algo.best_val_loss)
    assert np.array_equal(clone.stale_rounds, algo.stale_rounds)


def test_defaults_are_plain_ifca():
    """epsilon 0 is Ghosh et al.'s IFCA (the epsilon-greedy variant is opt-in); early stopping is off."""
    assert IFCA.hparams == {"clusters": 3, "epsilon": 0.0, "early_stopping_patience": 0}


@pytest.mark.parametrize("patience", [0, 2])
def test_step_measures_the_chosen_models_validation_loss_only_with_early_stopping(ctx, patience):
    """Alg. 1 l. 11-12 through ``step``: the mean validation loss of each model's arrived choosers, before training."""
    algo = IFCA(ctx, clusters=2, early_stopping_patience=patience)
    members, arrived = np.arange(6), frozenset({0, 1, 3, 4, 5})  # client 2 straggles
    before = algo.models.clone()
    choice = algo.choose(1, members, algo.cluster_losses(members))
    val = ctx.engine.evaluate(before[torch.as_tensor(choice)], ctx.val_sets(members)).loss.double().numpy()

    algo.step(1, arrived)

    assert algo.assignment.tolist() == choice.tolist()
    if not patience:
        assert algo.best_val_loss.tolist() == [np.inf, np.inf]
        return
    reported = np.array([i in arrived for i in members])
    expected = [float(val[reported & (choice == j)].mean()) if (reported & (choice == j)).any() else np.inf for j in range(2)]
    assert np.isfinite(expected).any()
    np.testing.assert_allclose(algo.best_val_loss, expected, rtol=1e-12, atol=0)
    assert algo.stale_rounds.tolist() == [0, 0]


def test_work_divides_the_evaluation_passes_by_the_local_epochs(ctx):
    """Work 1 = one local round of E epochs: J loss passes and the validation pass are F/E each (E = 3 here)."""
    ctx = replace(ctx, train=replace(ctx.train, epochs=3))
    plain, stopping = IFCA(ctx, clusters=3), IFCA(ctx, clusters=3, early_stopping_patience=2)
    for i, client in enumerate(ctx.data.clients):
        assert plain.plan(1).work[i] == pytest.approx(1 + 3 * FORWARD_COST / 3, rel=1e-12)
        val_pass = FORWARD_COST * len(client.y_val) / (len(client.y_train) * 3)
        assert stopping.plan(1).work[i] == pytest.approx(1 + 3 * FORWARD_COST / 3 + val_pass, rel=1e-12)
