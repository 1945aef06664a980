"""build_federated_data on the embedded digits: sizes, splits, determinism, shifts applied, group ids, errors."""

import pickle
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.learning.data.datasets import load_pool
from wirelessfl.learning.data.federated import (
    ClientData,
    DataSpec,
    FederatedData,
    build_federated_data,
    check_split,
    minimum_client_size,
    split_counts,
)
from wirelessfl.learning.data.partition import PartitionError


@pytest.fixture(scope="module")
def digits():
    return build_federated_data(DataSpec(), seed=0)


def all_x(data: FederatedData) -> torch.Tensor:
    return torch.cat([torch.cat([c.x_train, c.x_val, c.x_test]) for c in data.clients])


def test_default_spec_uses_every_digit_over_twenty_clients(digits):
    assert digits.num_clients == 20 and digits.num_classes == 10 and digits.input_shape == (1, 8, 8)
    sizes = [len(c.y_train) + len(c.y_val) + len(c.y_test) for c in digits.clients]
    assert sizes == [90] * 17 + [89] * 3  # 1797 = 20 * 89 + 17
    assert digits.train_sizes.tolist() == [54] * 17 + [53] * 3
    assert [len(digits.clients[0].y_val), len(digits.clients[0].y_test)] == [18, 18]
    assert digits.groups.tolist() == [0] * 20 and digits.num_groups == 1
    assert digits.description == (
        "digits: 1797 of 1797 samples (1x8x8, 10 classes) over 20 clients (89-90 each), iid, 1 group(s), split 0.6/0.2/0.2"
    )


def test_clients_hold_the_whole_pool_as_stored_and_normalise_to_mean_0_std_1(digits):
    x = all_x(digits)
    assert x.dtype == torch.uint8 and x.shape == (1797, 1, 8, 8)  # a quarter of float32's bytes
    assert torch.equal(torch.sort(x.reshape(-1)).values, torch.sort(load_pool("digits").x.reshape(-1)).values)
    inputs = digits.normalise(x)
    assert inputs.dtype == torch.float32
    assert float(inputs.mean()) == pytest.approx(0.0, abs=1e-5) and float(inputs.std(unbiased=False)) == pytest.approx(1.0, abs=1e-4)
    labels = np.concatenate([np.concatenate([c.y_train, c.y_val, c.y_test]) for c in digits.clients])
    assert np.array_equal(np.bincount(labels), np.bincount(load_pool("digits").y.numpy()))
    assert digits.clients[0].y_train.dtype == torch.int64


def test_label_histograms_count_each_split(digits):
    hist = digits.label_histograms("val")
    assert hist.shape == (20, 10)
    assert hist.sum(axis=1).tolist() == [len(c.y_val) for c in digits.clients]
    assert hist[3].tolist() == np.bincount(digits.clients[3].y_val.numpy(), minlength=10).tolist()
    with pytest.raises(ValueError, match=r"^split must be one of train, val, test; got 'dev'$"):
        digits.label_histograms("dev")


def test_same_seed_same_tensors_other_seed_other_split():
    spec = DataSpec(num_clients=5, samples={"per_client": 30}, partition=({"name": "dirichlet", "alpha": 0.5}, {"name": "rotation", "groups": 2}))
    first, again, other = (build_federated_data(spec, s) for s in (4, 4, 5))
    for a, b in zip(first.clients, again.clients):
        for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
            assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(first.clients[0].x_train, other.clients[0].x_train)


def test_rotation_is_applied_to_each_group_and_changes_nothing_else():
    base = dict(num_clients=8, samples={"per_client": 20}, partition=({"name": "dirichlet", "alpha": 0.3},))
    plain = build_federated_data(DataSpec(**base), seed=1)
    rotated_spec = DataSpec(**{**base, "partition": (*base["partition"], {"name": "rotation", "groups": 4})})
    rotated = build_federated_data(rotated_spec, seed=1)
    assert rotated.groups.tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and rotated.num_groups == 4
    for client, (p, r) in enumerate(zip(plain.clients, rotated.clients)):
        turns = client // 2
        for split in ("train", "val", "test"):
            assert torch.equal(getattr(r, f"x_{split}"), torch.rot90(getattr(p, f"x_{split}"), turns, dims=(-2, -1)))
            assert torch.equal(getattr(r, f"y_{split}"), getattr(p, f"y_{split}"))
    assert not torch.equal(rotated.clients[2].x_train, plain.clients[2].x_train)


