"""Where a finished FedMoE run loses accuracy: the gated mixture against its own experts.

Loads a run's final FedMoE checkpoint and, for every client on its test split,
prints the accuracy of the gated mixture (what the trace reports), of the
client's chosen cluster model (IFCA's prediction), of its local expert, of the
best single expert picked per client with hindsight (an upper bound for any
gate that picks one expert), and the gate's mean weight per expert kind. The
checkpoint is read through the safe loader (wirelessfl.checkpoint) and holds the
models only when the run was made with ``wirelessfl simulate --keep-models``.

    python scripts/moe_experts.py RUN_DIR [--curve fedmoe]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from wirelessfl import checkpoint
from wirelessfl.config import load_scenario
from wirelessfl.simulate import CHECKPOINT_TYPES, build_units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--curve", default="fedmoe")
    args = parser.parse_args()
    scenario = load_scenario(args.run_dir / "scenario.yaml")
    unit = next(u for u in build_units(scenario, scenario.seeds[0], torch.device("cpu"), False) if u.curve.curve == args.curve)
    key = f"seed{scenario.seeds[0]}__{args.curve}"
    path = args.run_dir / "checkpoints" / f"{key}.done{checkpoint.SUFFIX}"
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
        rows.append((float(correct[chosen]), float(correct[-1]), float(correct.max()), weights.detach().numpy()))
    mixture = algo.evaluate("test").accuracy.double().mean().item()
    chosen_acc, local_acc, best_acc, weights = (np.mean([r[k] for r in rows], axis=0) for k in range(4))
    print(f"{args.run_dir.name} {args.curve}: gated mixture {100 * mixture:.1f}%, chosen cluster model {100 * chosen_acc:.1f}%, "
          f"local expert {100 * local_acc:.1f}%, best single expert per client {100 * best_acc:.1f}%")
    print("mean gate weight per expert (cluster models 0..J-1, then the local expert):", np.round(weights, 3).tolist())


if __name__ == "__main__":
    main()
