"""How skewed is each user's label distribution in a scenario? (docs/research/reproduction-notes.md §5)

Builds the scenario's data for one seed (no training) and prints, as medians
over users: the number of classes present, the effective number of classes
1/sum(q^2) of the user's label proportions q, and the share of its five
largest classes. All of the user's splits are counted. ``--block B`` also
prints the medians for users 0..B-1, B..2B-1, ...

    python scripts/label_skew.py scenarios/paper/emnist-label-shift.yaml scenarios/paper/emnist-covariate-label-shift.yaml
    python scripts/label_skew.py scenarios/paper/emnist-covariate-label-shift.yaml --block 20
"""

from __future__ import annotations

import argparse

import numpy as np

from wirelessfl.config import load_scenario
from wirelessfl.learning.data.federated import build_federated_data


def label_skew(histograms: np.ndarray) -> dict[str, float]:
    """Medians over users of the classes present, 1/sum(q^2) and the top-5 share; one row of counts per user."""
    counts = histograms.astype(float)
    q = counts / counts.sum(axis=1, keepdims=True)
    return {
        "classes present": float(np.median((counts > 0).sum(axis=1))),
        "effective classes": float(np.median(1.0 / (q**2).sum(axis=1))),
        "top-5 share": float(np.median(np.sort(q, axis=1)[:, ::-1][:, :5].sum(axis=1))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block", type=int, default=0, help="also report consecutive blocks of this many users")
    args = parser.parse_args()
    for path in args.scenarios:
        data = build_federated_data(load_scenario(path).data_spec(), seed=args.seed)
        histograms = sum(data.label_histograms(split) for split in ("train", "val", "test"))
        skew = label_skew(histograms)
        print(f"{path}: {data.num_clients} users, {data.num_classes} classes, seed {args.seed}")
        print("  " + ", ".join(f"{name} {value:.2f}" for name, value in skew.items()))
        for start in range(0, data.num_clients, args.block) if args.block > 0 else ():
            block = label_skew(histograms[start : start + args.block])
            print(f"  users {start}-{min(start + args.block, data.num_clients) - 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in block.items()))


if __name__ == "__main__":
    main()
