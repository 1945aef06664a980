"""What did UCFL's k-means streams look like in a finished run? (docs/reproduction-notes.md §6)

Reads a run directory's finished UCFL checkpoints (through the safe loader,
wirelessfl.checkpoint) and its clients table and prints, per UCFL curve and
seed: the stream sizes, the adjusted Rand index of the streams against the true
groups, the mean self-weight w_ii, and the mean weight a user puts on its own
group's other members. Trains nothing. Finished checkpoints hold the algorithm
state only when the run was made with ``wirelessfl simulate --keep-models``.

    python scripts/ucfl_streams.py RUN_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score

from wirelessfl import checkpoint
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES


def stream_report(weights: np.ndarray, assignment: np.ndarray, groups: np.ndarray) -> dict[str, object]:
    """Stream sizes (largest first), ARI against ``groups``, mean w_ii, and mean weight on same-group peers."""
    same_group = groups[:, None] == groups[None, :]
    np.fill_diagonal(same_group, False)
    return {
        "stream sizes": sorted(np.bincount(assignment).tolist(), reverse=True),
        "ARI": float(adjusted_rand_score(groups, assignment)),
        "w_ii": float(np.mean(np.diag(weights))),
        "same-group peers": float(np.mean((weights * same_group).sum(axis=1))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    clients = pd.read_csv(args.run_dir / "clients.csv")
    suffix = f".done{checkpoint.SUFFIX}"
    for path in sorted((args.run_dir / "checkpoints").glob(f"seed*__ucfl*{suffix}")):
        seed = int(path.name.split("__")[0].removeprefix("seed"))
        groups = clients[clients.seed == seed].drop_duplicates("client").sort_values("client").group.to_numpy()
        saved = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES)
        if "algorithm" not in saved:
            raise SystemExit(f"{path}: no UCFL state in it; re-run the scenario with `wirelessfl simulate --keep-models`")
        state = saved["algorithm"]
        report = stream_report(np.asarray(state["weights"]), np.asarray(state["assignment"]), groups)
        sizes = report.pop("stream sizes")
        shown = sizes if len(sizes) <= 10 else sizes[:10] + ["..."]
        print(f"{path.name.removesuffix(suffix)}: streams {shown}, " + ", ".join(f"{k} {v:.3f}" for k, v in report.items()))


if __name__ == "__main__":
    main()
