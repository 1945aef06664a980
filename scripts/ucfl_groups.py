"""Does UCFL's weight-estimation round find the true groups? (docs/research/ucfl-investigation.md)

Runs only the special round of ``ucfl`` (plus optional FedAvg warm-up) on
digits or EMNIST with rotation groups and a splitter, then reports the mean self weight
w_ii, the mean weight on same-group peers, and the adjusted Rand index of the
k-means streams (k = true number of groups) against the true groups. Uses
training splits only (no test data).

    python scripts/ucfl_groups.py --clients 20 --per-client 80 --seeds 0 1
    python scripts/ucfl_groups.py --dataset emnist --root DATA --per-client 834 --seeds 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics import adjusted_rand_score

from wirelessfl.algorithms.base import Context
from wirelessfl.algorithms.ucfl import UserCentricFL
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

SPLITTERS = {
    "iid": {"name": "iid"},
    "dir100": {"name": "dirichlet", "alpha": 100.0},
    "dir0.4": {"name": "dirichlet", "alpha": 0.4},
}

KNOBS = {
    "paper (n_k=n_i/10, K=10)": {},
    "n_k=n_i/2, K=2": {"sigma_batch_size": 0.5, "sigma_batches": 2},
    "n_k=2": {"sigma_batch_size": 2},
    "temperature 10": {"temperature": 10.0},
    "warm-up 5": {"warmup_rounds": 5},
    "body only": {"gradient_layers": "body"},
    "body + warm-up 5": {"gradient_layers": "body", "warmup_rounds": 5},
    "warm-up 15": {"warmup_rounds": 15},
    "warm-up 15 + temperature 10": {"warmup_rounds": 15, "temperature": 10.0},
    "temperature 0.03": {"temperature": 0.03},
    "body + temperature 0.03": {"gradient_layers": "body", "temperature": 0.03},
    "spectral + temperature 0.03": {"stream_formation": "spectral", "temperature": 0.03},
    "spectral + body + temp 0.03": {"stream_formation": "spectral", "gradient_layers": "body", "temperature": 0.03},
    "spectral": {"stream_formation": "spectral"},
    "spectral + temperature 0.3": {"stream_formation": "spectral", "temperature": 0.3},
    "spectral + temperature 0.1": {"stream_formation": "spectral", "temperature": 0.1},
    "offdiag + temperature 0.3": {"stream_formation": "kmeans_offdiag", "temperature": 0.3},
    "spectral + body": {"stream_formation": "spectral", "gradient_layers": "body"},
}


DATASET_OPTIONS = {"digits": {}, "emnist": {"pool": ("test",)}}


def measure(splitter: str, knobs: dict, clients: int, per_client: int, groups: int, seed: int, model: str, dataset: str, root: str | None) -> dict:
    spec = DataSpec(
        dataset=dataset,
        root=root,
        options=DATASET_OPTIONS[dataset],
        num_clients=clients,
        samples={"per_client": per_client},
        partition=(SPLITTERS[splitter], {"name": "rotation", "groups": groups}),
    )
    data = build_federated_data(spec, seed=seed)
    arch = get_architecture(model, data.input_shape, data.num_classes)
    train = TrainConfig(epochs=1, batch_size=16, lr=0.1, momentum=0.9)
    ctx = Context(data, arch, LockstepEngine(arch, "cpu"), train, seed=seed)
    algo = UserCentricFL(ctx, streams=groups, **knobs)
    everyone = frozenset(range(clients))
    for round in range(1, knobs.get("warmup_rounds", 0) + 2):  # rounds count from 1; the last is the estimation
        algo.plan(round)
        algo.step(round, everyone)
    w = algo.weights
    same = (data.groups[:, None] == data.groups[None, :]) & ~np.eye(clients, dtype=bool)
    return {
        "self": float(np.diag(w).mean()),
        "same_group": float((w * same).sum(axis=1).mean()),
        "ari": float(adjusted_rand_score(data.groups, algo.assignment)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--per-client", type=int, default=80)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--splitters", nargs="+", default=list(SPLITTERS))
    parser.add_argument("--knobs", nargs="+", default=list(KNOBS))
    parser.add_argument("--dataset", choices=sorted(DATASET_OPTIONS), default="digits")
    parser.add_argument("--root", default=None, help="dataset root (see ../shared/data/README.md); digits needs none")
    args = parser.parse_args()
    print(f"{args.dataset}, {args.clients} clients x {args.per_client} samples, {args.groups} rotation groups, {args.model}, seeds {args.seeds}")
    print(f"{'splitter':8} {'knobs':28} {'w_ii':>6} {'w same':>7} {'ARI':>12}  time")
    for splitter in args.splitters:
        for label in args.knobs:
            knobs = KNOBS[label]
            start = time.perf_counter()
            rows = [measure(splitter, knobs, args.clients, args.per_client, args.groups, s, args.model, args.dataset, args.root) for s in args.seeds]
            ari = [r["ari"] for r in rows]
            print(
                f"{splitter:8} {label:28} {np.mean([r['self'] for r in rows]):6.3f} "
                f"{np.mean([r['same_group'] for r in rows]):7.3f} {np.mean(ari):5.2f} ({min(ari):.2f}) "
                f"{time.perf_counter() - start:5.1f}s"
            )


if __name__ == "__main__":
    main()
