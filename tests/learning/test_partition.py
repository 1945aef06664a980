"""Partitioners on tiny hand-checkable pools: exact counts, alpha limits, majority p, shards, shifts, errors."""

import numpy as np
import pytest
import torch

from wirelessfl.learning.data.catalog import PARTITIONERS, PartitionError, check_samples, parse_steps
from wirelessfl.learning.data.partition import (
    OUTCOME_DRAWS,
    ClassQueues,
    _fill,
    SplitInput,
    client_sizes,
    combine_groups,
    rotate,
    run_shift,
    run_splitter,
)


def balanced_pool(num_classes: int, per_class: int) -> SplitInput:
    return SplitInput(labels=np.repeat(np.arange(num_classes), per_class), num_classes=num_classes)


def split(steps, pool, sizes, seed=0, minimum=1):
    splitter, _ = parse_steps(steps)
    return run_splitter(splitter, pool, np.asarray(sizes), np.random.default_rng(seed), minimum)


def histograms(pool: SplitInput, clients) -> np.ndarray:
    return np.stack([np.bincount(pool.labels[c], minlength=pool.num_classes) for c in clients])


def assert_disjoint_with_sizes(clients, sizes):
    assert [len(c) for c in clients] == list(sizes)
    everything = np.concatenate(clients)
    assert len(np.unique(everything)) == len(everything)


def test_registry_kinds_and_defaults():
    kinds = {name: info.kind for name, info in PARTITIONERS.items()}
    assert kinds == {
        "iid": "splitter",
        "dirichlet": "splitter",
        "per_class_dirichlet": "splitter",
        "shards": "splitter",
        "random_classes": "splitter",
        "majority": "splitter",
        "natural": "splitter",
        "rotation": "shift",
        "label_permutation": "shift",
        "local_labels": "shift",
    }
    assert dict(PARTITIONERS["dirichlet"].params) == {"alpha": 0.4, "over": "label"}
    assert dict(PARTITIONERS["per_class_dirichlet"].params) == {"alpha": 0.4}
    assert dict(PARTITIONERS["random_classes"].params) == {"classes": 2}
    assert dict(PARTITIONERS["majority"].params) == {"p": 0.8, "classes": 2, "rest": "sampled"}
    assert {n for n, i in PARTITIONERS.items() if i.sizes == "outcome"} == {"per_class_dirichlet", "random_classes"}
    assert {n for n, i in PARTITIONERS.items() if i.sizes == "natural"} == {"natural"}
    assert all(info.description for info in PARTITIONERS.values())


def test_iid_gives_exact_sizes_of_distinct_samples_and_is_seeded():
    pool = balanced_pool(3, 4)
    clients = split([{"name": "iid"}], pool, [5, 4, 3])
    assert_disjoint_with_sizes(clients, [5, 4, 3])
    assert sorted(np.concatenate(clients).tolist()) == list(range(12))
    again = split([{"name": "iid"}], pool, [5, 4, 3])
    assert all(np.array_equal(a, b) for a, b in zip(clients, again))
    other = split([{"name": "iid"}], pool, [5, 4, 3], seed=1)
    assert not all(np.array_equal(a, b) for a, b in zip(clients, other))


def test_dirichlet_large_alpha_is_near_uniform():
    pool = balanced_pool(10, 1000)
    clients = split([{"name": "dirichlet", "alpha": 1e6}], pool, [500] * 10)
    shares = histograms(pool, clients) / 500
    total_variation = 0.5 * np.abs(shares - 0.1).sum(axis=1)
    assert total_variation.max() < 0.1


def test_dirichlet_tiny_alpha_gives_one_class_per_client():
    pool = balanced_pool(10, 1000)
    clients = split([{"name": "dirichlet", "alpha": 1e-6}], pool, [40] * 20)
    assert_disjoint_with_sizes(clients, [40] * 20)
    assert (np.count_nonzero(histograms(pool, clients), axis=1) == 1).all()


def test_dirichlet_renormalises_over_classes_left_and_uses_the_whole_pool():
    pool = balanced_pool(3, 5)
    clients = split([{"name": "dirichlet", "alpha": 1e-6}], pool, [5, 5, 5])
    assert_disjoint_with_sizes(clients, [5, 5, 5])
    assert histograms(pool, clients).sum(axis=0).tolist() == [5, 5, 5]


class CountingGenerator(np.random.Generator):
    """Counts multinomial draws, to bound the work of a splitter's loop."""

    draws = 0

    def multinomial(self, *args, **kwargs):
        CountingGenerator.draws += 1
        return super().multinomial(*args, **kwargs)


def test_dirichlet_loop_is_bounded_when_classes_run_out():
    # one big class and nine singletons, the whole pool, tiny alpha: clients keep asking for emptied classes
    pool = SplitInput(labels=np.concatenate([np.zeros(991, dtype=np.int64), np.arange(1, 10)]), num_classes=10)
    CountingGenerator.draws = 0
    clients = run_splitter(parse_steps([{"name": "dirichlet", "alpha": 1e-3}])[0], pool, np.full(10, 100), CountingGenerator(np.random.PCG64(0)))
    assert_disjoint_with_sizes(clients, [100] * 10)
    assert CountingGenerator.draws <= 10 * (10 + 1)  # per client: each extra pass empties a class


