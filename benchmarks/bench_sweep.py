"""A 4x4 network grid costs about what one profile costs: the sweep trains once and times 16 profiles.

Run: python benchmarks/bench_sweep.py [--rounds R]

In one process: a quickstart-sized scenario (digits, 20 users, fedavg, local,
ucfl with 4 streams) under one profile (``wirelessfl.simulate``, in memory),
then the same scenario as ``wirelessfl.sweep`` over rho x mu = 4 x 4 (local
executor, into a temporary directory, HTML figures included). Prints both
wall times and their ratio, which should stay within 1.5x (network points must
cost little next to training). A short warm-up
run first keeps torch's first-call costs out of the comparison.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import wirelessfl

SCENARIO = {
    "name": "bench-sweep",
    "seeds": [0],
    "rounds": 5,
    "target_accuracy": 0.5,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 20,
        "samples": {"per_client": 85},
        "partition": [{"name": "dirichlet", "alpha": 0.4}, {"name": "rotation", "groups": 4}],
    },
    "model": {"name": "lenet5"},
    "training": {"batch_size": 16, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}, {"name": "ucfl", "params": {"streams": 4}}],
    "networks": [{"preset": "wired"}],
}
GRID = {"rho": [1, 2, 4, 8], "mu": [0.5, 1, 2, "inf"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=SCENARIO["rounds"])
    args = parser.parse_args()
    scenario = {**SCENARIO, "rounds": args.rounds}
    wirelessfl.simulate({**scenario, "rounds": 1})
    began = time.perf_counter()
    single = wirelessfl.simulate(scenario)
    one = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        swept = wirelessfl.sweep(scenario, GRID, out=Path(tmp) / "sweep", executor="local")
        grid = time.perf_counter() - began
    points = len(GRID["rho"]) * len(GRID["mu"])
    print(f"single profile: {one:.2f} s wall, {single.trained_units} training runs, {len(single.trace)} trace rows")
    print(
        f"{points} network points (rho x mu = {len(GRID['rho'])} x {len(GRID['mu'])}): {grid:.2f} s wall, "
        f"{swept.trained_units} training runs, {len(swept.table)} table rows, {len(swept.trace)} trace rows "
        "(incl. writing sweep.csv/.parquet, trace.parquet, summary.md, HTML figures)"
    )
    print(f"ratio grid / single: {grid / one:.2f}x (target: within 1.5x)")


if __name__ == "__main__":
    main()
