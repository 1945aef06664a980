"""Making a seed's units: its data, its model, one engine, and one ``Unit`` per curve (x profile where needed).

Building is cheap next to training and raises every configuration error the
schema cannot see (a missing dataset, a bad hyper-parameter), so the doors into
a run build the first seed's units before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import torch

from wirelessfl.config import Scenario
from wirelessfl.learning.client_store import ClientStores
from wirelessfl.learning.data.federated import FederatedData, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.plugins import from_environment
from wirelessfl.run.curves import curves_of, has_budgets, profiles_can_change_training
from wirelessfl.run.keys import unit_key
from wirelessfl.run.unit import Unit


def resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda was requested but torch sees no CUDA device; use auto or cpu")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def build_units(
    scenario: Scenario, seed: int, device: torch.device | None = None, per_profile: bool | None = None, shards=None,
    data: FederatedData | None = None, first: bool = False, client_store: str | None = None, store_root: Path | None = None,
) -> list[Unit]:
    """Data, model and one ``Unit`` per curve (x profile when training per profile) for ``seed``.

    ``shards`` (e.g. ``learning.ray_shards.RayShards``) runs the engine's training groups elsewhere; ``data``
    is ``seed``'s when the caller built it already; ``first`` builds only the first unit (the cost preview's probe).
    ``client_store`` (``memory`` or ``disk``; default: the scenario's ``client_store.where``, else memory) is where
    each unit's per-client state lives; on disk under ``store_root/<unit key>`` (a temporary folder without one).
    """
    dev = device if device is not None else resolve_device(scenario.device)
    profiles = scenario.profiles()
    budgets = has_budgets(scenario)
    if per_profile is None:
        per_profile = profiles_can_change_training(profiles, budgets=budgets)
    data = (data if data is not None else build_federated_data(scenario.data_spec(), seed)).to(dev)
    arch = get_architecture(scenario.model.name, data.input_shape, data.num_classes, scenario.model.head, **scenario.model.options)
    engine = LockstepEngine(arch, dev, accelerators=from_environment(), normalisation=data.normalisation)
    if shards is not None:
        shards.attach(engine)
    specs = [
        (curve, profile)
        for curve in curves_of(scenario)
        for profile in (profiles if per_profile or profiles_can_change_training(profiles, curve, budgets) else [None])
    ]
    where = client_store or (scenario.client_store.where if scenario.client_store is not None else "memory")

    path = scenario.client_store.path if scenario.client_store is not None else None

    def stores(curve, profile) -> ClientStores:
        directory = None if store_root is None else store_root / unit_key(seed, curve, profile)
        return ClientStores(where, directory, None if path is None else Path(path))

    return [Unit(scenario, curve, seed, data, engine, profile, stores(curve, profile)) for curve, profile in specs[:1 if first else None]]


def store_root(scenario: Scenario, run_dir: Path | None) -> Path | None:
    """Where a run's disk stores go: ``client_store.path/<run folder name>``, or ``run_dir/store``; None (temporary
    folders) for a run without a directory and no path."""
    path = scenario.client_store.path if scenario.client_store is not None else None
    if path is not None:
        return Path(path) / run_dir.name if run_dir is not None else None
    return Path(run_dir) / "store" if run_dir is not None else None