def test_dirichlet_splits_a_thousand_clients():
    pool = balanced_pool(62, 2000)
    clients = split([{"name": "dirichlet", "alpha": 0.1}], pool, [100] * 1000)
    assert_disjoint_with_sizes(clients, [100] * 1000)


def test_dirichlet_over_latent_components():
    labels = np.array([0, 1] * 30)
    latent = np.repeat(np.arange(3), 20)
    pool = SplitInput(labels=labels, num_classes=2, latent=latent)
    clients = split([{"name": "dirichlet", "alpha": 1e-6, "over": "latent"}], pool, [10, 10, 10])
    components = [np.unique(latent[c]).tolist() for c in clients]
    assert all(len(c) == 1 for c in components)
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(dirichlet\): over: 'latent' needs a dataset with hidden mixture components \(synthetic\)$"):
        split([{"name": "dirichlet", "over": "latent"}], balanced_pool(2, 5), [5])


def test_dirichlet_rejects_bad_alpha_and_over():
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(dirichlet\): alpha must be a positive finite number; got 0$"):
        split([{"name": "dirichlet", "alpha": 0}], balanced_pool(2, 5), [5])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(dirichlet\): over must be 'label' or 'latent'; got 'labels'$"):
        split([{"name": "dirichlet", "over": "labels"}], balanced_pool(2, 5), [5])


# --- per_class_dirichlet (FedEM) -----------------------------------------------------------------


def test_per_class_dirichlet_deals_every_sample_of_every_class_once():
    pool = SplitInput(labels=np.repeat(np.arange(5), [30, 20, 10, 5, 1]), num_classes=5)
    clients = split([{"name": "per_class_dirichlet", "alpha": 0.4}], pool, [22] * 3)  # sizes: only their sum, 66, counts
    everything = np.concatenate(clients)
    assert sorted(everything.tolist()) == list(range(66))
    assert histograms(pool, clients).sum(axis=0).tolist() == [30, 20, 10, 5, 1]
    assert len({len(c) for c in clients}) > 1  # client sizes are an outcome, not the [22, 22, 22] asked


def test_per_class_dirichlet_takes_a_uniform_subset_of_the_total_asked():
    pool = balanced_pool(4, 50)
    clients = split([{"name": "per_class_dirichlet", "alpha": 1.0}], pool, [30] * 4)
    everything = np.concatenate(clients)
    assert len(everything) == 120 and len(np.unique(everything)) == 120
    assert histograms(pool, clients).sum(axis=0).tolist() == np.bincount(pool.labels[everything], minlength=4).tolist()


class DirichletRecorder(np.random.Generator):
    """Records the length of every Dirichlet parameter vector drawn."""

    lengths: list = []

    def dirichlet(self, alpha, size=None):
        DirichletRecorder.lengths.append((len(alpha), size))
        return super().dirichlet(alpha, size)


def test_per_class_dirichlet_draws_one_distribution_over_clients_per_class():
    pool = SplitInput(labels=np.repeat([0, 2, 3], 10), num_classes=4)  # class 1 has no samples: no draw for it
    DirichletRecorder.lengths = []
    run_splitter(parse_steps([{"name": "per_class_dirichlet"}])[0], pool, np.full(7, 4), DirichletRecorder(np.random.PCG64(0)))
    assert DirichletRecorder.lengths == [(7, None)] * 3
    DirichletRecorder.lengths = []  # the per-client `dirichlet`: one vector over the 4 classes for each of the 7 clients
    run_splitter(parse_steps([{"name": "dirichlet"}])[0], pool, np.full(7, 4), DirichletRecorder(np.random.PCG64(0)))
    assert DirichletRecorder.lengths == [(4, 7)]


def test_per_class_dirichlet_large_alpha_splits_each_class_evenly():
    pool = balanced_pool(10, 1000)
    hist = histograms(pool, split([{"name": "per_class_dirichlet", "alpha": 1e6}], pool, [1000] * 10))
    assert np.abs(hist - 100).max() <= 40  # Multinomial(1000, 1/10): sd 9.5, so 100 +- 4 sd


def test_per_class_dirichlet_tiny_alpha_gives_each_class_to_one_client():
    pool = balanced_pool(10, 100)
    hist = histograms(pool, split([{"name": "per_class_dirichlet", "alpha": 1e-6}], pool, [200] * 5))
    assert (np.count_nonzero(hist, axis=0) == 1).all() and (hist.sum(axis=0) == 100).all()


def test_per_class_dirichlet_is_reproducible_from_the_seed():
    pool = balanced_pool(5, 40)
    first, again = (split([{"name": "per_class_dirichlet"}], pool, [50] * 4, seed=3) for _ in range(2))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    other = split([{"name": "per_class_dirichlet"}], pool, [50] * 4, seed=4)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_outcome_splits_are_drawn_again_until_every_client_has_the_minimum():
    pool = balanced_pool(2, 10)
    step = [{"name": "per_class_dirichlet", "alpha": 1.0}]
    first_draws = [[len(c) for c in split(step, pool, [5] * 4, seed=seed, minimum=0)] for seed in range(10)]
    assert any(min(sizes) < 3 for sizes in first_draws)  # unconditioned draws often leave a client with 1 or 2
    for seed, first in enumerate(first_draws):
        kept = [len(c) for c in split(step, pool, [5] * 4, seed=seed, minimum=3)]
        assert min(kept) >= 3 and sum(kept) == 20
        assert kept == first or min(first) < 3  # a draw that already satisfies the minimum is kept as it is