def test_label_permutation_is_one_bijection_per_group():
    base = dict(num_clients=6, samples={"per_client": 60}, partition=({"name": "iid"},))
    plain = build_federated_data(DataSpec(**base), seed=2)
    spec = DataSpec(**{**base, "partition": ({"name": "iid"}, {"name": "label_permutation", "groups": 3})})
    permuted = build_federated_data(spec, seed=2)
    assert permuted.groups.tolist() == [0, 0, 1, 1, 2, 2]
    mappings = {}
    for p, q in zip(plain.clients, permuted.clients):
        assert torch.equal(p.x_train, q.x_train)
        for split in ("train", "val", "test"):
            for before, after in zip(getattr(p, f"y_{split}").tolist(), getattr(q, f"y_{split}").tolist()):
                assert mappings.setdefault((q.group, before), after) == after  # one mapping per group
    for group in range(3):
        mapping = {b: a for (g, b), a in mappings.items() if g == group}
        assert len(set(mapping.values())) == len(mapping)  # injective on the labels seen
        if group == 0:
            assert all(b == a for b, a in mapping.items())
    assert any(b != a for (g, b), a in mappings.items() if g == 1)


def test_composed_shifts_number_every_combination():
    spec = DataSpec(
        num_clients=8,
        samples={"per_client": 10},
        partition=({"name": "rotation", "groups": 2}, {"name": "iid"}, {"name": "label_permutation", "groups": 2, "assign": "cyclic"}),
    )
    data = build_federated_data(spec, seed=0)
    assert data.groups.tolist() == [0, 1, 0, 1, 2, 3, 2, 3] and data.num_groups == 4
    assert data.clients[5].group == 3


def test_majority_fraction_holds_on_real_digits():
    spec = DataSpec(num_clients=10, samples={"per_client": 100}, partition=({"name": "majority", "p": 0.6},))
    data = build_federated_data(spec, seed=0)
    whole = sum(data.label_histograms(s) for s in ("train", "val", "test"))
    assert (np.sort(whole, axis=1)[:, -2:].sum(axis=1) == 60).all()


def test_a_thousand_client_dirichlet_build_completes():
    spec = DataSpec(
        dataset="synthetic",
        options={"num_samples": 20_000, "dim": 10},
        num_clients=1000,
        samples={"total": 15_000, "distribution": "lognormal", "sigma": 1.0},
        partition=({"name": "dirichlet", "alpha": 0.1},),
    )
    data = build_federated_data(spec, seed=0)
    assert data.num_clients == 1000 and data.input_shape == (1, 1, 10)
    assert sum(len(c.y_train) + len(c.y_val) + len(c.y_test) for c in data.clients) == 15_000
    assert data.train_sizes.min() >= 1


def test_split_counts_and_minimum():
    assert split_counts(90, (0.6, 0.2, 0.2)) == (54, 18, 18)
    assert split_counts(89, (0.6, 0.2, 0.2)) == (53, 18, 18)
    assert split_counts(3, (0.6, 0.2, 0.2)) == (1, 1, 1)
    assert split_counts(7, (1.0, 0.0, 0.0)) == (7, 0, 0)
    assert minimum_client_size((0.6, 0.2, 0.2)) == 3
    assert minimum_client_size((1.0, 0.0, 0.0)) == 1
    assert minimum_client_size((0.8, 0.2, 0.0)) == 3  # size 2 rounds val to floor(0.4 + 0.5) = 0
    assert minimum_client_size((0.5, 0.5, 0.0)) == 2


def test_val_and_test_can_be_empty():
    data = build_federated_data(DataSpec(num_clients=2, samples={"per_client": 5}, split=(1.0, 0.0, 0.0)), seed=0)
    assert data.train_sizes.tolist() == [5, 5]
    assert data.clients[0].x_val.shape == (0, 1, 8, 8) and data.label_histograms("test").sum() == 0


