"""Shared fixtures: small digits federations whose clients hold *different* amounts of data.

Equal client sizes hide every n_j / sum n weighting (FedAvg, eq. 6, CFL's mean
update): a plain mean gives the same numbers. ``federation`` cuts each client's
training split to the sizes a test asks for, so the weights are known by hand.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from wirelessfl.algorithms.base import Context
from wirelessfl.learning.data.federated import DataSpec, FederatedData, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine
from wirelessfl.learning.models import get_architecture


def cut_train_splits(data: FederatedData, sizes: list[int]) -> FederatedData:
    """The same federation with client i's training split cut to its first ``sizes[i]`` samples."""
    if len(sizes) != data.num_clients or any(n > len(c.y_train) for c, n in zip(data.clients, sizes)):
        raise ValueError(f"sizes {sizes} do not fit train splits {data.train_sizes.tolist()}")
    clients = [replace(c, x_train=c.x_train[:n], y_train=c.y_train[:n]) for c, n in zip(data.clients, sizes)]
    return replace(data, clients=clients)


@pytest.fixture(scope="session")
def federation():
    """``federation(train_sizes, partition, per_client, train, seed)`` -> a ``Context`` on digits + MLP."""

    def build(train_sizes, partition, per_client, train, seed):
        spec = DataSpec(dataset="digits", num_clients=len(train_sizes), samples={"per_client": per_client}, partition=partition)
        data = cut_train_splits(build_federated_data(spec, seed=0), list(train_sizes))
        assert data.train_sizes.tolist() == list(train_sizes)
        arch = get_architecture("mlp", data.input_shape, data.num_classes)
        return Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), train, seed=seed)

    return build