def test_outcome_split_that_cannot_reach_the_minimum_is_an_error():
    pool = balanced_pool(2, 10)  # alpha -> 0 gives each class to one client: at most 2 of the 4 clients get anything
    with pytest.raises(PartitionError, match=rf"^data\.partition\[0\] \(per_class_dirichlet\): all {OUTCOME_DRAWS} draws left some client with fewer than the minimum of 1 samples \(the best draw's smallest client had 0\); deal more samples \(data\.samples\.total\), use fewer clients or a less skewed split$"):
        split([{"name": "per_class_dirichlet", "alpha": 1e-9}], pool, [5] * 4)
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(per_class_dirichlet\): alpha must be a positive finite number; got -1$"):
        split([{"name": "per_class_dirichlet", "alpha": -1}], pool, [5] * 4)


def test_outcome_splitters_take_only_a_total_from_data_samples():
    for name in ("per_class_dirichlet", "random_classes"):
        splitter, _ = parse_steps([{"name": name}])
        check_samples(splitter, {"total": 1000})
        check_samples(splitter, {"total": "all"})
        check_samples(splitter, {"total": 1000, "distribution": "equal"})
        with pytest.raises(PartitionError, match=rf"^data\.partition\[0\] \({name}\): client sizes are an outcome of this split, so data\.samples must be \{{total: N\}} or \{{total: all\}} \(how many pool samples it deals out\); got \{{'per_client': 80\}}$"):
            check_samples(splitter, {"per_client": 80})
        with pytest.raises(PartitionError, match=rf"^data\.partition\[0\] \({name}\): client sizes are an outcome of this split, so data\.samples must be \{{total: N\}} or \{{total: all\}} \(how many pool samples it deals out\); got \{{'total': 1000, 'distribution': 'lognormal'\}}$"):
            check_samples(splitter, {"total": 1000, "distribution": "lognormal"})
    check_samples(parse_steps([{"name": "dirichlet"}])[0], {"per_client": 80})  # given sizes: anything client_sizes accepts


# --- random_classes (PFLEGO) ---------------------------------------------------------------------


def test_random_classes_gives_each_client_exactly_k_classes_and_deals_the_whole_pool():
    pool = balanced_pool(10, 200)
    for k in (2, 5, 10):  # PFLEGO's high, medium and no personalization for C = 10
        clients = split([{"name": "random_classes", "classes": k}], pool, [100] * 20, seed=k)
        hist = histograms(pool, clients)
        assert (np.count_nonzero(hist, axis=1) == k).all()
        assert (hist.sum(axis=0) == 200).all()
        assert sorted(np.concatenate(clients).tolist()) == list(range(2000))
        for column in hist.T:  # each class in equal shares (+-1) among the clients holding it
            held = column[column > 0]
            assert held.max() - held.min() <= 1


def test_random_classes_deals_each_class_round_robin_from_the_first_holder():
    pool = SplitInput(labels=np.repeat([0, 1], [7, 5]), num_classes=2)
    hist = histograms(pool, split([{"name": "random_classes", "classes": 2}], pool, [4] * 3))
    assert hist.tolist() == [[3, 2], [2, 2], [2, 1]]  # 7 = 3 + 2 + 2 and 5 = 2 + 2 + 1, the extra to the lowest clients


def test_random_classes_draws_each_clients_classes_independently_unlike_shards():
    pool = balanced_pool(10, 300)
    usage = lambda name, size: np.count_nonzero(histograms(pool, split([{"name": name, "classes": 2}], pool, [size] * 1000)), axis=0)
    assert (usage("shards", 2) == 200).all()  # shards balance: every class is used by exactly 1000 * 2 / 10 clients
    independent = usage("random_classes", 3)  # Binomial(1000, 1/5) per class: sd 12.6
    assert independent.sum() == 2000 and len(set(independent.tolist())) > 1 and np.abs(independent - 200).max() <= 60


def test_random_classes_covers_every_class_when_the_draws_miss_one():
    pool = balanced_pool(10, 20)
    for seed in range(5):  # 5 clients x 2 classes: independent draws almost never cover all 10 classes
        hist = histograms(pool, split([{"name": "random_classes", "classes": 2}], pool, [40] * 5, seed=seed))
        assert (np.count_nonzero(hist, axis=1) == 2).all()
        assert (np.count_nonzero(hist, axis=0) == 1).all() and (hist.sum(axis=0) == 20).all()


