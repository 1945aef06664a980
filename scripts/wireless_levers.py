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
    python scripts/wireless_levers.py RUN_DIR --figure docs/img/wireless-levers.png > table.md

``--figure`` draws the run as small multiples with matplotlib: one column per method, accuracy against simulated
time (top) and against the devices' cumulative energy (bottom), each lever a mean over seeds, coloured by its
family (scheduling, compression, over the air, asynchronous) and told apart within it by line style, the method's full curve
(with its seeds' 95% band) in every panel, and a marker on the target line at each lever's mean time and energy
to target (curves that reach it on every seed).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from wirelessfl.results.intervals import interval_half_width
from wirelessfl.results.io import atomic_write_bytes
from wirelessfl.results.static import FONT_SIZE, PNG_DPI
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


FAMILIES = {
    "full": ("full participation", "black"),
    "random-5": ("scheduling, k = 5 of 20", "#1f77b4"),
    "best-5": ("scheduling, k = 5 of 20", "#1f77b4"),
    "pf-5": ("scheduling, k = 5 of 20", "#1f77b4"),
    "qsgd-8": ("compression", "#d62728"),
    "qsgd-2": ("compression", "#d62728"),
    "top-1%": ("compression", "#d62728"),
    "over-the-air": ("over the air", "#2ca02c"),
    "buffered-async": ("asynchronous", "#9467bd"),
}
"""Each lever's family and the family's colour; within a family the line style tells the levers apart."""
STYLES = {"full": "-", "random-5": "-", "best-5": "--", "pf-5": ":", "qsgd-8": "-", "qsgd-2": "--", "top-1%": ":",
          "over-the-air": "-", "buffered-async": "-"}
LEVER_NAMES = {"full": "full", "random-5": "random", "best-5": "best channel", "pf-5": "proportional fair",
               "qsgd-8": "QSGD 8 bits", "qsgd-2": "QSGD 2 bits", "top-1%": "top-1% + EF", "over-the-air": "analog sum, truncated channel inversion",
               "buffered-async": "buffered, 10 of 20, weight (σ+1)^-1/2"}
METHOD_NAMES = {"fedavg": "FedAvg", "fedper": "FedPer", "ucfl": "UCFL"}


def figure(trace: pd.DataFrame, target: float, unit: str) -> Figure:
    """Small multiples of the run (module docstring): columns are methods, rows accuracy vs time and vs energy."""
    seeds = per_seed(trace, target)
    table = comparison(seeds).set_index(["method", "lever"])
    mean = trace.groupby(["curve", "round"])[["avg_acc", "time", "cum_energy_j"]].mean()
    methods = list(dict.fromkeys(seeds["method"]))
    fig = Figure(figsize=(3.3 * len(methods), 6.4), dpi=PNG_DPI)
    axes = fig.subplots(2, len(methods), sharey=True, squeeze=False)
    for column, method in enumerate(methods):
        levers = [lever for lever in FAMILIES if (method, lever) in table.index]
        for row, (x, label) in enumerate((("time", f"simulated time ({unit})"), ("cum_energy_j", "device energy, all devices (J)"))):
            ax = axes[row, column]
            full = trace[trace["curve"] == f"{method} {FULL}"].pivot_table(index="round", columns="seed", values="avg_acc")
            half = np.array([interval_half_width(values) for values in full.to_numpy()])
            reference = mean.loc[f"{method} {FULL}"]
            ax.fill_between(reference[x], full.mean(axis=1) - half, full.mean(axis=1) + half, color="0.87", lw=0, zorder=1)
            for lever in levers:
                curve = mean.loc[f"{method} {lever}"]
                color, width = FAMILIES[lever][1], (2.0 if lever == FULL else 1.3)
                ax.plot(curve[x], curve["avg_acc"], STYLES[lever], color=color, lw=width, zorder=3 if lever == FULL else 2)
                to_target = table.loc[(method, lever), "time" if x == "time" else "energy"]
                if math.isfinite(to_target):
                    ax.plot([to_target], [target], "o", ms=5, mfc=color, mec="white", mew=0.6, zorder=4)
            ax.axhline(target, color="0.45", lw=0.8, ls=(0, (4, 3)), zorder=0)
            reached = sum(math.isfinite(table.loc[(method, lever), "time"]) for lever in levers)
            if not reached:
                ax.text(0.97, target + 0.02, f"no curve reaches {target:.0%}", ha="right", va="bottom", fontsize=FONT_SIZE - 1,
                        color="0.35", transform=ax.get_yaxis_transform())
            ax.set_xlim(left=0)
            ax.set_ylim(0, 1)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.set_xlabel(label, fontsize=FONT_SIZE)
            ax.tick_params(labelsize=FONT_SIZE - 1)
            ax.grid(True, color="0.92", lw=0.6)
            if row == 0:
                ax.set_title(METHOD_NAMES.get(method, method), fontsize=FONT_SIZE + 2, fontweight="bold")
            if column == 0:
                ax.set_ylabel("average accuracy", fontsize=FONT_SIZE)
    handles = [
        Line2D([], [], color=FAMILIES[lever][1], ls=STYLES[lever], lw=2.0 if lever == FULL else 1.3,
               label=f"{FAMILIES[lever][0]}: {LEVER_NAMES[lever]}" if lever != FULL else "full participation (95% band over seeds)")
        for lever in FAMILIES if any((method, lever) in table.index for method in methods)
    ] + [Line2D([], [], color="0.45", lw=0.8, ls=(0, (4, 3)), marker="o", mfc="0.45", mec="white", ms=5,
                label=f"target {target:.0%}; dot: mean time / energy to it (reached on every seed)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=FONT_SIZE - 1, frameon=False)
    seeds_n = trace["seed"].nunique()
    fig.suptitle(f"Wireless levers: mean of {seeds_n} seeds per curve", fontsize=FONT_SIZE + 2)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def write_figure(fig: Figure, path: Path) -> None:
    """The PNG, without a creation date (the same tables write the same bytes)."""
    from io import BytesIO

    buffer = BytesIO()
    fig.savefig(buffer, format="png", metadata={})
    atomic_write_bytes(path, buffer.getvalue())


def concurrent_share(intervals: list[tuple[float, float, int]]) -> tuple[float, float]:
    """(time any interval is open, time intervals of two or more different rounds are open at once), from
    ``(start, end, round)`` triples on one time axis."""
    events = sorted([(start, 1, r) for start, end, r in intervals] + [(end, -1, r) for start, end, r in intervals])
    open_rounds: dict[int, int] = {}
    busy = crossing = 0.0
    last = None
    for time, step, r in events:
        if last is not None and open_rounds:
            busy += time - last
            crossing += (time - last) if len(open_rounds) >= 2 else 0.0
        open_rounds[r] = open_rounds.get(r, 0) + step
        if open_rounds[r] == 0:
            del open_rounds[r]
        last = time
    return busy, crossing


def async_overlap(trace: pd.DataFrame, jobs: pd.DataFrame) -> str:
    """What the async timing leaves out, measured: jobs dispatched in different rounds are timed apart, so their
    uploads (and receptions) never share the carrier. Per async curve and seed, how long uploads (receptions) of
    two or more dispatch rounds were on the air at once in the run as timed, out of the time the uplink
    (downlink) was busy at all."""
    lines = ["| curve | seed | run (s) | uplink busy (s) | of it, two rounds at once (s) | downlink busy (s) | of it, two rounds at once (s) |",
             "|:---|---:|---:|---:|---:|---:|---:|"]
    for curve in sorted(set(jobs.loc[jobs["curve"].str.endswith("async"), "curve"])):
        for seed, own in jobs[jobs["curve"] == curve].groupby("seed"):
            starts = trace[(trace["curve"] == curve) & (trace["seed"] == seed)].set_index("round")["time"]
            start = own["round"].map(lambda r: starts[r - 1]).to_numpy()
            up = np.isfinite(own["t_uploaded"].to_numpy())
            ul = concurrent_share(list(zip(start[up] + own["t_upload_start"].to_numpy()[up], start[up] + own["t_uploaded"].to_numpy()[up],
                                           own["round"].to_numpy()[up])))
            down = np.isfinite(own["receive_time"].to_numpy())
            dl = concurrent_share(list(zip(start[down], start[down] + own["receive_time"].to_numpy()[down], own["round"].to_numpy()[down])))
            lines.append(f"| {curve} | {seed} | {starts.iloc[-1]:.3f} | {ul[0]:.3f} | {ul[1]:.3f} | {dl[0]:.3f} | {dl[1]:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished run directory of scenarios/wireless-levers.yaml")
    parser.add_argument("--figure", type=Path, help="also draw the small multiples to this PNG")
    parser.add_argument("--async-overlap", action="store_true",
                        help="print, per async curve and seed, how long jobs of different rounds were on the air at once (client_rounds.parquet)")
    args = parser.parse_args(argv)
    trace = pd.read_parquet(args.run / "trace.parquet")
    scenario = yaml.safe_load((args.run / "scenario.yaml").read_text())
    target = float(scenario["target_accuracy"])
    print(markdown(comparison(per_seed(trace, target)), target, trace["time_unit"].iloc[0]))
    if args.figure is not None:
        write_figure(figure(trace, target, trace["time_unit"].iloc[0]), args.figure)
    if args.async_overlap:
        print()
        print(async_overlap(trace, pd.read_parquet(args.run / "client_rounds.parquet")))


if __name__ == "__main__":
    main()
