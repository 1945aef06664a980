"""Clustered FL (Sattler et al. 2021): split rule, bi-partition, short digits runs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from wirelessfl.algorithms.cfl import ClusteredFL, bipartition, split_criterion
from wirelessfl.learning.lockstep import TrainConfig

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
    direction = np.array([i >= 3 for i in order])
    for linkage in ("single", "complete"):
        labels = bipartition(np.stack([rows[i] for i in order]), linkage)
        assert labels.tolist() == (direction != direction[0]).astype(int).tolist()


# Nine update directions on a circle: a chain 0, 25, ..., 175 degrees and one more at 230 degrees.
# Any bi-partition cuts the circle at two gaps; the gaps are 25 (x7), 55 (175 -> 230) and 130
# (230 -> 360). Algorithm 1's argmin of the largest cross similarity cuts 130 and 55: {230} alone,
# cross similarity cos 55 = 0.574. Complete linkage (the demo) cuts the chain between 100 and 125
# (and the 130 gap): cross similarity cos 25 = 0.906.
CIRCLE = np.radians([0, 25, 50, 75, 100, 125, 150, 175, 230])


def circle_updates(scale=1.0):
    return scale * np.stack([np.cos(CIRCLE), np.sin(CIRCLE)], axis=1)


def cross_similarity(updates, labels):
    u = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    return (u[labels == 0] @ u[labels == 1].T).max()


def test_default_bipartition_is_algorithm_1s_minimax_split():
    labels = bipartition(circle_updates())
    assert labels.tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert cross_similarity(circle_updates(), labels) == pytest.approx(np.cos(np.radians(55)), abs=1e-12)


def test_complete_linkage_is_the_demo_codes_split():
    labels = bipartition(circle_updates(), "complete")
    assert labels.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert cross_similarity(circle_updates(), labels) == pytest.approx(np.cos(np.radians(25)), abs=1e-12)


def test_bipartition_ignores_update_lengths_and_row_order():
    # Cosine similarity only: scaling rows changes nothing; label 0 always holds the first row.
    scaled = circle_updates() * np.array([1, 3, 0.5, 2, 7, 1, 4, 0.2, 9])[:, None]
    assert bipartition(scaled).tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1]
    order = [8, 3, 0, 7, 5, 1, 6, 2, 4]
    assert bipartition(circle_updates()[order]).tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("seed", range(4))
def test_single_linkage_split_minimises_the_largest_cross_similarity(seed):
    # Exhaustive check of Algorithm 1's argmin over all 2^6 - 1 bi-partitions of 7 random updates.
    updates = np.random.default_rng(seed).normal(size=(7, 5))
    best = min(
        cross_similarity(updates, np.array((0,) + bits))
        for bits in itertools.product((0, 1), repeat=6)
        if any(bits)
    )
    assert cross_similarity(updates, bipartition(updates)) == pytest.approx(best, abs=1e-12)


def test_bipartition_needs_two_rows_and_a_known_linkage():
    with pytest.raises(ValueError, match="bipartition needs at least 2 updates, got 1"):
        bipartition(np.ones((1, 3)))
    message = r"cfl linkage must be 'single' \(Sattler et al., Algorithm 1\) or 'complete' \(the authors' demo code\), got 'ward'"
    with pytest.raises(ValueError, match=message):
        bipartition(np.eye(3), "ward")


#: Training-set sizes (clients 0-3 are group 0, 4-7 group 1 in the two-group partitions).
SIZES = [60, 30, 45, 15, 50, 20, 40, 40]
TRAIN = TrainConfig(epochs=1, batch_size=16, lr=0.1, momentum=0.9)


@pytest.fixture(scope="module")
def make_ctx(federation):
    return lambda partition, clients=8: federation(SIZES[:clients], partition, 100, TRAIN, seed=1)


def run(algo, rounds, arrived=None):
    """Rounds 1..rounds (rounds count from 1, as in simulate)."""
    everyone = frozenset(range(algo.ctx.num_clients))
    infos = []
    for r in range(1, rounds + 1):
        algo.plan(r)
        infos.append(algo.step(r, everyone if arrived is None else arrived))
    return infos


def same_partition(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all((a[:, None] == a[None, :]) == (b[:, None] == b[None, :])))


def test_defaults_are_the_papers_and_the_demos():
    assert ClusteredFL.hparams == {
        "eps1": 0.4, "eps2": 1.6, "min_rounds_before_split": 20, "min_cluster_size": 3, "linkage": "single",
    }


def test_split_waits_until_after_min_rounds_before_split(make_ctx):
    ctx = make_ctx(({"name": "iid"},))
    algo = ClusteredFL(ctx, eps1=0.1, eps2=0.5)
    updates = {i: torch.zeros(ctx.arch.param_count) for i in range(8)}
    for i in range(8):
        updates[i][0] = 1.0 if i < 4 else -1.0
    # sizes 60 30 45 15 | 50 20 40 40: 150 samples on each side, so the weighted mean update is 0.
    everyone = frozenset(range(8))
    labels, records = algo.split_clusters(20, updates, everyone)  # the demo's c_round > 20
    assert labels.tolist() == [0] * 8 and records == []
    labels, records = algo.split_clusters(21, updates, everyone)
    assert labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    (record,) = records
    assert record["mean_norm"] == pytest.approx(0.0, abs=1e-15) and record["max_norm"] == 1.0
    assert record["split"] and record["members"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # The mean is size-weighted: with clients 6 and 7 still, it is (150 - 70) / 300 (unweighted: 2 / 8).
    for i in (6, 7):
        updates[i][0] = 0.0
    _, records = algo.split_clusters(21, updates, everyone)
    assert records[0]["mean_norm"] == pytest.approx(80 / 300, rel=1e-12) and not records[0]["split"]


def test_splits_two_label_permutation_groups(make_ctx):
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    infos = run(algo, 6)
    assert len(np.unique(algo.assignment)) == 2
    assert same_partition(algo.assignment, ctx.data.groups)
    plan = algo.plan(7)
    assert sorted(sorted(s.receivers) for s in plan.streams) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    split_round = next(r for r, info in enumerate(infos) if info.extra["clusters"] == 2)
    record = infos[split_round].extra["splits"][0]
    assert record["split"] and record["mean_norm"] < 0.4 and record["max_norm"] > 0.9
    assert same_partition(infos[split_round].extra["assignment"], ctx.data.groups)
    assert infos[split_round].extra["cluster_sizes"] == [4, 4]
    assert ["assignment" in info.extra for info in infos] == [r == split_round for r in range(len(infos))]


def test_never_splits_an_iid_population(make_ctx):
    ctx = make_ctx(({"name": "iid"},))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    infos = run(algo, 8)
    assert all(info.extra["clusters"] == 1 for info in infos)
    assert algo.plan(9).streams[0].receivers == frozenset(range(8))


def test_cluster_with_a_missing_member_is_not_split(make_ctx):
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    run(algo, 6, arrived=frozenset(range(7)))
    assert len(algo.plan(7).streams) == 1


def test_after_a_split_each_half_averages_its_own_members(make_ctx):
    ctx = make_ctx(({"name": "iid"}, {"name": "label_permutation", "groups": 2}))
    algo = ClusteredFL(ctx, **DIGITS_EPS)
    run(algo, 6)
    start = algo.models.clone()
    trained, _ = algo.local_training(7, np.arange(8))
    algo.step(7, frozenset(range(8)))
    sizes = torch.as_tensor(ctx.sizes(), dtype=trained.dtype)
    for c in range(2):
        idx = torch.as_tensor(np.flatnonzero(algo.assignment == c))
        expected = (sizes[idx] / sizes[idx].sum()) @ trained[idx]
        torch.testing.assert_close(algo.models[c], expected, rtol=1e-5, atol=1e-6)
    assert not torch.equal(start, algo.models)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eps1": -1.0}, "cfl: eps1 must be a finite number >= 0, got -1.0"),
        ({"eps2": float("inf")}, "cfl: eps2 must be a finite number >= 0, got inf"),
        ({"min_cluster_size": 1}, "cfl: min_cluster_size must be an int >= 2, got 1"),
        ({"min_rounds_before_split": 1.5}, "cfl: min_rounds_before_split must be an int >= 0, got 1.5"),
        ({"linkage": "average"}, r"cfl: linkage must be 'single' \(Sattler et al., Algorithm 1\) or 'complete' \(the authors' demo code\), got 'average'"),
    ],
)
def test_bad_hparams(make_ctx, kwargs, message):
    ctx = make_ctx(({"name": "iid"},), clients=3)
    with pytest.raises(ValueError, match=message):
        ClusteredFL(ctx, **kwargs)