def test_random_classes_errors():
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(random_classes\): classes must be an integer between 1 and 3 \(the dataset's classes\); got 4$"):
        split([{"name": "random_classes", "classes": 4}], balanced_pool(3, 5), [5])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(random_classes\): 2 clients with classes = 2 each cannot hold all 5 classes \(every class is dealt to the clients holding it\); use more clients or more classes$"):
        split([{"name": "random_classes", "classes": 2}], balanced_pool(5, 4), [5, 5])


def test_shards_give_exactly_c_classes_in_equal_parts():
    pool = balanced_pool(10, 100)
    clients = split([{"name": "shards", "classes": 2}], pool, [10] * 10)
    hist = histograms(pool, clients)
    assert (np.count_nonzero(hist, axis=1) == 2).all()
    assert set(hist[hist > 0].tolist()) == {5}
    assert (hist.sum(axis=0) == 10).all()  # balanced: every class used by exactly 2 clients


def test_shards_refill_from_the_clients_own_classes_when_one_runs_out():
    pool = SplitInput(labels=np.array([0] * 2 + [1] * 20), num_classes=2)
    clients = split([{"name": "shards", "classes": 2}], pool, [10])
    assert histograms(pool, clients).tolist() == [[2, 8]]


def test_shards_refuse_a_client_whose_class_ran_out():
    pool = SplitInput(labels=np.array([0] + [1] * 20), num_classes=2)
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(shards\): client 1 cannot get samples of all 2 of its classes \[0, 1\] \(the pool has none left of some\); ask for fewer samples in data\.samples$"):
        split([{"name": "shards", "classes": 2}], pool, [2, 4])


def test_shards_and_majority_deal_only_classes_that_have_samples():
    pool = SplitInput(labels=np.repeat([1, 2, 3], 30), num_classes=4)  # class 0 listed but empty, like EMNIST letters' 'N/A'
    for seed in range(5):
        hist = histograms(pool, split([{"name": "shards", "classes": 3}], pool, [9, 9, 9], seed=seed))
        assert hist.tolist() == [[0, 3, 3, 3]] * 3
        hist = histograms(pool, split([{"name": "majority", "p": 0.5, "classes": 1, "rest": "even"}], pool, [10, 10, 10], seed=seed))
        assert hist[:, 0].tolist() == [0, 0, 0] and np.sort(hist, axis=1).tolist() == [[0, 2, 3, 5]] * 3  # 5 majority, 5 over the 2 others
        assert sorted(hist.argmax(axis=1).tolist()) == [1, 2, 3]  # each present class is one client's majority
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(shards\): classes must be an integer between 1 and 3 \(the dataset's classes that have samples\); got 4$"):
        split([{"name": "shards", "classes": 4}], pool, [9])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(majority\): classes must be an integer between 1 and 2 \(the dataset's classes that have samples: 3, less one\); got 3$"):
        split([{"name": "majority", "classes": 3}], pool, [9])


def test_shards_errors():
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(shards\): classes must be an integer between 1 and 3 \(the dataset's classes\); got 4$"):
        split([{"name": "shards", "classes": 4}], balanced_pool(3, 5), [5])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(shards\): client 1 has 2 samples, fewer than classes = 3$"):
        split([{"name": "shards", "classes": 3}], balanced_pool(3, 5), [3, 2])


def test_majority_fraction_is_exact():
    pool = balanced_pool(10, 100)
    clients = split([{"name": "majority", "p": 0.8, "rest": "even"}], pool, [50] * 5)
    hist = histograms(pool, clients)
    for row in hist:
        top_two = np.sort(row)[-2:]
        assert top_two.tolist() == [20, 20]  # 0.8 * 50 = 40 majority samples, 20 per majority class
        rest = np.sort(row)[:-2]
        assert rest.sum() == 10 and set(rest.tolist()) <= {1, 2}  # 10 spread evenly over 8 classes


def test_majority_p_point_two_is_uniform_over_ten_classes():
    pool = balanced_pool(10, 100)
    hist = histograms(pool, split([{"name": "majority", "p": 0.2, "rest": "even"}], pool, [100] * 3))
    assert (hist == 10).all()


def test_majority_rest_is_sampled_uniformly_from_the_other_classes():
    pool = balanced_pool(10, 1000)
    clients = split([{"name": "majority", "p": 0.6}], pool, [100] * 40)
    hist = histograms(pool, clients)
    top_two = np.sort(hist, axis=1)[:, -2:]
    assert (top_two == 30).all()  # round(0.6 * 100) = 60 majority samples, 30 per majority class
    is_minor = hist < 30
    assert (np.where(is_minor, hist, 0).sum(axis=1) == 40).all()
    assert len(set(hist[is_minor].tolist())) > 3  # drawn, not spread evenly (which gives only 5s)
    per_class = np.where(is_minor, hist, 0).sum(axis=0) / is_minor.sum(axis=0)  # mean count where the class is a minority
    assert np.abs(per_class - 5).max() < 1.5  # uniform over the 8 others: Binomial(40, 1/8), mean 5; 32 clients: sd 0.37


def test_majority_p_one_leaves_only_the_majority_classes():
    pool = balanced_pool(10, 100)
    hist = histograms(pool, split([{"name": "majority", "p": 1.0}], pool, [40] * 5))
    assert (np.count_nonzero(hist, axis=1) == 2).all() and (hist[hist > 0] == 20).all()


def test_majority_pairs_are_disjoint_for_the_first_half_then_repeat():
    pool = balanced_pool(10, 100)
    hist = histograms(pool, split([{"name": "majority", "p": 1.0}], pool, [20] * 10))
    pairs = [tuple(np.flatnonzero(row).tolist()) for row in hist]
    assert sorted(c for pair in pairs[:5] for c in pair) == list(range(10))  # C/2 = 5 clients: every class once
    assert pairs[5:] == pairs[:5]  # client i + 5 shares client i's majority pair


def test_fill_moves_a_shortfall_to_the_other_allowed_classes_only():
    allowed = np.array([True, True, False, False])
    take = _fill(np.array([8, 7, 0, 0]), np.array([3, 50, 50, 50]), allowed, "majority", 0)
    assert take.tolist() == [3, 12, 0, 0]
    spread = _fill(np.array([6, 0, 0, 0]), np.array([0, 2, 9, 9]), np.array([True, True, True, False]), "majority", 0)
    assert spread.tolist() == [0, 2, 4, 0]
    with pytest.raises(PartitionError, match=r"^majority: client 4 needs 2 more samples from classes \[0, 1\] but the pool has none left; ask for fewer samples in data\.samples \(every client takes fixed shares of its classes, so the whole pool, total: all, fits only if the classes divide evenly\)$"):
        _fill(np.array([3, 3, 0, 0]), np.array([2, 2, 9, 9]), allowed, "majority", 4)


def test_majority_errors():
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(majority\): p must be a number between 0 and 1; got 1\.5$"):
        split([{"name": "majority", "p": 1.5}], balanced_pool(3, 5), [5])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(majority\): classes must be an integer between 1 and 2; got 3$"):
        split([{"name": "majority", "classes": 3}], balanced_pool(3, 5), [5])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(majority\): rest must be 'sampled' or 'even'; got 'uniform'$"):
        split([{"name": "majority", "rest": "uniform"}], balanced_pool(3, 5), [5])


def test_splitter_refuses_more_samples_than_the_pool():
    with pytest.raises(PartitionError, match=r"^data\.samples asks for 11 samples in total but the dataset pool has only 10$"):
        split([{"name": "iid"}], balanced_pool(2, 5), [6, 5])


def test_class_queues_never_hand_out_a_sample_twice():
    queues = ClassQueues(np.array([1, 0, 1, 0, 1]), 2, np.random.default_rng(0))
    assert queues.available.tolist() == [2, 3]
    queues.take(np.array([1, 2]))
    queues.take(np.array([1, 1]))
    assert queues.available.tolist() == [0, 0]
    first, second = queues.dealt()
    assert sorted(np.concatenate([first, second]).tolist()) == [0, 1, 2, 3, 4]
    labels = np.array([1, 0, 1, 0, 1])
    assert labels[first].tolist() == [0, 1, 1] and labels[second].tolist() == [0, 1]  # classes ascending


# --- shifts ------------------------------------------------------------------------------------


def shift(step, num_clients, input_shape=(1, 4, 4), num_classes=10, seed=0):
    _, shifts = parse_steps([{"name": "iid"}, step])
    return run_shift(shifts[0], num_clients, input_shape, num_classes, np.random.default_rng(seed))


def test_rotation_groups_in_contiguous_blocks_with_default_angles():
    rotation = shift({"name": "rotation"}, 8)
    assert rotation.groups.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert rotation.detail == "rotation angles [0.0, 90.0, 180.0, 270.0]"
    x = torch.arange(16, dtype=torch.uint8).view(1, 1, 4, 4)
    y = torch.tensor([3])
    for group in range(4):
        rotated, same_y = rotation.transform(group, x, y)
        assert torch.equal(rotated, torch.rot90(x, group, dims=(-2, -1)))
        assert torch.equal(same_y, y)


def test_rotation_blocks_for_uneven_counts_and_other_assignments():
    assert shift({"name": "rotation", "groups": 3}, 7).groups.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert shift({"name": "rotation", "groups": 3, "assign": "cyclic"}, 7).groups.tolist() == [0, 1, 2, 0, 1, 2, 0]
    shuffled = shift({"name": "rotation", "groups": 3, "assign": "random"}, 7).groups
    assert sorted(shuffled.tolist()) == [0, 0, 0, 1, 1, 2, 2]


def test_rotation_by_a_non_right_angle_keeps_the_shape_and_moves_pixels():
    x = torch.zeros(1, 1, 9, 9, dtype=torch.uint8)
    x[..., 4, 6:] = 255  # a bar to the right of the centre
    turned = rotate(x, 45.0)
    assert turned.shape == x.shape
    assert turned[0, 0, 4, 8] == 0 and turned[0, 0, 2, 6] > 0  # counter-clockwise: the bar moves up-right


def test_rotation_errors():
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(rotation\): rotation needs square images larger than 1x1; the dataset's images are 1x150$"):
        shift({"name": "rotation"}, 8, input_shape=(1, 1, 150))
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(rotation\): angles must be a list of 4 numbers \(degrees, one per group\); got \[0, 90\]$"):
        shift({"name": "rotation", "angles": [0, 90]}, 8)
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(rotation\): groups = 4 needs at least 4 clients; got 3$"):
        shift({"name": "rotation"}, 3)
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(rotation\): assign must be 'blocks', 'cyclic' or 'random'; got 'spread'$"):
        shift({"name": "rotation", "assign": "spread"}, 8)


def test_label_permutation_group_zero_is_identity_and_others_are_bijections():
    permutation = shift({"name": "label_permutation", "groups": 3}, 6, num_classes=5)
    assert permutation.groups.tolist() == [0, 0, 1, 1, 2, 2]
    labels = torch.arange(5)
    x = torch.zeros(5, 1, 4, 4)
    assert torch.equal(permutation.transform(0, x, labels)[1], labels)
    mapped = [permutation.transform(g, x, labels)[1] for g in (1, 2)]
    assert all(sorted(m.tolist()) == [0, 1, 2, 3, 4] for m in mapped)
    assert not torch.equal(mapped[0], mapped[1])
    assert permutation.transform(1, x, labels)[0] is x


def test_label_permutations_are_distinct_even_with_two_classes():
    for seed in range(20):  # a repeated draw (half the time with 2 classes) used to leave group 1 unshifted
        permutation = shift({"name": "label_permutation", "groups": 2}, 4, num_classes=2, seed=seed)
        assert permutation.transform(1, None, torch.tensor([0, 1]))[1].tolist() == [1, 0]
    six = shift({"name": "label_permutation", "groups": 6}, 6, num_classes=3)
    mapped = {tuple(six.transform(g, None, torch.arange(3))[1].tolist()) for g in range(6)}
    assert len(mapped) == 6  # all 3! permutations, one per group
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(label_permutation\): groups = 3 needs 3 distinct label permutations, but 2 classes have only 2$"):
        shift({"name": "label_permutation", "groups": 3}, 6, num_classes=2)


def test_group_count_must_be_a_positive_integer():
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(label_permutation\): groups must be a positive integer; got 0$"):
        shift({"name": "label_permutation", "groups": 0}, 6)
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] \(rotation\): groups must be a positive integer; got 2\.5$"):
        shift({"name": "rotation", "groups": 2.5}, 6)


def test_combine_groups_numbers_each_combination():
    rotation = shift({"name": "rotation", "groups": 2}, 8)
    permutation = shift({"name": "label_permutation", "groups": 2, "assign": "cyclic"}, 8)
    assert combine_groups([rotation, permutation], 8).tolist() == [0, 1, 0, 1, 2, 3, 2, 3]
    assert combine_groups([], 3).tolist() == [0, 0, 0]


# --- step parsing and sample counts ------------------------------------------------------------


def test_parse_steps_errors():
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\]\.name must be one of: dirichlet, iid, label_permutation, local_labels, majority, natural, per_class_dirichlet, random_classes, rotation, shards; got 'dirichlet2'$"):
        parse_steps([{"name": "dirichlet2"}])
    with pytest.raises(PartitionError, match=r"^data\.partition\[0\] \(dirichlet\): unknown parameter 'alpah'; allowed: alpha, over$"):
        parse_steps([{"name": "dirichlet", "alpah": 0.1}])
    with pytest.raises(PartitionError, match=r"^data\.partition must contain exactly one sample splitter \(dirichlet, iid, majority, natural, per_class_dirichlet, random_classes, shards\); got 2: iid, dirichlet$"):
        parse_steps([{"name": "iid"}, {"name": "dirichlet"}])
    with pytest.raises(PartitionError, match=r"^data\.partition must contain exactly one sample splitter \(dirichlet, iid, majority, natural, per_class_dirichlet, random_classes, shards\); got 0: none$"):
        parse_steps([{"name": "rotation"}])
    with pytest.raises(PartitionError, match=r"^data\.partition\[1\] must be a mapping with a 'name'; got 'rotation'$"):
        parse_steps([{"name": "iid"}, "rotation"])
    with pytest.raises(PartitionError, match=r"^data\.partition must be a list of steps like \{'name': 'dirichlet', 'alpha': 0\.4\}; got \{'name': 'iid'\}$"):
        parse_steps({"name": "iid"})


def test_parse_steps_fills_defaults_and_keeps_shift_order():
    splitter, shifts = parse_steps([{"name": "rotation", "groups": 2}, {"name": "dirichlet"}, {"name": "label_permutation"}])
    assert splitter.index == 1 and dict(splitter.params) == {"alpha": 0.4, "over": "label"}
    assert [s.info.name for s in shifts] == ["rotation", "label_permutation"]
    assert dict(shifts[0].params) == {"groups": 2, "angles": None, "assign": "blocks"}


def sizes(samples, num_clients=4, pool_size=100, minimum=3, seed=0):
    return client_sizes(samples, num_clients, pool_size, minimum, np.random.default_rng(seed)).tolist()


def test_client_sizes_equal_and_per_client():
    assert sizes({"per_client": 7}) == [7, 7, 7, 7]
    assert sizes({"total": 14}) == [4, 4, 3, 3]
    assert sizes({"total": "all"}, pool_size=101) == [26, 25, 25, 25]


def test_client_sizes_lognormal_sum_exactly_and_respect_the_minimum():
    counts = sizes({"total": 100, "distribution": "lognormal", "sigma": 2.0}, num_clients=10)
    assert sum(counts) == 100 and min(counts) >= 3 and len(set(counts)) > 1
    assert counts == sizes({"total": 100, "distribution": "lognormal", "sigma": 2.0}, num_clients=10)
    assert sizes({"total": 40, "distribution": "lognormal", "sigma": 0.0}) == [10, 10, 10, 10]


def test_client_sizes_errors():
    with pytest.raises(PartitionError, match=r"^data\.samples\.per_client = 2 is below the minimum of 3 samples per client \(every split in data\.split needs at least one sample\)$"):
        sizes({"per_client": 2})
    with pytest.raises(PartitionError, match=r"^data\.samples asks for 120 samples in total \(4 clients x 30\) but the dataset pool has only 100; data\.samples\.reuse lets several clients share a sample$"):
        sizes({"per_client": 30})
    with pytest.raises(PartitionError, match=r"^data\.samples asks for 404 samples in total \(4 clients x 101\) but the dataset pool has only 100$"):
        sizes({"per_client": 101})
    with pytest.raises(PartitionError, match=r"^data\.samples\.total = 11 is too small: 4 clients need at least 3 samples each \(every split in data\.split needs at least one sample\), i\.e\. 12$"):
        sizes({"total": 11})
    with pytest.raises(PartitionError, match=r"^data\.samples asks for 101 samples in total but the dataset pool has only 100$"):
        sizes({"total": 101})
    with pytest.raises(PartitionError, match=r"^data\.samples must give exactly one of 'per_client' or 'total'; got \{\}$"):
        sizes({})
    with pytest.raises(PartitionError, match=r"^data\.samples: unknown key 'per_clients'; allowed: per_client, total, distribution, sigma, reuse$"):
        sizes({"per_clients": 3})
    with pytest.raises(PartitionError, match=r"^data\.samples\.reuse must be a positive integer \(how many clients may share a sample\); got 0$"):
        sizes({"per_client": 3, "reuse": 0})
    with pytest.raises(PartitionError, match=r"^data\.samples\.reuse must be a positive integer \(how many clients may share a sample\); got 1\.5$"):
        sizes({"per_client": 3, "reuse": 1.5})
    with pytest.raises(PartitionError, match=r"^data\.samples\.reuse needs per_client \(each pass over the pool deals whole clients of n samples\); got \{'total': 40, 'reuse': 2\}$"):
        sizes({"total": 40, "reuse": 2})
    with pytest.raises(PartitionError, match=(
        r"^data\.samples asks for 30 samples for each of 7 clients but with reuse 2 the dataset pool of 100 serves at most 6 "
        r"\(2 passes of 3 clients\); raise data\.samples\.reuse to 3$"
    )):
        sizes({"per_client": 30, "reuse": 2}, num_clients=7)
    with pytest.raises(PartitionError, match=r"^data\.samples\.per_client = 101 is more than the dataset pool's 100 samples$"):
        sizes({"per_client": 101, "reuse": 2})
    assert sizes({"per_client": 30, "reuse": 3}, num_clients=7) == [30] * 7


def test_reuse_passes_deal_consecutive_clients_as_the_pool_holds_them():
    """Pool of 10. Sizes 4, 4, 4, 3, 3, 5 need 3 passes (filled in order: 4+4 | 4+3+3 | 5); spread evenly they are
    4+4 | 4+3 | 3+5, each within the pool. Seven clients of 3: 3 passes, 3 | 2 | 2 clients (9, 6, 6 samples), not
    3 | 3 | 1. Where the even spread would overflow a pass (9 | 1+1+1+1), the passes are filled in order."""
    from wirelessfl.learning.data.partition import reuse_passes

    assert [p.tolist() for p in reuse_passes(np.array([4, 4, 4, 3, 3, 5]), 10)] == [[0, 1], [2, 3], [4, 5]]
    assert [p.tolist() for p in reuse_passes(np.array([5, 5]), 10)] == [[0, 1]]
    assert [p.tolist() for p in reuse_passes(np.array([3] * 7), 10)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [p.tolist() for p in reuse_passes(np.array([9, 1, 1, 1, 1]), 10)] == [[0, 1], [2, 3, 4]]
    with pytest.raises(PartitionError, match=r"^data\.samples\.distribution must be 'equal' or 'lognormal'; got 'zipf'$"):
        sizes({"total": 50, "distribution": "zipf"})
    with pytest.raises(PartitionError, match=r"^data\.num_clients must be a positive integer; got 0$"):
        sizes({"total": 50}, num_clients=0)
    with pytest.raises(PartitionError, match=r"^data\.samples\.per_client must be a positive integer; got 2\.5$"):
        sizes({"per_client": 2.5})
    with pytest.raises(PartitionError, match=r"^data\.samples\.total must be a positive integer or 'all'; got 'everything'$"):
        sizes({"total": "everything"})
    with pytest.raises(PartitionError, match=r"^data\.samples\.distribution needs 'total' \(the number to distribute\), not 'per_client'$"):
        sizes({"per_client": 5, "distribution": "lognormal"})
    with pytest.raises(PartitionError, match=r"^data\.samples\.sigma only applies to distribution 'lognormal'$"):
        sizes({"total": 50, "sigma": 1.0})
    with pytest.raises(PartitionError, match=r"^data\.samples\.sigma must be a finite number >= 0; got -1$"):
        sizes({"total": 50, "distribution": "lognormal", "sigma": -1})


def test_client_sizes_accept_numpy_integers():
    assert sizes({"per_client": np.int64(5)}, num_clients=np.int64(3)) == [5, 5, 5]


def test_local_labels_reindex_each_clients_classes_and_add_no_groups():
    from wirelessfl.learning.data.federated import DataSpec, build_federated_data

    spec = dict(dataset="digits", num_clients=6, samples={"total": "all"})
    plain = build_federated_data(DataSpec(**spec, partition=({"name": "random_classes", "classes": 2},)), seed=0)
    local = build_federated_data(
        DataSpec(**spec, partition=({"name": "random_classes", "classes": 2}, {"name": "local_labels"})), seed=0
    )
    for a, b in zip(plain.clients, local.clients):
        y_global = torch.cat([a.y_train, a.y_val, a.y_test])
        y_local = torch.cat([b.y_train, b.y_val, b.y_test])
        low, high = sorted(set(y_global.tolist()))
        assert torch.equal(y_local, (y_global == high).long())  # smaller class -> 0, larger -> 1
        assert torch.equal(a.x_train, b.x_train)
    assert local.groups.tolist() == [0] * 6


# --- population scale: the vectorised dealing gives the partitions of the client-by-client loop ---------------

import hashlib  # noqa: E402


def _pool_labels(n, classes, seed):
    """``n`` labels of ``classes`` unequally frequent classes."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(classes, 2.0))
    return rng.choice(classes, size=n, p=weights).astype(np.int64)

VECTORISED_CASES = [
    # (splitter, clients, pool size, classes, client sizes)
    ({"name": "dirichlet", "alpha": 0.4}, 50, 2000, 10, "equal"),
    ({"name": "dirichlet", "alpha": 0.05}, 40, 1200, 10, "all"),
    ({"name": "dirichlet", "alpha": 100.0}, 30, 900, 62, "all"),
    ({"name": "dirichlet", "alpha": 0.4}, 300, 3000, 62, "uneven"),
    ({"name": "shards", "classes": 2}, 40, 4000, 10, "equal"),
    ({"name": "shards", "classes": 3}, 25, 3000, 10, "uneven"),
    ({"name": "majority", "p": 0.8}, 40, 4000, 10, "equal"),
    ({"name": "majority", "p": 0.6, "rest": "even"}, 30, 3000, 10, "uneven"),
]

def _sizes_for(rule, clients, n, seed):
    if rule == "equal":
        return np.full(clients, n // (2 * clients), dtype=np.int64)
    if rule == "all":  # the whole pool: classes run out while clients are dealt
        sizes = np.full(clients, n // clients, dtype=np.int64)
        sizes[: n % clients] += 1
        return sizes
    return np.random.default_rng(seed + 7).integers(3, n // clients, size=clients).astype(np.int64)

def _digest(clients):
    h = hashlib.sha256()
    for taken in clients:
        h.update(np.int64(len(taken)).tobytes())
        h.update(np.asarray(taken, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


#: Digests of the partitions (or the errors) the client-by-client code gave before dealing was vectorised,
#: seeds 0, 1, 2 of each case.
BEFORE_VECTORISING = {
    0: ['27a94857aac30292', 'c0cedd09894fc8ce', 'b4a3c323a0e0effd'],
    1: ['b8c8a4f4490bdba6', '8dfd32076501a9eb', '71103305278369d8'],
    2: ['bab10abde7c9a367', '77159296e45d67a5', '98f54868d637b7e4'],
    3: ['f0a7376bca45ac87', 'a4243f3e0d53f2ab', 'c5da34b875c3eefd'],
    4: ['error data.partition[0] (shards): client 13 cannot get samples of all 2 of its classes', 'bbff0b49bb1d8971', '2984c007a01059b3'],
    5: ['error data.partition[0] (shards): client 4 cannot get samples of all 3 of its classes ', 'b2380332cef05de0', 'error data.partition[0] (shards): client 18 cannot get samples of all 3 of its classes'],
    6: ['0ac377c429195f0e', '1cede1edba315d1a', 'e9fe977248cc153d'],
    7: ['error data.partition[0] (majority): client 26 needs 48 more samples from classes [6, 8', '1ccdbde5ed1b0f4f', '919f800b2c02a37c'],
}


@pytest.mark.parametrize("case", range(len(VECTORISED_CASES)))
def test_vectorised_dealing_gives_the_partitions_of_the_client_by_client_loop(case):
    spec, clients, pool_size, classes, rule = VECTORISED_CASES[case]
    for seed in (0, 1, 2):
        pool = SplitInput(labels=_pool_labels(pool_size, classes, seed), num_classes=classes)
        splitter, _ = parse_steps([spec])
        try:
            got = _digest(run_splitter(splitter, pool, _sizes_for(rule, clients, pool_size, seed), np.random.default_rng(100 + seed)))
        except PartitionError as err:
            got = "error " + str(err)[:80]
        assert got == BEFORE_VECTORISING[case][seed]


def test_the_dirichlet_blocks_cut_where_a_class_runs_out(monkeypatch):
    """Blocks of 7 clients over a pool that empties classes every few clients: the same partition as one
    block (the check above) and as blocks of one."""
    import wirelessfl.learning.data.partition as partition

    spec, clients, pool_size, classes, rule = VECTORISED_CASES[1]
    pool = SplitInput(labels=_pool_labels(pool_size, classes, 0), num_classes=classes)
    splitter, _ = parse_steps([spec])
    sizes = _sizes_for(rule, clients, pool_size, 0)
    for block in (1, 7):
        monkeypatch.setattr(partition, "DIRICHLET_BLOCK", block)
        assert _digest(run_splitter(splitter, pool, sizes, np.random.default_rng(100))) == BEFORE_VECTORISING[1][0]
