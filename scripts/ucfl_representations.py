"""Is the group structure in the gradients at all, or only hidden by eq. 6? (docs/research/ucfl-investigation.md)

Takes UCFL's gradients and eq. 7 variances at theta_hat (after ``--warmup``
FedAvg rounds) on EMNIST with 4 rotation groups and Dirichlet label shift, and
reports the adjusted Rand index of k-means (k = 4) against the true groups on
several representations of the same data: the rows of W (eq. 6) at several
temperatures, rows of log W, rows of Delta, rows of the cosine-similarity
matrix, and the same two on body-only gradients. Training splits only.

    python scripts/ucfl_representations.py --root DATA --alpha 0.4 --seed 0 --warmup 15
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from wirelessfl.algorithms.base import Context
from wirelessfl.algorithms.ucfl import UserCentricFL, collaboration_weights, squared_distances, stream_mixing
from wirelessfl.learning.data.federated import DataSpec, build_federated_data
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="prepared data root (../shared/data/prepare.py ROOT)")
    parser.add_argument("--alpha", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--per-client", type=int, default=834, help="834 x 0.6 train split = 500 training samples")
    args = parser.parse_args()
    start = time.perf_counter()
    spec = DataSpec(
        dataset="emnist",
        root=args.root,
        options={"pool": ("test",)},
        num_clients=args.clients,
        samples={"per_client": args.per_client},
        partition=({"name": "dirichlet", "alpha": args.alpha}, {"name": "rotation", "groups": 4}),
    )
    data = build_federated_data(spec, seed=args.seed)
    arch = get_architecture("lenet5", data.input_shape, data.num_classes)
    ctx = Context(data, arch, LockstepEngine(arch, "cpu"), TrainConfig(epochs=1, batch_size=32, lr=0.1, momentum=0.9), seed=args.seed)
    algo = UserCentricFL(ctx, streams=4, warmup_rounds=args.warmup)
    everyone = frozenset(range(args.clients))
    for round in range(args.warmup):
        algo.plan(round)
        algo.step(round, everyone)
    grads, sigma2 = algo.gradient_statistics(algo.population_model(), list(range(args.clients)), args.warmup)
    sizes = ctx.sizes()

    def ari(labels: np.ndarray) -> float:
        return round(float(adjusted_rand_score(data.groups, labels)), 2)

    def kmeans_rows(x: np.ndarray) -> np.ndarray:
        return KMeans(4, n_init=10, random_state=0).fit_predict(x)

    def cosine(g: np.ndarray) -> np.ndarray:
        unit = g / np.linalg.norm(g, axis=1, keepdims=True)
        return unit @ unit.T

    weights = collaboration_weights(grads, sigma2, sizes)
    result = {"mean w_ii": round(float(np.diag(weights).mean()), 3), "W (eq. 6)": ari(stream_mixing(weights, 4, 0)[1])}
    for temperature in (10.0, 100.0, 1000.0):
        result[f"W, T={temperature:g}"] = ari(stream_mixing(collaboration_weights(grads, sigma2, sizes, temperature), 4, 0)[1])
    result["log W"] = ari(kmeans_rows(np.log(np.maximum(weights, 1e-300))))
    result["Delta"] = ari(kmeans_rows(squared_distances(grads)))
    result["cosine"] = ari(kmeans_rows(cosine(grads)))
    body = (~arch.head_mask()).numpy()
    result["body Delta"] = ari(kmeans_rows(squared_distances(grads[:, body])))
    result["body cosine"] = ari(kmeans_rows(cosine(grads[:, body])))
    print(f"alpha={args.alpha} seed={args.seed} warmup={args.warmup}: {result} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
