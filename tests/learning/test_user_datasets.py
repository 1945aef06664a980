"""A user's dataset by import path (``data.dataset: pkg.mod:loader``) and the ``natural`` splitter.

The loader modules are written into ``tmp_path`` and imported from there, as a
researcher's own file outside the package would be. A process-pool sweep of a user's dataset is checked in
tests/algorithms/test_plugins.py, in one pool that also carries a user's method.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app
from wirelessfl.learning.data.datasets import DatasetError
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.data.partition import PartitionError

runner = CliRunner()

WRITERS = textwrap.dedent(
    '''
    """Six writers of 8x8 grey images; writer w writes mostly the digits w and w + 1 (a natural label skew)."""
    import numpy as np
    import torch

    def load(writers=6, per_writer=20, seed=0, as_tensors=False):
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.arange(writers) * 7 + 3, per_writer)  # ids need not be 0..K-1
        labels = (ids // 7 + rng.integers(0, 2, size=len(ids))) % 10
        images = rng.integers(0, 256, size=(len(ids), 8, 8), dtype=np.uint8)
        images[np.arange(len(ids)), labels % 8, :] = 255  # a stripe per class: learnable
        if as_tensors:
            return torch.from_numpy(images), torch.from_numpy(labels), torch.from_numpy(ids)
        return images, labels, ids

    def no_ids(n=60):
        rng = np.random.default_rng(1)
        return rng.normal(size=(n, 5)).astype(np.float32), rng.integers(0, 3, size=n)

    def returns(kind):
        n = 10
        x, y = np.zeros((n, 4), np.float32), np.zeros(n, np.int64)
        return {
            "one": (x,),
            "dict": {"x": x, "y": y},
            "list_inputs": ([[0.0]] * n, y),
            "short_labels": (x, y[:-1]),
            "float_labels": (x, y.astype(np.float32)),
            "negative_label": (x, np.array([0] * 9 + [-1])),
            "huge_label": (x, np.array([0] * 9 + [10**9])),
            "nan_input": (np.where(np.arange(n)[:, None] == 4, np.nan, x).astype(np.float32), y),
            "int_inputs": (np.zeros((n, 4), np.int32), y),
            "five_axes": (np.zeros((n, 1, 1, 1, 4), np.float32), y),
            "id_matrix": (x, y, np.zeros((n, 2), np.int64)),
        }[kind]

    def broken():
        raise RuntimeError("the archive is corrupt\\nsecond line")

    NOT_CALLABLE = 3
    '''
)


@pytest.fixture
def loaders(tmp_path, monkeypatch):
    """A module ``wfl_user_writers`` in ``tmp_path``, importable by name."""
    (tmp_path / "wfl_user_writers.py").write_text(WRITERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "wfl_user_writers"
    sys.modules.pop("wfl_user_writers", None)


def _spec(loaders, attribute="load", clients=6, partition=({"name": "natural"},), **options):
    return DataSpec(dataset=f"{loaders}:{attribute}", options=options, num_clients=clients, partition=partition)


def test_natural_partition_gives_each_client_id_exactly_its_own_samples(loaders):
    data = build_federated_data(_spec(loaders), seed=0)
    images, labels, ids = sys.modules[loaders].load()
    assert data.num_clients == 6 and data.input_shape == (1, 8, 8) and data.num_classes == 7  # labels 0..6: the largest label + 1
    for client, writer in enumerate(sorted(set(ids))):  # sorted ids -> clients 0, 1, ...
        own = labels[ids == writer]
        got = torch.cat([data.clients[client].y_train, data.clients[client].y_val, data.clients[client].y_test]).numpy()
        assert sorted(got) == sorted(own)  # all its samples, nobody else's
        assert len(data.clients[client].y_train) == 12  # 20 samples -> 12/4/4
    again = build_federated_data(_spec(loaders), seed=0)
    assert all(torch.equal(a.x_train, b.x_train) for a, b in zip(data.clients, again.clients))


def test_tensors_and_arrays_give_the_same_data(loaders):
    from_arrays = build_federated_data(_spec(loaders), seed=3)
    from_tensors = build_federated_data(_spec(loaders, as_tensors=True), seed=3)
    for a, b in zip(from_arrays.clients, from_tensors.clients):
        assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)


def test_uint8_inputs_are_normalised_and_float_features_kept(loaders):
    pixels = build_federated_data(_spec(loaders), seed=0)
    x = torch.cat([c.x_train for c in pixels.clients] + [c.x_val for c in pixels.clients] + [c.x_test for c in pixels.clients])
    assert x.dtype == torch.uint8  # stored as given; normalised where a model gets them
    inputs = pixels.normalise(x)
    assert abs(float(inputs.mean())) < 1e-4 and abs(float(inputs.std()) - 1) < 1e-2
    features = build_federated_data(_spec(loaders, "no_ids", clients=4, partition=({"name": "iid"},)), seed=0)
    raw, _ = sys.modules[loaders].no_ids()
    assert features.input_shape == (1, 1, 5) and features.num_classes == 3
    rows = {tuple(r) for r in raw.tolist()}
    assert all(tuple(r) in rows for r in features.clients[0].x_train.reshape(-1, 5).tolist())  # used as they are


def test_a_user_dataset_runs_by_import_path_through_simulate(loaders, tmp_path):
    doc = {
        "name": "writers", "rounds": 2, "device": "cpu", "target_accuracy": 0.3,
        "data": {"dataset": f"{loaders}:load", "options": {"writers": 6, "per_writer": 20}, "clients": 6, "partition": [{"name": "natural"}]},
        "model": {"name": "mlp"}, "training": {"batch_size": 8},
        "algorithms": [{"name": "fedavg"}, {"name": "local"}], "networks": [{"preset": "wired"}],
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    trace = pd.read_csv(out / "trace.csv")
    assert set(trace["algorithm"]) == {"fedavg", "local"} and trace["avg_acc"].between(0, 1).all()


def _cli_error(tmp_path, data: dict) -> str:
    doc = {"name": "bad", "rounds": 1, "device": "cpu", "data": data, "model": {"name": "mlp"},
           "algorithms": [{"name": "fedavg"}], "networks": [{"preset": "wired"}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "never"
    result = runner.invoke(app, ["simulate", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 2, result.output
    assert not out.exists()  # nothing written
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"dataset": "wfl_no_such_module:load"}, "data.dataset 'wfl_no_such_module:load': cannot import module 'wfl_no_such_module' (ModuleNotFoundError: No module named 'wfl_no_such_module')"),
        ({"dataset": "wfl_user_writers:nothing"}, "data.dataset 'wfl_user_writers:nothing': module 'wfl_user_writers' has no attribute 'nothing'"),
        ({"dataset": "wfl_user_writers:NOT_CALLABLE"}, "data.dataset 'wfl_user_writers:NOT_CALLABLE': 'NOT_CALLABLE' is a int, not a callable returning (inputs, labels[, client_ids])"),
        ({"dataset": "wfl_user_writers:broken"}, "data.dataset 'wfl_user_writers:broken': the loader raised RuntimeError: the archive is corrupt"),
        ({"dataset": "wfl_user_writers:load", "clients": 4, "partition": [{"name": "natural"}]},
         "data.partition[0] (natural): the dataset's client ids name 6 clients, so data.clients must be 6; got 4"),
        ({"dataset": "wfl_user_writers:no_ids", "clients": 4, "partition": [{"name": "natural"}]},
         "data.partition[0] (natural): the dataset has no client id per sample; natural needs a dataset by import path whose loader returns (inputs, labels, client_ids)"),
        ({"dataset": "digits", "clients": 4, "partition": [{"name": "natural"}]},
         "data.partition[0] (natural): the dataset has no client id per sample; natural needs a dataset by import path whose loader returns (inputs, labels, client_ids)"),
        ({"dataset": "wfl_user_writers:load", "options": {"colour": True}, "clients": 6, "partition": [{"name": "natural"}]},
         "data.dataset 'wfl_user_writers:load': the loader raised TypeError: load() got an unexpected keyword argument 'colour'"),
    ],
)
def test_bad_user_datasets_are_one_line_and_write_nothing(loaders, tmp_path, data, expected):
    line = _cli_error(tmp_path, data)
    assert line.endswith(expected), line


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("one", "the loader must return (inputs, labels) or (inputs, labels, client_ids); got a tuple of 1"),
        ("dict", "the loader must return (inputs, labels) or (inputs, labels, client_ids); got a dict"),
        ("list_inputs", "the loader's inputs must be a numpy array or a torch tensor; got a list"),
        ("short_labels", "labels must be integers of shape [10] (one per input); got int64 of shape [9]"),
        ("float_labels", "labels must be integers of shape [10] (one per input); got float32 of shape [10]"),
        ("negative_label", "labels must be class indices from 0 to 99,999; got -1 at sample 9"),
        ("huge_label", "labels must be class indices from 0 to 99,999; got 1000000000 at sample 9"),
        ("nan_input", "inputs hold NaN or infinite values (sample 4)"),
        ("int_inputs", "inputs must be uint8 (pixels) or floating point (features); got int32"),
        ("five_axes", "inputs must have shape [N, D], [N, H, W] or [N, C, H, W] with N >= 1 and no empty axis; got [10, 1, 1, 1, 4]"),
        ("id_matrix", "client_ids must be integers or strings of shape [10] (one per input); got int64 of shape [10, 2]"),
    ],
)
def test_what_a_loader_returns_is_checked(loaders, kind, expected):
    spec = _spec(loaders, "returns", clients=2, partition=({"name": "iid"},), kind=kind)
    with pytest.raises(DatasetError) as caught:
        build_federated_data(spec, seed=0)
    assert str(caught.value) == f"data.dataset '{loaders}:returns': {expected}"


def test_natural_takes_the_whole_dataset_and_each_client_needs_its_minimum(loaders):
    with pytest.raises(PartitionError) as caught:
        build_federated_data(DataSpec(dataset=f"{loaders}:load", num_clients=6, samples={"per_client": 10}, partition=({"name": "natural"},)), seed=0)
    assert str(caught.value) == (
        "data.partition[0] (natural): every client gets all the samples of its client id, so data.samples must be "
        "{total: all} (the default); got {'per_client': 10}"
    )
    with pytest.raises(PartitionError) as caught:
        build_federated_data(_spec(loaders, per_writer=2), seed=0)
    assert str(caught.value) == (
        "data.partition[0] (natural): client 0 has 2 samples but every client needs at least 3 (one per train/val/test "
        "split); 6 client(s) are below it: drop them in the loader"
    )


def test_string_client_ids_are_numbered_in_sorted_order():
    from wirelessfl.learning.data.user_datasets import pool_from_arrays

    pool = pool_from_arrays("m:f", np.zeros((4, 3), np.float32), np.array([0, 1, 0, 1]), np.array(["f07", "f01", "f07", "f03"]))
    assert pool.client_ids.tolist() == [2, 0, 2, 1]


def test_the_memory_guard_leaves_a_user_loader_to_the_run_estimate(loaders):
    """Its size cannot be known before the loader runs: check_data says nothing (no crash), and check_run builds the
    data and measures it, so a run that does not fit is still refused before training."""
    from wirelessfl.config import parse_scenario
    from wirelessfl.cost import check_run
    from wirelessfl.learning.data.guard import check_data

    scenario = parse_scenario({"name": "w", "rounds": 1, "device": "cpu", "model": {"name": "mlp"},
                               "data": {"dataset": f"{loaders}:load", "clients": 6, "partition": [{"name": "natural"}]},
                               "algorithms": [{"name": "fedavg"}], "networks": [{"preset": "wired"}]})
    assert check_data(scenario, available=1) is None
    with pytest.raises(ValueError, match=r"^memory: this run needs about"):
        check_run(scenario, available=1, probe=False)
