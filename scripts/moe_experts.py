"""Where a finished FedMoE run loses accuracy: the gated mixture against its own experts.

Loads a run's final FedMoE checkpoint of every seed (or of ``--seed``) and, for
every client on its test split, measures the accuracy of the gated mixture (what
the trace reports), of the client's chosen cluster model (IFCA's prediction), of
its local expert, of the best single expert picked per client with hindsight (an
upper bound for any gate that picks one expert), and the gate's mean weight on
the local expert. Prints one line per seed (means over the clients), then the mean
over seeds with the half-width of its 95% interval. The checkpoints are read
through the safe loader (wirelessfl.checkpoint) and hold the models only when the
run was made with ``wirelessfl simulate --keep-models``.

    python scripts/moe_experts.py RUN_DIR [--curve fedmoe] [--seed S]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from wirelessfl import checkpoint
from wirelessfl.config import load_scenario
from wirelessfl.results.intervals import interval_half_width
from wirelessfl.run.build import build_units
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES

COLUMNS = ("gated mixture", "chosen cluster model", "local expert", "best single expert per client", "gate weight on the local expert")


def measure(run_dir: Path, scenario, seed: int, curve: str) -> np.ndarray:
    """The five columns for one seed: accuracies in %, the gate weight as a fraction."""
    unit = next(u for u in build_units(scenario, seed, torch.device("cpu"), False) if u.curve.curve == curve)
    path = run_dir / "checkpoints" / f"seed{seed}__{curve}.done{checkpoint.SUFFIX}"
    state = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES)
    if "algorithm" not in state:
        raise SystemExit(f"{path}: no models in it; re-run the scenario with `wirelessfl simulate --keep-models`")
    unit.restore(state)
    algo = unit.algorithm
    clients = np.arange(algo.ctx.num_clients)
    sets = algo.ctx.test_sets(clients)
    cluster = algo.expert_logits(algo.models, clients, sets)
    local = algo.ctx.engine.logits(algo.local, sets)
    rows = []
    for i, (x, y) in enumerate(sets):
        experts = torch.cat([cluster[i], local[i].unsqueeze(1)], dim=1)  # [n, J+1, C]
        correct = (experts.argmax(-1) == y.unsqueeze(1)).double().mean(0)  # per expert
        weights = algo.gate.weights(algo.gates[i : i + 1], x.reshape(1, len(x), -1))[0].mean(0)
        chosen = int(algo.assignment[i])
        rows.append((float(correct[chosen]), float(correct[-1]), float(correct.max()), float(weights[-1])))
    mixture = algo.evaluate("test").accuracy.double().mean().item()
    chosen_acc, local_acc, best_acc, local_weight = np.mean(rows, axis=0)
    return np.array([100 * mixture, 100 * chosen_acc, 100 * local_acc, 100 * best_acc, local_weight])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--curve", default="fedmoe")
    parser.add_argument("--seed", type=int, help="one seed of the run (default: every seed)")
    args = parser.parse_args()
    scenario = load_scenario(args.run_dir / "scenario.yaml")
    seeds = [args.seed] if args.seed is not None else list(scenario.seeds)
    per_seed = np.array([measure(args.run_dir, scenario, seed, args.curve) for seed in seeds])
    for seed, row in zip(seeds, per_seed):
        print(f"{args.run_dir.name} {args.curve} seed {seed}: " + ", ".join(_cell(name, value) for name, value in zip(COLUMNS, row)))
    if len(seeds) > 1:
        print(f"{args.run_dir.name} {args.curve}, mean over {len(seeds)} seeds ± 95% interval: " + ", ".join(
            _cell(name, value, interval_half_width(per_seed[:, k])) for k, (name, value) in enumerate(zip(COLUMNS, per_seed.mean(0)))))


def _cell(name: str, value: float, half: float | None = None) -> str:
    digits = 2 if name == COLUMNS[-1] else 1
    return f"{name} {value:.{digits}f}" + ("" if half is None else f" ± {half:.{digits}f}")


if __name__ == "__main__":
    main()