def test_errors_name_the_field():
    with pytest.raises(PartitionError, match=r"^data\.split must be three fractions \(train, val, test\), each >= 0, summing to 1, with train > 0; got \(0\.5, 0\.2, 0\.2\)$"):
        check_split((0.5, 0.2, 0.2))
    with pytest.raises(PartitionError, match=r"^data\.split must be three fractions"):
        check_split((0.0, 0.5, 0.5))
    with pytest.raises(PartitionError, match=r"^data\.samples asks for 2000 samples in total \(20 clients x 100\) but the dataset pool has only 1797; data\.samples\.reuse lets several clients share a sample$"):
        build_federated_data(DataSpec(samples={"per_client": 100}), seed=0)
    with pytest.raises(PartitionError, match=r"^data\.samples\.per_client = 2 is below the minimum of 3 samples per client"):
        build_federated_data(DataSpec(samples={"per_client": 2}), seed=0)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0; got -1$"):
        build_federated_data(DataSpec(), seed=-1)
    with pytest.raises(PartitionError, match=r"^data\.samples must be a mapping like \{'per_client': 80\} or \{'total': 10000\}; got \[100\]$"):
        build_federated_data(DataSpec(samples=[100]), seed=0)
    with pytest.raises(PartitionError, match=r"^data\.split must be three fractions .*; got \(0\.6, 0\.4\)$"):
        build_federated_data(DataSpec(split=(0.6, 0.4)), seed=0)


def test_spec_is_picklable_and_data_moves_between_devices(digits):
    spec = DataSpec(partition=({"name": "dirichlet", "alpha": 0.4}, {"name": "rotation", "groups": 4}))
    assert pickle.loads(pickle.dumps(spec)) == spec
    moved = digits.to("cpu")
    assert isinstance(moved.clients[0], ClientData) and moved.description == digits.description
    assert torch.equal(moved.clients[0].x_train, digits.clients[0].x_train)


def test_splits_whose_client_sizes_are_an_outcome_build_on_digits():
    """per_class_dirichlet and random_classes decide the client sizes; every sample is dealt once."""
    for step in ({"name": "per_class_dirichlet", "alpha": 0.4}, {"name": "random_classes", "classes": 2}):
        data = build_federated_data(DataSpec(dataset="digits", num_clients=10, samples={"total": "all"}, partition=(step,)), seed=0)
        sizes = [len(c.y_train) + len(c.y_val) + len(c.y_test) for c in data.clients]
        assert sum(sizes) == 1797 and len(set(sizes)) > 1, step
        if step["name"] == "random_classes":
            assert all(len(set(torch.cat([c.y_train, c.y_val, c.y_test]).tolist())) == 2 for c in data.clients)


def test_every_client_split_is_a_view_into_one_tensor():
    """No per-client copies: the samples of all clients and splits share one storage (and so do the labels)."""
    data = build_federated_data(DataSpec(dataset="digits", num_clients=6, samples={"per_client": 20}), seed=1)
    xs = {getattr(c, f"x_{s}").untyped_storage().data_ptr() for c in data.clients for s in ("train", "val", "test")}
    ys = {getattr(c, f"y_{s}").untyped_storage().data_ptr() for c in data.clients for s in ("train", "val", "test")}
    assert len(xs) == 1 and len(ys) == 1


def test_clients_are_views_made_when_asked_for_and_the_same_objects_while_remembered(digits, monkeypatch):
    from wirelessfl.learning.data.federated import ClientViews

    clients = digits.clients
    assert isinstance(clients, ClientViews) and len(clients) == 20
    assert not ClientViews(clients.x, clients.y, clients.bounds, clients.group_of)._made  # none made until asked for
    first = clients[3]
    assert clients[3] is first and clients[-17] is first  # the same tensors: the engine's copies are found by identity
    assert first.x_train.untyped_storage().data_ptr() == clients.x.untyped_storage().data_ptr()  # a view, no copy
    a, b, c, d = clients.bounds[3]
    assert torch.equal(first.x_val, clients.x[b:c]) and torch.equal(first.y_test, clients.y[c:d]) and len(first.y_train) == b - a
    assert [x.group for x in clients[2:5]] == digits.groups[2:5].tolist()
    with pytest.raises(IndexError, match=r"^client 20 of 20$"):
        clients[20]
    monkeypatch.setattr(ClientViews, "MEMO", 2)
    small = ClientViews(clients.x, clients.y, clients.bounds, clients.group_of)
    one, two = small[0], small[1]
    assert small[0] is one  # 0 is now the most recent: 1 goes first
    small[2]
    assert small[0] is one and small[1] is not two and len(small._made) == 2
    assert torch.equal(small[1].x_train, two.x_train)


