"""FedAvg, Local, Oracle and the mixing machinery they share."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wirelessfl.algorithms import ALGORITHMS, get_algorithm
from wirelessfl.algorithms.base import block_mixing, derive_seed
from wirelessfl.learning.lockstep import TrainConfig

#: Training-set sizes of the six clients (groups 0, 0, 1, 1, 2, 2); unequal so that n_j / sum n matters.
SIZES = [8, 24, 12, 20, 6, 16]


@pytest.fixture(scope="module")
def ctx(federation):
    partition = ({"name": "iid"}, {"name": "rotation", "groups": 3})
    return federation(SIZES, partition, 40, TrainConfig(epochs=1, batch_size=8, lr=0.05), seed=1)


def test_block_mixing_by_hand():
    mixing, assignment = block_mixing(np.array([2, 2, 0, 0, 0]), np.array([1.0, 3.0, 1.0, 1.0, 2.0]))
    assert assignment.tolist() == [0, 0, 1, 1, 1]
    expected = [[0.25, 0.75, 0, 0, 0], [0, 0, 0.25, 0.25, 0.5]]
    assert torch.allclose(mixing, torch.tensor(expected, dtype=torch.float64))


def test_registry_names():
    assert {"fedavg", "local", "oracle"} <= set(ALGORITHMS)
    with pytest.raises(ValueError, match=r"unknown algorithm 'nope'; available: .*fedavg"):
        get_algorithm("nope")


def test_unknown_hparam_is_rejected(ctx):
    with pytest.raises(ValueError, match=r"fedavg: unknown parameter\(s\) mu; allowed: none"):
        get_algorithm("fedavg")(ctx, mu=1)


def test_fedavg_plan_is_one_broadcast(ctx):
    plan = get_algorithm("fedavg")(ctx).plan(1)
    assert len(plan.streams) == 1
    assert plan.streams[0].receivers == frozenset(range(6))
    assert dict(plan.uplink) == {i: 1.0 for i in range(6)}
    assert plan.model_params == ctx.arch.param_count


def test_fedavg_aggregate_weights_by_size_over_arrived_only(ctx):
    algo = get_algorithm("fedavg")(ctx)
    algo.mixing = torch.tensor([[1.0, 1.0, 2.0, 0.0, 0.0, 0.0]], dtype=torch.float64) / 4
    uploads = {0: torch.full((ctx.arch.param_count,), 4.0), 2: torch.full((ctx.arch.param_count,), 1.0)}
    new = algo.aggregate(uploads)
    assert torch.allclose(new, torch.full_like(new, (4.0 * 1 + 1.0 * 2) / 3))


def test_fedavg_mixes_uploads_by_sample_count(ctx):
    # Upload of client j: every parameter j + 1. Sizes 8, 24, 12, 20, 6, 16 (86 samples).
    algo = get_algorithm("fedavg")(ctx)
    uploads = {j: torch.full((ctx.arch.param_count,), float(j + 1)) for j in range(6)}
    everyone = algo.aggregate(uploads)
    assert torch.allclose(everyone, torch.full_like(everyone, (8 + 48 + 36 + 80 + 30 + 96) / 86))  # 3.465..., mean: 3.5
    # Only clients 1 and 4 arrive: (24 * 2 + 6 * 5) / 30 = 2.6 (unweighted: 3.5).
    some = algo.aggregate({1: uploads[1], 4: uploads[4]})
    assert torch.allclose(some, torch.full_like(some, 2.6))


def test_oracle_mixes_each_group_by_sample_count(ctx):
    # Groups {0, 1}, {2, 3}, {4, 5}; upload of client j: every parameter j + 1.
    algo = get_algorithm("oracle")(ctx)
    assert algo.assignment.tolist() == [0, 0, 1, 1, 2, 2]
    new = algo.aggregate({j: torch.full((ctx.arch.param_count,), float(j + 1)) for j in range(6)})
    expected = [(8 * 1 + 24 * 2) / 32, (12 * 3 + 20 * 4) / 32, (6 * 5 + 16 * 6) / 22]  # 1.75, 3.625, 5.727...
    assert torch.allclose(new, torch.tensor(expected)[:, None].expand_as(new))


def test_stream_with_no_arrival_keeps_its_model(ctx):
    algo = get_algorithm("oracle")(ctx)
    before = algo.models.clone()
    groups = ctx.data.groups
    only_group0 = [int(i) for i in np.flatnonzero(groups == groups[0])]
    uploads = {i: torch.zeros(ctx.arch.param_count) for i in only_group0}
    new = algo.aggregate(uploads)
    stream0 = algo.assignment[only_group0[0]]
    for c in range(new.shape[0]):
        if c == stream0:
            assert torch.count_nonzero(new[c]) == 0
        else:
            assert torch.equal(new[c], before[c])


def test_fedavg_step_equals_weighted_mean_of_local_training(ctx):
    algo = get_algorithm("fedavg")(ctx)
    start = algo.models.clone()
    algo.step(1, frozenset(range(6)))
    members = np.arange(6)
    trained = ctx.engine.train(
        start.expand(6, -1).clone(), ctx.train_sets(members), ctx.train, algo_generator(ctx, 1)
    ).params
    sizes = torch.as_tensor(ctx.sizes() / ctx.sizes().sum(), dtype=trained.dtype)
    assert torch.allclose(algo.models[0], sizes @ trained, atol=1e-6)


def algo_generator(ctx, round):
    return torch.Generator().manual_seed(derive_seed(ctx.seed, round, "train"))


def test_local_sends_nothing_and_keeps_every_model(ctx):
    algo = get_algorithm("local")(ctx)
    plan = algo.plan(1)
    assert plan.streams == () and plan.uplink_payload == 0.0 and plan.participants == frozenset(range(6))
    algo.step(1, frozenset())
    assert algo.client_params().shape == (6, ctx.arch.param_count)
    assert not torch.equal(algo.client_params()[0], algo.client_params()[1])


def test_local_keeps_no_client_by_client_matrix_and_resumes_old_checkpoints(ctx):
    algo = get_algorithm("local")(ctx)
    algo.step(1, frozenset())
    state = algo.state_dict()
    assert "mixing" not in state
    largest = max(v.numel() for v in state.values() if isinstance(v, torch.Tensor))
    assert largest == 6 * ctx.arch.param_count  # the models; nothing of 6 x 6 beside them
    old = {**state, "mixing": torch.eye(6, dtype=torch.float64)}  # what Local checkpointed before
    clone = get_algorithm("local")(ctx)
    clone.load_state_dict(old)
    assert torch.equal(clone.client_params(), algo.client_params())
    assert clone.mixing.shape == (1, 6)


def test_oracle_streams_follow_true_groups(ctx):
    plan = get_algorithm("oracle")(ctx).plan(1)
    receivers = sorted(sorted(s.receivers) for s in plan.streams)
    groups = ctx.data.groups
    expected = sorted(sorted(int(i) for i in np.flatnonzero(groups == g)) for g in np.unique(groups))
    assert receivers == expected and len(plan.streams) == 3


def test_partial_participation_is_seeded_and_sized(ctx):
    from dataclasses import replace

    algo = get_algorithm("fedavg")(replace(ctx, participation=0.5))
    first = algo.participants(3)
    assert len(first) == 3 and np.array_equal(first, algo.participants(3))
    assert algo.plan(3).participants == frozenset(int(i) for i in first)


def test_state_round_trip_restores_models(ctx):
    algo = get_algorithm("oracle")(ctx)
    algo.step(1, frozenset(range(6)))
    clone = get_algorithm("oracle")(ctx)
    clone.load_state_dict(algo.state_dict())
    assert torch.equal(clone.client_params(), algo.client_params())


def test_split_sets_names_each_split_and_refuses_others(ctx):
    assert [len(y) for _, y in ctx.split_sets("train", [0, 1])] == SIZES[:2]
    for split in ("train", "val", "test"):
        assert ctx.split_sets(split, [2])[0][1] is getattr(ctx.data.clients[2], f"y_{split}")
    with pytest.raises(ValueError, match=r"^split must be 'train', 'val' or 'test', got 'validation'$"):
        ctx.split_sets("validation", [0])
