"""Clustered FL (Sattler et al. 2021): split rule, bi-partition, short digits runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wirelessfl.algorithms.base import Context
from wirelessfl.algorithms.cfl import ClusteredFL, bipartition, split_criterion
from wirelessfl.learning.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

# Thresholds for digits + MLP at lr 0.1 (update norms ~1); the paper's code uses eps1=0.4, eps2=1.6 on its CNN.
DIGITS_EPS = {"eps1": 0.4, "eps2": 0.9, "min_rounds_before_split": 0}


def test_split_criterion_by_hand():
    updates = np.array([[3.0, 4.0], [-3.0, -4.0], [0.0, 0.0]])
    split, mean_norm, max_norm = split_criterion(updates, [1, 1, 2], eps1=0.1, eps2=1.0)
    assert (split, mean_norm, max_norm) == (True, 0.0, 5.0)
    # sizes weight the mean: (2*(3,4) + (-3,-4)) / 3 has norm 5/3.
    split, mean_norm, _ = split_criterion(updates[:2], [2, 1], eps1=1.0, eps2=1.0)
    assert not split and mean_norm == pytest.approx(5 / 3, rel=1e-15)
    # stationary and small everywhere: nothing to split.
    assert not split_criterion(updates * 0.1, [1, 1, 2], eps1=0.1, eps2=1.0)[0]


def test_bipartition_separates_two_directions():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    rows = [a + 0.1 * rng.normal(size=50) for _ in range(3)] + [b + 0.1 * rng.normal(size=50) for _ in range(4)]
    order = [4, 0, 5, 1, 6, 2, 3]
    labels = bipartition(np.stack([rows[i] for i in order]))
    direction = np.array([i >= 3 for i in order])
    assert labels.tolist() == (direction != direction[0]).astype(int).tolist()


def test_bipartition_needs_two_rows():
    with pytest.raises(ValueError, match="bipartition needs at least 2 updates, got 1"):
        bipartition(np.ones((1, 3)))


def make_ctx(partition, clients=8):
    spec = DataSpec(dataset="digits", num_clients=clients, samples={"per_client": 100}, partition=partition)
    data = build_federated_data(spec, seed=0)
    arch = get_architecture("mlp", data.input_shape, data.num_classes)
    return Context(data, arch, LockstepEngine(arch, "cpu"), TrainConfig(epochs=1, batch_size=16, lr=0.1, momentum=0.9), seed=1)


def run(algo, rounds, arrived=None):
    everyone = frozenset(range(algo.ctx.num_clients))
    infos = []
    for r in range(rounds):
        algo.plan(r)
        infos.append(algo.step(r, everyone if arrived is None else arrived))
    return infos


def same_partition(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all((a[:, None] == a[None, :]) == (b[:, None] == b[None, :])))


def test_splits_two_label_permutation_groups():
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    infos = run(algo, 6)
    assert algo.num_streams == 2
    assert same_partition(algo.assignment, ctx.data.groups)
    plan = algo.plan(6)
    assert sorted(sorted(s.receivers) for s in plan.streams) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    split_round = next(r for r, info in enumerate(infos) if info.extra["clusters"] == 2)
    record = infos[split_round].extra["splits"][0]
    assert record["split"] and record["mean_norm"] < 0.4 and record["max_norm"] > 0.9
    assert same_partition(infos[split_round].extra["assignment"], ctx.data.groups)
    assert ["assignment" in info.extra for info in infos] == [r == split_round for r in range(len(infos))]


def test_never_splits_an_iid_population():
    ctx = make_ctx(({"name": "iid"},))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    infos = run(algo, 8)
    assert all(info.extra["clusters"] == 1 for info in infos)
    assert algo.plan(8).streams[0].receivers == frozenset(range(8))


def test_cluster_with_a_missing_member_is_not_split():
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    run(algo, 6, arrived=frozenset(range(7)))
    assert algo.num_streams == 1


def test_after_a_split_each_half_averages_its_own_members():
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    run(algo, 6)
    start = algo.models.clone()
    trained, _ = algo.local_training(6, np.arange(8))
    algo.step(6, frozenset(range(8)))
    sizes = torch.as_tensor(ctx.sizes(), dtype=trained.dtype)
    for c in range(2):
        idx = torch.as_tensor(np.flatnonzero(algo.assignment == c))
        expected = (sizes[idx] / sizes[idx].sum()) @ trained[idx]
        torch.testing.assert_close(algo.models[c], expected, rtol=1e-5, atol=1e-6)
    assert not torch.equal(start, algo.models)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eps1": -1.0}, "cfl eps1 must be a finite number >= 0, got -1.0"),
        ({"eps2": float("inf")}, "cfl eps2 must be a finite number >= 0, got inf"),
        ({"min_cluster_size": 1}, "cfl min_cluster_size must be an int >= 2, got 1"),
        ({"min_rounds_before_split": 1.5}, "cfl min_rounds_before_split must be an int >= 0, got 1.5"),
    ],
)
def test_bad_hparams(kwargs, message):
    ctx = make_ctx(({"name": "iid"},), clients=3)
    with pytest.raises(ValueError, match=message):
        ClusteredFL(ctx, **kwargs)