def test_sizes_and_histograms_come_from_the_bounds_as_from_every_client(digits):
    listed = replace(digits, clients=[digits.clients[i] for i in range(digits.num_clients)])
    for split in ("train", "val", "test"):
        assert digits.sizes(split).tolist() == listed.sizes(split).tolist() == [len(c.labels(split)) for c in listed.clients]
        assert np.array_equal(digits.label_histograms(split), listed.label_histograms(split))
    views = type(digits.clients)(digits.clients.x, digits.clients.y, digits.clients.bounds, digits.clients.group_of)
    fresh = replace(digits, clients=views)
    fresh.sizes("train"), fresh.label_histograms("val"), fresh.groups, fresh.train_sizes
    assert not views._made  # no client made for them
    with pytest.raises(ValueError, match=r"^split must be one of train, val, test; got 'dev'$"):
        digits.sizes("dev")


def test_a_pickled_or_moved_federation_keeps_one_tensor_and_no_remembered_clients(digits):
    import pickle

    digits.clients[0]
    again = pickle.loads(pickle.dumps(digits))
    assert not again.clients._made and np.array_equal(again.clients.bounds, digits.clients.bounds)
    assert torch.equal(again.clients[5].x_test, digits.clients[5].x_test)
    moved = digits.to("cpu")
    assert type(moved.clients) is type(digits.clients) and torch.equal(moved.clients[7].y_val, digits.clients[7].y_val)


def test_the_last_federation_is_handed_out_again_while_unmodified():
    spec = DataSpec(num_clients=5)
    first = build_federated_data(spec, seed=3)
    assert build_federated_data(DataSpec(num_clients=5), seed=3) is first  # the preview, the preflight and the run
    assert build_federated_data(spec, seed=4) is not first
    again = build_federated_data(spec, seed=3)
    assert again is not first and torch.equal(again.clients[2].x_val, first.clients[2].x_val)  # built again, the same
    again.clients[0].y_train[0] += 1  # an in-place change through a client's view
    fresh = build_federated_data(spec, seed=3)
    assert fresh is not again and torch.equal(fresh.clients[0].y_train, first.clients[0].y_train)


def _dirichlet(clients: int, samples: dict, shifts: tuple = ()) -> DataSpec:
    return DataSpec(num_clients=clients, samples=samples, partition=({"name": "dirichlet", "alpha": 0.4}, *shifts))


def test_reuse_deals_a_population_that_fits_as_without_it():
    """One pass over the pool is the deal without reuse: the same samples, the same splits, bit for bit."""
    plain = build_federated_data(_dirichlet(100, {"per_client": 15}), seed=2)
    reused = build_federated_data(_dirichlet(100, {"per_client": 15, "reuse": 4}), seed=2)
    assert reused.clients.rows is None and reused.description == plain.description
    for a, b in zip(plain.clients, reused.clients):
        assert all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"))


