"""FedFomo (fedfomo.txt eq. 3-5): weights by hand, epsilon-greedy downloads, plan cost, short runs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from dataclasses import replace

from wirelessfl.algorithms.base import FORWARD_COST
from wirelessfl.algorithms.fedfomo import FedFomo, current_epsilon, epsilon_greedy_pick, fomo_weights
from wirelessfl.learning.lockstep import EvalResult, TrainConfig

#: Training-set sizes (groups 0, 0, 0, 1, 1, 1); unequal, so the work of each client differs.
SIZES = [36, 12, 24, 30, 18, 36]


def test_weights_three_clients_by_hand():
    # L_i(theta_i^{t-1}) = 2; candidates: loss 1 at distance 2, loss 1.5 at 0.5, loss 2.5 at 1.
    raw, weights = fomo_weights(2.0, [1.0, 1.5, 2.5], [2.0, 0.5, 1.0])
    np.testing.assert_array_equal(raw, [0.5, 1.0, -0.5])
    np.testing.assert_allclose(weights, [1 / 3, 2 / 3, 0.0], rtol=1e-15)


def test_all_negative_weights_mean_keep_the_old_model():
    raw, weights = fomo_weights(1.0, [1.5, 3.0], [1.0, 2.0])
    np.testing.assert_array_equal(raw, [-0.5, -1.0])
    np.testing.assert_array_equal(weights, [0.0, 0.0])


def test_candidate_at_zero_distance_gets_no_weight():
    raw, weights = fomo_weights(1.0, [0.5, 0.5], [0.0, 1.0])
    np.testing.assert_array_equal(raw, [0.0, 0.5])
    np.testing.assert_array_equal(weights, [0.0, 1.0])


def test_fomo_weights_rejects_bad_input():
    with pytest.raises(ValueError, match=r"losses and distances must have the same shape, got \(2,\) and \(1,\)"):
        fomo_weights(1.0, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match=r"distances must be >= 0, got \[-1.0\]"):
        fomo_weights(1.0, [1.0], [-1.0])


def test_epsilon_decays_linearly_to_zero():
    # Round t (from 1) is the authors' epoch t - 1: epsilon - (t - 1) * decay; the first download is in round 2.
    assert [current_epsilon(0.3, 0.05, t) for t in (1, 2, 3, 7, 10)] == pytest.approx([0.3, 0.25, 0.2, 0.0, 0.0], abs=1e-15)


def test_greedy_pick_takes_top_affinity_and_random_with_epsilon_one():
    affinity = np.array([9.0, 0.1, 5.0, 0.3, 7.0])
    available = np.array([1, 2, 3, 4])
    assert epsilon_greedy_pick(affinity, available, 2, 0.0, np.random.default_rng(0)) == [4, 2]
    assert epsilon_greedy_pick(affinity, available, 9, 0.0, np.random.default_rng(0)) == [4, 2, 3, 1]
    picks = {tuple(sorted(epsilon_greedy_pick(affinity, available, 2, 1.0, np.random.default_rng(s)))) for s in range(40)}
    assert len(picks) == 6  # every pair of the 4 available models shows up


@pytest.fixture(scope="module")
def ctx(federation):
    partition = ({"name": "iid"}, {"name": "label_permutation", "groups": 2})
    return federation(SIZES, partition, 60, TrainConfig(epochs=2, batch_size=8, lr=0.1, momentum=0.9), seed=3)


def test_first_round_is_one_broadcast_then_m_unicasts_per_client(ctx):
    algo = FedFomo(ctx, models_per_client=2)
    first = algo.plan(1)
    assert len(first.streams) == 1 and first.streams[0].receivers == frozenset(range(6))
    assert dict(first.work) == {i: 1.0 for i in range(6)}
    algo.step(1, frozenset(range(6)))
    plan = algo.plan(2)
    assert len(plan.streams) == 2 * 6
    assert all(len(s.receivers) == 1 and s.payload == 1.0 for s in plan.streams)
    assert dict(plan.uplink) == {i: 1.0 for i in range(6)}
    for i in range(6):
        client = ctx.data.clients[i]
        expected = 1.0 + FORWARD_COST * 4 * len(client.y_val) / (len(client.y_train) * 2)
        assert plan.work[i] == pytest.approx(expected, rel=1e-15)
        own = [s for s in plan.streams if s.receivers == frozenset({i})]
        assert len(own) == 2 and all(f"-to-{i}" in s.label and f"model-{i}-" not in s.label for s in own)


class QuadraticLoss:
    """``engine.evaluate`` stand-in: the validation loss of every model is (x - 1.5)^2 + |rest|^2, x = theta[0]."""

    def __init__(self, normalisation=None):
        self.sets = []
        self.normalisation = normalisation  # the data's: a Context checks its engine normalises as the data needs

    def evaluate(self, params, sets):
        self.sets.append(sets)
        loss = (params[:, 0].double() - 1.5) ** 2 + params[:, 1:].double().pow(2).sum(dim=1)
        return EvalResult(accuracy=torch.zeros(len(params)), loss=loss, count=torch.ones(len(params), dtype=torch.int64))

    def phase(self, label):
        return contextlib.nullcontext()


def on_axis(algo, tensor, values):
    """Set row i of ``tensor`` to values[i] * e_0."""
    for i, x in values.items():
        tensor[i] = 0.0
        tensor[i, 0] = x


def test_federated_update_by_hand(ctx):
    algo = FedFomo(ctx, models_per_client=2)
    engine = QuadraticLoss(ctx.data.normalisation)
    algo.ctx = replace(ctx, engine=engine)
    # Client 0: baseline x = 0 (loss 2.25), own trained x = 1 (loss 0.25, distance 1): w = 2;
    # download from 1 at x = 2 (loss 0.25, distance 2): w = 1; from 2 at x = -1 (loss 6.25, distance 1): w = -4.
    # w* = (2/3, 1/3, 0): theta_0 = 2/3 * 1 + 1/3 * 2 = 4/3.
    # Client 3: baseline x = 1.5 (loss 0) is the optimum; own x = 2 and download from 4 at x = 1 both
    # have loss 0.25 at distance 0.5: w = -0.5 each, so client 3 keeps x = 1.5.
    on_axis(algo, algo.base, {0: 0.0, 3: 1.5})
    on_axis(algo, algo.current, {0: 1.0, 3: 2.0})
    on_axis(algo, algo.server, {1: 2.0, 2: -1.0, 4: 1.0})
    moved = algo.federate({0: [1, 2], 3: [4]})
    assert moved == 1
    assert algo.base[0, 0].item() == pytest.approx(4 / 3, rel=1e-6) and torch.count_nonzero(algo.base[0, 1:]) == 0
    assert algo.base[3, 0].item() == 1.5 and torch.count_nonzero(algo.base[3, 1:]) == 0
    # Affinities grow by the raw weights (P starts as the identity).
    assert algo.affinity[0].tolist() == pytest.approx([1.0, 1.0, -4.0, 0.0, 0.0, 0.0])
    assert algo.affinity[3].tolist() == pytest.approx([0.0, 0.0, 0.0, 1.0, -0.5, 0.0])
    # One evaluate call, on each owner's validation split: baseline, own model, downloads.
    (sets,) = engine.sets
    owners = [0, 0, 0, 0, 3, 3, 3]
    assert [y is ctx.data.clients[i].y_val for (_, y), i in zip(sets, owners)] == [True] * 7


def test_same_seed_same_run_and_affinity_finds_groups(ctx):
    runs = []
    for _ in range(2):
        algo = FedFomo(ctx, models_per_client=2, epsilon=0.3)
        for r in range(1, 6):
            algo.plan(r)
            algo.step(r, frozenset(range(6)))
        runs.append(algo)
    assert torch.equal(runs[0].current, runs[1].current)
    np.testing.assert_array_equal(runs[0].affinity, runs[1].affinity)
    groups = ctx.data.groups
    same = (groups[:, None] == groups[None, :]) & ~np.eye(6, dtype=bool)
    other = groups[:, None] != groups[None, :]
    assert runs[0].affinity[same].mean() > runs[0].affinity[other].mean()


def test_a_straggler_upload_is_not_offered(ctx):
    algo = FedFomo(ctx, models_per_client=5)
    algo.plan(1)
    algo.step(1, frozenset(range(5)))
    chosen = algo.selection(1)
    assert all(5 not in peers for peers in chosen.values())
    assert sorted(chosen[5]) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models_per_client": 0}, "fedfomo: models_per_client must be an int >= 1, got 0"),
        ({"epsilon": 1.5}, r"fedfomo: epsilon must be a number in \[0, 1\], got 1.5"),
        ({"epsilon_decay": -0.1}, r"fedfomo: epsilon_decay must be a number in \[0, 1\], got -0.1"),
    ],
)
def test_bad_hparams(ctx, kwargs, message):
    with pytest.raises(ValueError, match=message):
        FedFomo(ctx, **kwargs)
