"""User-centric FL (user-centric-fl.txt eq. 5-7): weights, streams, silhouette, the special round."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from wirelessfl.algorithms.ucfl import (
    choose_streams_by_silhouette,
    collaboration_weights,
    squared_distances,
    stream_mixing,
)


def test_two_clients_by_hand():
    # Delta = 1, sigma = 1: w_12 = e^{-1/2} / (1 + e^{-1/2}).
    w = collaboration_weights(np.array([[0.0], [1.0]]), [1.0, 1.0], [5, 5])
    off = math.exp(-0.5) / (1 + math.exp(-0.5))
    np.testing.assert_allclose(w, [[1 - off, off], [off, 1 - off]], rtol=1e-14)


def test_sizes_and_sigmas_enter_as_in_eq6():
    # n = (1, 3), sigma^2 = (1, 4) -> sigma_1 sigma_2 = 2, Delta = 4.
    w = collaboration_weights(np.array([[0.0, 0.0], [2.0, 0.0]]), [1.0, 4.0], [1, 3])
    a = 3 * math.exp(-4 / (2 * 2))  # row 1: j = 2 relative to j = 1 (weight n_1 e^0 = 1)
    b = 1 * math.exp(-4 / (2 * 2))  # row 2: j = 1 relative to j = 2 (weight n_2 e^0 = 3)
    np.testing.assert_allclose(w[0], [1 / (1 + a), a / (1 + a)], rtol=1e-14)
    np.testing.assert_allclose(w[1], [b / (3 + b), 3 / (3 + b)], rtol=1e-14)


def test_identical_gradients_fall_back_to_fedavg():
    grads = np.tile(np.array([[0.3, -1.2, 4.0]]), (4, 1))
    sizes = np.array([10, 20, 30, 40])
    w = collaboration_weights(grads, [0.5, 1.0, 2.0, 0.1], sizes)
    np.testing.assert_allclose(w, np.tile(sizes / sizes.sum(), (4, 1)), rtol=1e-14)


def test_big_different_client_relies_on_itself():
    grads = np.array([[5.0, 0.0], [0.0, 0.0], [0.0, 0.1], [0.1, 0.0]])
    own = []
    for n0 in (10, 1_000, 100_000):
        w = collaboration_weights(grads, [1.0, 1.0, 1.0, 1.0], [n0, 10, 10, 10])
        others = sum(10 * math.exp(-squared_distances(grads)[0, j] / 2) for j in (1, 2, 3))
        np.testing.assert_allclose(w[0, 0], n0 / (n0 + others), rtol=1e-13)
        own.append(w[0, 0])
    assert own[0] < own[1] < own[2] and own[2] > 1 - 1e-8


def test_weights_are_stable_for_huge_exponents():
    grads = np.array([[0.0], [1e6]])
    w = collaboration_weights(grads, [1e-6, 1e-6], [1, 1])
    np.testing.assert_array_equal(w, np.eye(2))


def test_temperature_divides_the_exponent():
    grads = np.array([[0.0], [2.0]])
    hot = collaboration_weights(grads, [1.0, 1.0], [1, 1], temperature=2.0)
    cold = collaboration_weights(grads * math.sqrt(0.5), [1.0, 1.0], [1, 1])
    np.testing.assert_allclose(hot, cold, rtol=1e-14)


def test_squared_distances_exact():
    g = np.array([[1.0, 2.0], [4.0, 6.0], [1.0, 2.0]])
    np.testing.assert_array_equal(squared_distances(g), [[0, 25, 0], [25, 0, 25], [0, 25, 0]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grads": np.zeros(3)}, r"grads must be a \[m, P\] matrix"),
        ({"sigma2": [1.0, 0.0, 1.0]}, "sigma2 must be positive and finite"),
        ({"sizes": [1, 2]}, r"must have shape \(3,\)"),
        ({"sizes": [1, 0, 2]}, "sizes must be positive and finite"),
        ({"temperature": 0.0}, "temperature must be a positive finite number"),
    ],
)
def test_collaboration_weights_rejects_bad_input(kwargs, message):
    args = {"grads": np.zeros((3, 2)), "sigma2": [1.0, 1.0, 1.0], "sizes": [1, 1, 1]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        collaboration_weights(**args)


def block_weights(groups: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    same = (groups[:, None] == groups[None, :]).astype(float) + noise * rng.random((len(groups), len(groups)))
    return same / same.sum(axis=1, keepdims=True)


def test_one_stream_gives_everybody_the_same_model():
    w = block_weights(np.repeat(np.arange(4), 3), 0.1, np.random.default_rng(0))
    mixing, assignment = stream_mixing(w, 1, seed=0)
    np.testing.assert_array_equal(assignment, np.zeros(12))
    np.testing.assert_allclose(mixing, w.mean(axis=0, keepdims=True) / w.mean(axis=0).sum(), rtol=1e-14)


@pytest.mark.parametrize("k", [6, 7])
def test_k_equal_m_is_per_user_aggregation(k):
    # With k = m (or more) every row is its own stream: eq. 5 exactly.
    w = block_weights(np.repeat(np.arange(2), 3), 0.3, np.random.default_rng(1))
    mixing, assignment = stream_mixing(w, k, seed=0)
    np.testing.assert_array_equal(assignment, np.arange(6))
    np.testing.assert_array_equal(mixing, w)


def test_kmeans_streams_recover_blocks_and_average_rows():
    groups = np.repeat(np.array([2, 0, 1]), 4)
    w = block_weights(groups, 0.05, np.random.default_rng(2))
    mixing, assignment = stream_mixing(w, 3, seed=0)
    np.testing.assert_array_equal(assignment, np.repeat(np.arange(3), 4))
    for c in range(3):
        np.testing.assert_allclose(mixing[c], w[assignment == c].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(mixing.sum(axis=1), 1.0, rtol=1e-14)


def test_stream_mixing_is_seeded():
    w = block_weights(np.repeat(np.arange(3), 5), 2.0, np.random.default_rng(3))
    first = stream_mixing(w, 4, seed=11)
    again = stream_mixing(w, 4, seed=11)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])


def test_silhouette_picks_four_groups():
    w = block_weights(np.repeat(np.arange(4), 5), 0.05, np.random.default_rng(4))
    k, scores = choose_streams_by_silhouette(w, range(2, 9), seed=0)
    assert k == 4
    assert sorted(scores) == list(range(2, 9))
    assert scores[4] == max(scores.values())


def test_silhouette_scores_by_hand():
    # Rows are the points 0, 0, 1, 10, 10 on a line. k = 2: {0, 0, 1} | {10, 10}; s = (b - a) / max(a, b):
    # the 0s: a = 1/2, b = 10 -> 0.95; the 1: a = 1, b = 9 -> 8/9; the 10s: a = 0 -> 1.
    # k = 3: {0, 0} | {1} | {10, 10}: a singleton scores 0, the rest 1 -> 4/5.
    rows = np.zeros((5, 5))
    rows[:, 0] = [0, 0, 1, 10, 10]
    k, scores = choose_streams_by_silhouette(rows, range(2, 4), seed=0)
    assert k == 2
    assert scores == pytest.approx({2: (0.95 + 0.95 + 8 / 9 + 1 + 1) / 5, 3: 0.8}, rel=1e-12)


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
def test_silhouette_ties_go_to_the_smaller_k():
    # Three distinct rows, each twice: k = 3 and k = 4 (k-means finds only the 3 distinct points)
    # both score exactly 1; k = 3 wins.
    rows = np.repeat(np.eye(3), 2, axis=0)
    k, scores = choose_streams_by_silhouette(rows, [4, 3], seed=0)
    assert (k, scores[3], scores[4]) == (3, 1.0, 1.0)


def test_silhouette_range_is_checked():
    w = block_weights(np.repeat(np.arange(2), 2), 0.05, np.random.default_rng(5))
    with pytest.raises(ValueError, match=r"auto_range must lie within \[2, 3\] \(m = 4 clients\)"):
        choose_streams_by_silhouette(w, range(2, 5), seed=0)


def test_stream_mixing_rejects_bad_k():
    with pytest.raises(ValueError, match="ucfl streams must be a positive int, 'm', 'all' or 'auto', got 0"):
        stream_mixing(np.eye(3), 0, seed=0)


def test_torch_inputs_are_accepted():
    grads = torch.tensor([[0.0], [1.0]], dtype=torch.float32)
    w = collaboration_weights(grads, torch.tensor([1.0, 1.0]), torch.tensor([5, 5]))
    assert w.dtype == np.float64


# -- the algorithm on a tiny federation ----------------------------------------------

from dataclasses import replace  # noqa: E402

from wirelessfl.algorithms.base import torch_generator  # noqa: E402
from wirelessfl.algorithms.ucfl import UserCentricFL  # noqa: E402
from wirelessfl.learning.lockstep import TrainConfig, shuffle_schedule  # noqa: E402

EVERYONE = frozenset(range(6))
#: Training-set sizes (groups 0, 0, 0, 1, 1, 1); at least 15 so eq. 7 with n_k = 5 has K = 3 batches everywhere.
SIZES = [15, 30, 20, 25, 18, 30]


@pytest.fixture(scope="module")
def ctx(federation):
    partition = ({"name": "iid"}, {"name": "rotation", "groups": 2})
    return federation(SIZES, partition, 50, TrainConfig(epochs=2, batch_size=8, lr=0.1), seed=5)


def hand_gradients(blocks):
    """``gradient_statistics`` stand-in: clients in block b get gradient 100 * e_b, sigma^2 = 1.

    Eq. 6 then gives exactly FedAvg inside each block (Delta = 0) and 0 across blocks
    (exp(-10^4 / 2) underflows to 0)."""

    def statistics(theta_hat, members, round):
        grads = np.zeros((len(members), 3))
        for r, i in enumerate(members):
            if blocks[i] > 0:
                grads[r, blocks[i] - 1] = 100.0
        return grads, np.ones(len(members))

    return statistics


def test_weight_round_plan_is_one_broadcast_with_gradient_work(ctx):
    algo = UserCentricFL(ctx, streams=2)
    plan = algo.plan(1)
    assert plan.label == "ucfl-weights"
    assert len(plan.streams) == 1 and plan.streams[0].receivers == EVERYONE and plan.streams[0].payload == 1.0
    assert dict(plan.uplink) == {i: 1.0 for i in range(6)}
    for i in range(6):
        n = int(ctx.sizes()[i])
        n_k = max(1, int(0.1 * n))
        k = min(10, n // n_k)
        assert plan.work[i] == pytest.approx((n + k * n_k) / (n * 2), rel=1e-15)


def test_weight_round_computes_eq7_and_eq6(ctx):
    algo = UserCentricFL(ctx, streams="m", sigma_batch_size=5, sigma_batches=3)
    theta_hat = algo.models[0].clone()
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["estimated"] and info.extra["streams"] == 6
    # eq. 7 by plain autograd on one module per client, same batches as the engine.
    sets = ctx.train_sets(range(6))
    schedule = shuffle_schedule([len(y) for _, y in sets], 5, [1.0] * 6, torch_generator(ctx.seed, 1, "ucfl-sigma", 5, 3))
    grads, sigma2 = [], []
    for i, (x, y) in enumerate(sets):
        module = ctx.arch.build_module(theta_hat)

        def gradient(index):
            module.zero_grad()
            torch.nn.functional.cross_entropy(module(ctx.data.normalise(x[index])), y[index]).backward()
            return torch.cat([p.grad.flatten() for p in module.parameters()]).double()

        full = gradient(torch.arange(len(y)))
        batches = torch.stack([gradient(b) for b in schedule[i][:3]])
        grads.append(full)
        sigma2.append(float((batches - full).pow(2).sum(dim=1).mean()))
    np.testing.assert_allclose(algo.sigma2, sigma2, rtol=1e-4)
    expected = collaboration_weights(torch.stack(grads), sigma2, ctx.sizes())
    np.testing.assert_allclose(algo.weights, expected, rtol=1e-3, atol=1e-6)
    # k = m: the mixing is W itself and everybody starts from theta_hat.
    np.testing.assert_array_equal(algo.mixing.numpy(), algo.weights)
    assert torch.equal(algo.models, theta_hat.expand(6, -1))


def test_streams_after_estimation_from_hand_made_gradients(ctx):
    algo = UserCentricFL(ctx, streams=2)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    theta_hat = algo.models[0].clone()
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["streams"] == 2
    assert algo.assignment.tolist() == [0, 0, 0, 1, 1, 1]
    block = [[15 / 65, 30 / 65, 20 / 65, 0, 0, 0], [0, 0, 0, 25 / 73, 18 / 73, 30 / 73]]
    np.testing.assert_allclose(algo.mixing.numpy(), block, rtol=1e-12, atol=1e-300)
    assert torch.equal(algo.models, theta_hat.expand(2, -1))
    # Round 2: both streams still carry theta_hat, which everybody got in round 1: no downlink.
    plan = algo.plan(2)
    assert plan.streams == () and dict(plan.uplink) == {i: 1.0 for i in range(6)}
    assert dict(plan.work) == {i: 1.0 for i in range(6)}
    algo.step(2, EVERYONE)
    # From round 3 on the two stream models differ: one multicast per stream.
    plan = algo.plan(3)
    assert sorted((sorted(s.receivers), s.payload) for s in plan.streams) == [([0, 1, 2], 1.0), ([3, 4, 5], 1.0)]
    # Each stream is the size-weighted average of its own block's uploads (eq. 5 with the block rows).
    uploads = {j: torch.full((ctx.arch.param_count,), float(j + 1)) for j in range(6)}
    mixed = algo.aggregate(uploads)
    expected = [(15 * 1 + 30 * 2 + 20 * 3) / 65, (25 * 4 + 18 * 5 + 30 * 6) / 73]
    torch.testing.assert_close(mixed, torch.tensor(expected)[:, None].expand_as(mixed))


def test_after_estimation_only_clients_without_theta_hat_get_it(ctx):
    algo = UserCentricFL(replace(ctx, participation=0.5), streams="m")
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    first = set(algo.plan(1).participants)
    algo.step(1, frozenset(first))
    plan = algo.plan(2)
    assert [(s.receivers, s.payload, s.label) for s in plan.streams] == [
        (frozenset(plan.participants - first), 1.0, "theta_hat")
    ]
    assert plan.participants - first  # the seeded sample does bring in a client that missed round 1


def test_recompute_with_personal_models_sends_every_stream(ctx):
    algo = UserCentricFL(ctx, streams=2, recompute_every=2)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    for r in (1, 2):
        algo.plan(r)
        algo.step(r, EVERYONE)
    assert algo.is_estimation_round(3)
    algo.step(3, EVERYONE)
    # The new streams start from their members' personalized models (not theta_hat): k multicasts.
    assert sorted(sorted(s.receivers) for s in algo.plan(4).streams) == [[0, 1, 2], [3, 4, 5]]


def test_one_stream_keeps_one_model_for_everybody(ctx):
    algo = UserCentricFL(ctx, streams=1)
    for r in range(1, 4):
        algo.plan(r)
        algo.step(r, EVERYONE)
    assert algo.models.shape[0] == 1 and len(algo.plan(4).streams) == 1
    assert torch.equal(algo.client_params(), algo.models.expand(6, -1))


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
def test_auto_streams_pick_the_three_blocks(ctx):
    # Three gradient blocks: rows of W are identical inside a block, so k = 3 and k = 4 both have
    # silhouette exactly 1 (k = 4 finds only three distinct rows); the tie goes to k = 3.
    algo = UserCentricFL(ctx, streams="auto", auto_range=(2, 4))
    algo.gradient_statistics = hand_gradients([0, 0, 1, 1, 2, 2])
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["silhouette"] == algo.silhouette and sorted(algo.silhouette) == [2, 3, 4]
    assert algo.silhouette[3] == algo.silhouette[4] == 1.0 > algo.silhouette[2]
    assert info.extra["streams"] == 3 and algo.assignment.tolist() == [0, 0, 1, 1, 2, 2]


def test_warmup_rounds_are_fedavg_and_theta_hat_is_their_model(ctx):
    algo = UserCentricFL(ctx, streams="m", warmup_rounds=2)
    for r in range(1, 3):
        plan = algo.plan(r)
        assert plan.label == "ucfl" and len(plan.streams) == 1 and dict(plan.work) == {i: 1.0 for i in range(6)}
        algo.step(r, EVERYONE)
    fedavg_model = algo.models[0].clone()
    assert algo.plan(3).label == "ucfl-weights"
    algo.step(3, EVERYONE)
    torch.testing.assert_close(algo.models, fedavg_model.expand(6, -1), rtol=0, atol=1e-6)


def test_recompute_every_schedules_weight_rounds(ctx):
    algo = UserCentricFL(ctx, warmup_rounds=1, recompute_every=3)
    assert [r for r in range(10) if algo.is_estimation_round(r)] == [2, 5, 8]
    assert [r for r in range(5) if UserCentricFL(ctx).is_estimation_round(r)] == [1]


def test_client_missing_from_weight_round_gets_the_fedavg_row_and_is_never_used(ctx):
    algo = UserCentricFL(ctx, streams="m")
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    algo.plan(1)
    algo.step(1, frozenset(range(5)))
    # Row 5: FedAvg over the five that reported (sizes 15 30 20 25 18, 108 samples); column 5: 0.
    np.testing.assert_allclose(algo.weights[5], [15 / 108, 30 / 108, 20 / 108, 25 / 108, 18 / 108, 0.0], rtol=1e-12)
    assert np.all(algo.weights[:, 5] == 0)
    # With recompute_every = 0 (the default) client 5's uploads enter no stream, ever (documented).
    for r in (2, 3):
        algo.plan(r)
        algo.step(r, EVERYONE)
    assert np.all(algo.mixing.numpy()[:, 5] == 0)
    base = algo.aggregate({j: torch.zeros(ctx.arch.param_count) for j in range(6)})
    huge = algo.aggregate({**{j: torch.zeros(ctx.arch.param_count) for j in range(5)}, 5: torch.full((ctx.arch.param_count,), 1e6)})
    assert torch.equal(base, huge)


def test_same_seed_same_weights_and_state_round_trip(ctx):
    first, second = UserCentricFL(ctx, streams=2), UserCentricFL(ctx, streams=2)
    for algo in (first, second):
        algo.plan(1)
        algo.step(1, EVERYONE)
    np.testing.assert_array_equal(first.weights, second.weights)
    third = UserCentricFL(ctx, streams=2)
    third.load_state_dict(first.state_dict())
    np.testing.assert_array_equal(third.weights, first.weights)
    assert torch.equal(third.models, first.models)
    assert third.plan(2) == first.plan(2) and third.plan(2).streams == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"streams": 0}, "ucfl: streams must be a positive int, 'm', 'all' or 'auto', got 0"),
        ({"streams": "some"}, "ucfl: streams must be a positive int, 'm', 'all' or 'auto', got 'some'"),
        ({"streams": "auto", "auto_range": (2, 6)}, r"ucfl: auto_range must be \(low, high\) with 2 <= low <= high <= 5 \(m = 6 clients\)"),
        ({"sigma_batch_size": 1.5}, r"ucfl: sigma_batch_size must be a fraction in \(0, 1\) of each client's data or a positive int"),
        ({"sigma_batches": 0}, "ucfl: sigma_batches must be a positive int, got 0"),
        ({"warmup_rounds": -1}, "ucfl: warmup_rounds must be an int >= 0, got -1"),
        ({"recompute_every": 0.5}, "ucfl: recompute_every must be an int >= 0, got 0.5"),
        ({"estimation_clients": "all"}, "ucfl: estimation_clients must be 'available' or 'scheduled', got 'all'"),
        ({"temperature": -2.0}, "ucfl: temperature must be a positive finite number, got -2.0"),
        ({"gradient_layers": "conv"}, "ucfl: gradient_layers must be 'all' or 'body'"),
        ({"stream_formation": "kmedoids"}, "ucfl: stream_formation must be one of kmeans_rows, kmeans_offdiag, spectral, agglomerative, got 'kmedoids'"),
        ({"min_stream_size": 0}, "ucfl: min_stream_size must be an int >= 1, got 0"),
        ({"channel_tiers": 1.5}, "ucfl: channel_tiers must be an int >= 1, got 1.5"),
        ({"streams": 2, "channel_tiers": 3}, r"ucfl: channel_tiers must be <= streams \(streams // channel_tiers data clusters\), got channel_tiers=3 with streams=2"),
    ],
)
def test_bad_hparams(ctx, kwargs, message):
    with pytest.raises(ValueError, match=message):
        UserCentricFL(ctx, **kwargs)


# -- stream formation choices and diagnostics ----------------------------------------


@pytest.mark.parametrize("formation", ["kmeans_rows", "kmeans_offdiag", "spectral", "agglomerative"])
def test_estimation_round_reports_stream_sizes_and_assignment(ctx, formation):
    algo = UserCentricFL(ctx, streams=2, stream_formation=formation)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["stream_sizes"] == [3, 3] and info.extra["assignment"] == [0, 0, 0, 1, 1, 1]
    assert "note" not in info.extra


def test_min_stream_size_reaches_the_algorithm(ctx):
    # Blocks {0, 1, 2}, {3, 4}, {5}; k = 3 finds them. Client 5 relies on nobody else (exp(-10^4 / 2) = 0),
    # so the tie between the other two streams goes to the lowest label: {0, 1, 2, 5}, {3, 4}.
    algo = UserCentricFL(ctx, streams=3, min_stream_size=2)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 2])
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["assignment"] == [0, 0, 0, 1, 1, 0] and info.extra["stream_sizes"] == [4, 2]


def test_channel_tiers_split_each_data_stream_by_rate(ctx):
    # Two gradient blocks; clients 1, 2 and 4 have the three lowest rates (tier 0 of 2 tiers: 3 of 6 clients).
    rates = np.array([5e6, 1e6, 2e6, 6e6, 3e6, 7e6])
    algo = UserCentricFL(replace(ctx, downlink_rates=rates), streams=4, channel_tiers=2)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["assignment"] == [0, 1, 1, 2, 3, 2] and info.extra["stream_sizes"] == [2, 2, 1, 1]
    # Each tier stream mixes with the mean of its members' rows: the block's FedAvg row.
    block = [15 / 65, 30 / 65, 20 / 65, 0, 0, 0]
    np.testing.assert_allclose(algo.mixing.numpy()[0], block, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(algo.mixing.numpy()[1], block, rtol=1e-12, atol=1e-300)


def test_channel_tiers_without_a_physical_channel_fall_back_to_data_streams(ctx):
    algo = UserCentricFL(ctx, streams=2, channel_tiers=2)
    algo.gradient_statistics = hand_gradients([0, 0, 0, 1, 1, 1])
    algo.plan(1)
    info = algo.step(1, EVERYONE)
    assert info.extra["assignment"] == [0, 0, 0, 1, 1, 1]
    assert info.extra["note"] == "channel_tiers ignored: no physical channel in this profile, data-only streams"


def test_only_channel_tiers_make_ucfl_channel_aware():
    assert UserCentricFL.uses_channel({"channel_tiers": 2, "streams": 4})
    assert not UserCentricFL.uses_channel({"streams": 4})
    assert not UserCentricFL.uses_channel({"channel_tiers": 1})


def test_a_channel_aware_curve_trains_per_profile_with_the_cells_rates():
    from wirelessfl.config import parse_scenario
    from wirelessfl.network import NetworkModel
    from wirelessfl.run.build import build_units
    from wirelessfl.run.seeds import static_rng

    scenario = parse_scenario({
        "name": "tiny", "rounds": 1, "device": "cpu", "model": {"name": "mlp"},
        "data": {"dataset": "digits", "clients": 6, "samples": {"per_client": 30},
                 "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}]},
        "algorithms": [{"name": "ucfl", "params": {"streams": 2}, "variants": {"channel_tiers": [1, 2]}}],
        "networks": [{"preset": "wired"}, {"name": "cell", "rho": 1.0, "physical": {"fading": "none"}}],
    })
    units = build_units(scenario, 0, torch.device("cpu"))
    keys = sorted(u.key for u in units)
    assert keys == ["seed0__ucfl_channel_tiers_1", "seed0__ucfl_channel_tiers_2__cell", "seed0__ucfl_channel_tiers_2__wired"]
    rates = {u.key: u.algorithm.ctx.downlink_rates for u in units}
    assert rates["seed0__ucfl_channel_tiers_1"] is None and rates["seed0__ucfl_channel_tiers_2__wired"] is None
    cell = next(p for p in scenario.profiles() if p.name == "cell")
    expected = NetworkModel(cell, 6, static_rng(0, cell)).nominal_downlink_rates()
    np.testing.assert_array_equal(rates["seed0__ucfl_channel_tiers_2__cell"], expected)
