"""What personalization buys a method over its own global model: each client's model against the server's.

Loads a run's checkpoint of a method that keeps a global model beside per-client ones (pFedMe, Ditto, APFL, ...)
and evaluates, on every training client's test and training split, the clients' own models (the method's
``evaluate``: what the trace reports) and the global model ``models[0]`` (the same for every client). Prints one
line per seed: mean and worst client accuracy of each, in %. The checkpoints are read through the safe loader
(wirelessfl.checkpoint); a finished unit's checkpoint holds the models only when the run was made with
``wirelessfl simulate --keep-models``, and ``--checkpoint`` reads any other one (a copy of a ``.partial``
checkpoint taken while the run trained).

    python scripts/personal_vs_global.py RUN_DIR [--curve pfedme] [--seed S] [--checkpoint PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from wirelessfl import checkpoint
from wirelessfl.config import load_scenario
from wirelessfl.run.build import build_units
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES


def measure(scenario, seed: int, curve: str, path: Path) -> dict[str, tuple[float, float]]:
    """``{"<model> on <split>": (mean %, worst %)}`` over the training clients, and the round the state is from."""
    unit = next(u for u in build_units(scenario, seed, torch.device("cpu"), False) if u.curve.curve == curve)
    state = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES)
    if "algorithm" not in state:
        raise SystemExit(f"{path}: no models in it; re-run the scenario with `wirelessfl simulate --keep-models`")
    unit.restore(state)
    algo = unit.algorithm
    if algo.models.shape[0] != 1:
        raise SystemExit(f"{curve}: keeps {algo.models.shape[0]} server models, not one global model")
    clients = algo.ctx.training_clients()
    out = {"round": (float(state["records"][-1].round), float("nan"))}
    for split, sets in (("test", algo.ctx.test_sets(clients)), ("train", algo.ctx.train_sets(clients))):
        own = algo.evaluate(split, clients).accuracy.double().numpy()
        shared = algo.ctx.engine.evaluate(algo.models, sets, rows=torch.zeros(len(clients), dtype=torch.int64))
        shared = shared.accuracy.double().numpy()
        out[f"clients' models on {split}"] = (100 * own.mean(), 100 * own.min())
        out[f"global model on {split}"] = (100 * shared.mean(), 100 * shared.min())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--curve", default="pfedme")
    parser.add_argument("--seed", type=int, help="one seed of the run (default: every seed)")
    parser.add_argument("--checkpoint", type=Path, help="read this checkpoint (with --seed) instead of the run's finished one")
    args = parser.parse_args()
    if args.checkpoint is not None and args.seed is None:
        raise SystemExit("error: --checkpoint needs --seed (the seed whose data the checkpoint was trained on)")
    scenario = load_scenario(args.run_dir / "scenario.yaml")
    for seed in [args.seed] if args.seed is not None else list(scenario.seeds):
        path = args.checkpoint or args.run_dir / "checkpoints" / f"seed{seed}__{args.curve}.done{checkpoint.SUFFIX}"
        result = measure(scenario, seed, args.curve, path)
        cells = [f"{name} {mean:.1f} (worst {worst:.0f})" for name, (mean, worst) in result.items() if name != "round"]
        print(f"{args.run_dir.name} {args.curve} seed {seed}, round {result['round'][0]:.0f}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