def test_a_population_larger_than_its_pool_indexes_the_pool_in_passes():
    """1,797 digits, 15 a client: a pass holds 119 clients, so 500 clients take 5 passes of 100. No client holds a
    pool sample twice, no sample goes to two clients of one pass, so none to more than 5; the federation keeps the
    pool, not 7,500 dealt samples, and every client's splits are those pool rows."""
    data = build_federated_data(_dirichlet(500, {"per_client": 15, "reuse": 5}), seed=0)
    views = data.clients
    pool = build_federated_data(DataSpec(num_clients=1, samples={"total": "all"}), seed=0).clients
    assert views.rows is not None and len(views.x) == 1797 == data.held_samples
    assert "7500 samples in 5 passes over a pool of 1797" in data.description
    for start in range(0, 500, 100):
        block = views.rows[views.bounds[start, 0]:views.bounds[start + 99, 3]]
        assert len(np.unique(block)) == len(block)  # within a pass no sample twice
    assert np.bincount(views.rows).max() <= 5
    assert all(len(np.unique(views.rows[a:d])) == d - a for a, _, _, d in views.bounds)
    assert torch.equal(views.x.sort(0).values, pool.x.sort(0).values)  # the pool itself, as loaded
    client = views[123]
    a, b, c, d = views.bounds[123]
    assert torch.equal(client.x_val, views.x[torch.from_numpy(views.rows[b:c])]) and torch.equal(client.y_test, views.y[torch.from_numpy(views.rows[c:d])])
    listed = replace(data, clients=[views[i] for i in range(len(views))])
    for split in ("train", "val", "test"):
        assert np.array_equal(data.label_histograms(split), listed.label_histograms(split))
        assert np.array_equal(data.sizes(split), listed.sizes(split))
    again = pickle.loads(pickle.dumps(data))
    assert np.array_equal(again.clients.rows, views.rows) and torch.equal(again.clients[7].x_train, views[7].x_train)
    assert torch.equal(data.to("cpu").clients[9].y_val, views[9].y_val)


def test_shifted_clients_dealt_more_than_their_pool_get_their_own_copy():
    """A shift transforms samples per group, so a reused pool is copied out as without reuse (rows: None)."""
    data = build_federated_data(_dirichlet(240, {"per_client": 15, "reuse": 3}, ({"name": "rotation", "groups": 2},)), seed=0)
    assert data.clients.rows is None and len(data.clients.x) == 240 * 15 == data.held_samples
    assert data.num_groups == 2


def test_gathered_clients_are_remembered_within_a_byte_bound(monkeypatch):
    from wirelessfl.learning.data.federated import ClientViews

    data = build_federated_data(_dirichlet(300, {"per_client": 15, "reuse": 3}), seed=0)
    per_client = 15 * 64 + 15 * 8  # uint8 8x8 images and int64 labels
    monkeypatch.setattr(ClientViews, "MEMO_BYTES", 3 * per_client)
    views = ClientViews(data.clients.x, data.clients.y, data.clients.bounds, data.clients.group_of, data.clients.rows)
    first = views[0]
    assert views[0] is first and views._made_bytes == per_client
    views[1], views[2]
    assert views[0] is first and views._made_bytes == 3 * per_client
    views[3]  # over the bound: the least recently asked for (client 1) goes
    assert list(views._made) == [2, 0, 3] and views._made_bytes == 3 * per_client


def test_a_run_on_clients_indexing_their_pool_equals_the_run_on_a_dealt_copy(monkeypatch):
    """The rows are only where the samples are kept: FedAvg and FedPer over 300 clients dealt from digits in 3 passes
    write the same trace, bit for bit, as over a federation holding a copy of every dealt sample."""
    import wirelessfl
    from wirelessfl.learning.data import federated

    scenario = {
        "name": "reuse", "rounds": 3, "seeds": [0], "device": "cpu",
        "data": {"clients": 300, "samples": {"per_client": 15, "reuse": 3}, "partition": [{"name": "dirichlet", "alpha": 0.4}]},
        "model": {"name": "mlp", "options": {"hidden": [16]}},
        "training": {"batch_size": 8, "lr": 0.05, "participation": 0.1},
        "evaluation": {"clients": 40},
        "algorithms": [{"name": "fedavg"}, {"name": "fedper"}],
    }
    federated._LAST_BUILT.clear()
    indexed = wirelessfl.simulate(scenario).trace
    original = federated._clients

    def dealt(*args, **kwargs):
        views = original(*args, **kwargs)
        assert views.rows is not None
        rows = torch.from_numpy(views.rows)
        return federated.ClientViews(views.x[rows], views.y[rows], views.bounds, views.group_of)

    monkeypatch.setattr(federated, "_clients", dealt)
    federated._LAST_BUILT.clear()
    copied = wirelessfl.simulate(scenario).trace
    federated._LAST_BUILT.clear()
    assert len(indexed) == 2 * 4
    pd.testing.assert_frame_equal(indexed.drop(columns=["wall_s"], errors="ignore"), copied.drop(columns=["wall_s"], errors="ignore"))
