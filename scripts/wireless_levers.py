"""Which wireless lever pays off, for which method? Time and energy to target, paired per seed, from a finished
run of ``scenarios/wireless-levers.yaml`` (docs/levers.md, "The measured comparison").

Curves are labelled ``<method> <lever>`` (``fedavg full``, ``fedper qsgd-2``, ...). For each curve and seed it
takes the first round whose average accuracy reaches the scenario's target: the simulated time, the energy
all devices spent until then (``cum_energy_j``) and the final average accuracy. Each is a mean over seeds with
the half-width of its 95% Student-t interval. Each lever is also compared with its method's ``full`` curve on
the same seed (the same users, fading draws and initial model: common random numbers) as the ratio of times and
of energies to target, a mean over seeds with its interval; a ratio whose interval excludes 1 is a measured
difference. A curve that missed the target on some seed has no time (``k/3 seeds``). So that a method whose
full curve never reaches the target (FedAvg under label permutation) still compares, each lever is also
paired with its full curve on what the whole run cost (the ratios of the last round's time and energy) and on
the final average accuracy (the difference in points).

    python scripts/wireless_levers.py RUN_DIR > table.md
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from wirelessfl.results.intervals import interval_half_width
from wirelessfl.results.tables import first_reached

FULL = "full"


def per_seed(trace: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per (curve, seed): time and energy to ``target`` (NaN if not reached) and the final average accuracy."""
    reached = first_reached(trace, target, "avg_acc", ["time", "cum_energy_j"]).set_index(["curve", "seed"])
    last = trace.sort_values("round").groupby(["curve", "seed"])[["avg_acc", "time", "cum_energy_j"]].last()
    last.columns = ["final_acc", "run_time", "run_energy"]
    out = reached[["time", "cum_energy_j"]].join(last).reset_index()
    out["method"] = out["curve"].str.split(" ", n=1).str[0]
    out["lever"] = out["curve"].str.split(" ", n=1).str[1]
    return out


def mean_interval(values) -> tuple[float, float, int]:
    """(mean, 95% half-width, seeds) of the values; the mean NaN unless every value is finite."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(values).all():
        return math.nan, math.nan, int(np.isfinite(values).sum())
    return float(values.mean()), interval_half_width(values), len(values)


def comparison(seeds: pd.DataFrame) -> pd.DataFrame:
    """One row per curve: time, energy and final accuracy to target with intervals, and the paired ratios of time
    and energy to the method's ``full`` curve (NaN where either missed the target on some seed)."""
    rows = []
    for curve, group in seeds.groupby("curve", sort=False):
        method, lever = group["method"].iloc[0], group["lever"].iloc[0]
        full = seeds[(seeds["method"] == method) & (seeds["lever"] == FULL)].set_index("seed")
        mine = group.set_index("seed").loc[full.index]
        row = {"method": method, "lever": lever, "seeds": len(group)}
        for key, column in (("time", "time"), ("energy", "cum_energy_j"), ("final_acc", "final_acc")):
            row[key], row[f"{key}_ci"], row[f"{key}_reached"] = mean_interval(group[column])
        for key, column in (("time_ratio", "time"), ("energy_ratio", "cum_energy_j"), ("run_time_ratio", "run_time"),
                            ("run_energy_ratio", "run_energy")):
            row[key], row[f"{key}_ci"], _ = mean_interval(mine[column] / full[column])
        row["acc_gain"], row["acc_gain_ci"], _ = mean_interval(mine["final_acc"] - full["final_acc"])
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(mean: float, half: float, reached: int, seeds: int, fmt: str) -> str:
    if math.isnan(mean):
        return f"not reached ({reached}/{seeds} seeds)"
    return f"{mean:{fmt}} ± {half:{fmt}}"


def _ratio(mean: float, half: float, scale: float = 1.0, fmt: str = ".2f") -> str:
    return "n/a" if math.isnan(mean) else f"{scale * mean:{fmt}} ± {scale * half:{fmt.lstrip('+')}}"


def markdown(table: pd.DataFrame, target: float, unit: str) -> str:
    lines = [
        f"| method | lever | time to {target:.0%} ({unit}) | energy to {target:.0%} (J) | time / full | energy / full "
        "| run time / full | run energy / full | final avg acc (%) | vs full (points) |",
        "|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.method} | {r.lever} | {_cell(r.time, r.time_ci, r.time_reached, r.seeds, '.2f')} "
            f"| {_cell(r.energy, r.energy_ci, r.energy_reached, r.seeds, '.1f')} "
            f"| {_ratio(r.time_ratio, r.time_ratio_ci)} | {_ratio(r.energy_ratio, r.energy_ratio_ci)} "
            f"| {_ratio(r.run_time_ratio, r.run_time_ratio_ci)} | {_ratio(r.run_energy_ratio, r.run_energy_ratio_ci)} "
            f"| {100 * r.final_acc:.1f} ± {100 * r.final_acc_ci:.1f} | {_ratio(r.acc_gain, r.acc_gain_ci, 100, '+.1f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished run directory of scenarios/wireless-levers.yaml")
    args = parser.parse_args(argv)
    trace = pd.read_parquet(args.run / "trace.parquet")
    scenario = yaml.safe_load((args.run / "scenario.yaml").read_text())
    target = float(scenario["target_accuracy"])
    print(markdown(comparison(per_seed(trace, target)), target, trace["time_unit"].iloc[0]))


if __name__ == "__main__":
    main()
