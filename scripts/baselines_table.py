"""Methods of several runs of one split in one table: final average and worst-user accuracy, time and energy to the
target on each profile, and gaps paired by seed against a reference curve and against the best curve of the first run.

A side run that adds methods to a committed run (the same data, model, seeds and network profiles) shares its random
numbers seed by seed (docs/results.md, "What `seed` fixes"), so its curves pair with the committed ones although the
runs' names differ; the runs' `scenario.yaml` files are compared field by field instead, and a field that differs is
one line and exit 2. Accuracies are the last round's, mean over seeds ± the half-width of the 95% Student-t interval;
a gap is the mean of the per-seed differences with its own interval (an interval that holds 0 is a tie).

    python scripts/baselines_table.py docs/runs/cross-paper-emnist-tuned docs/runs/cross-paper-emnist-baselines/* \\
        --reference fedavg

``--rounds FIRST:LAST`` takes each accuracy as the mean of the evaluated rounds FIRST to LAST instead of the last
round (where a seed diverged after LAST, the span where all seeds still train). ``--figure PATH`` also draws the curves against simulated time, one panel per profile (the figure ``fig3`` of a run,
over the runs' seeds together): PNG, PDF or SVG by the name's suffix, HTML for the interactive one; ``--curves``
keeps the named ones (twenty curves in one panel are not read).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd
import yaml

from wirelessfl.results.intervals import interval_half_width, paired_difference
from wirelessfl.results.io import read_trace
from wirelessfl.results.tables import first_reached, last_change, markdown_table

PAIRING_FIELDS = ("data", "model", "networks", "rounds", "eval_every", "target_accuracy")
"""Scenario fields two runs must share for their seeds to pair (the split, the initial model, the profiles' draws)
and for their last rounds and times to target to compare."""

EXCLUDED_FROM_BEST = ("oracle",)
"""Curves that know what no method may know (the true groups): shown, never the best to beat."""


def load_runs(run_dirs: list[Path]) -> tuple[pd.DataFrame, dict]:
    """All runs' traces in one frame (with ``run``, the index of the run), and the first run's scenario. A curve may
come from several runs, one seed each (a long run split by seed, so that each seed's trace is written as it ends)."""
    scenarios = [yaml.safe_load((d / "scenario.yaml").read_text()) for d in run_dirs]
    for directory, scenario in zip(run_dirs[1:], scenarios[1:]):
        for field in PAIRING_FIELDS:
            if scenario.get(field) != scenarios[0].get(field):
                raise SystemExit(f"error: {directory}: scenario field {field!r} differs from {run_dirs[0]}'s; its seeds do not pair")
    frames = [read_trace(d).assign(run=i) for i, d in enumerate(run_dirs)]
    units = pd.concat([f[["curve", "seed", "run"]].drop_duplicates() for f in frames])
    twice = units.groupby(["curve", "seed"])["run"].nunique()
    if (twice > 1).any():
        curve, seed = twice[twice > 1].index[0]
        raise SystemExit(f"error: seed {seed} of curve {curve!r} is in more than one run; rename one (label:)")
    return pd.concat(frames, ignore_index=True), scenarios[0]


def final_per_seed(trace: pd.DataFrame, column: str, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """``column`` in percent at each (curve, seed)'s last round, read on the first profile (accuracy does not depend
    on the profile: every curve is trained once and replayed through the profiles); with ``window`` (first, last),
    its mean over the evaluated rounds from first to last instead (a span where every seed still trains, when one
    diverged later)."""
    first = trace[trace["profile"] == trace["profile"].iloc[0]]
    if window is not None:
        inside = first[first["round"].between(*window) & first["avg_acc"].notna()]
        return inside.pivot_table(index="seed", columns="curve", values=column, aggfunc="mean") * 100
    last = first[first["round"] == first.groupby(["curve", "seed"])["round"].transform("max")]
    return last.pivot_table(index="seed", columns="curve", values=column) * 100


def best_curve(trace: pd.DataFrame, avg: pd.DataFrame) -> str:
    """The first run's curve with the highest mean final average accuracy, the oracle left out."""
    candidates = [c for c in trace.loc[trace["run"] == 0, "curve"].unique() if c not in EXCLUDED_FROM_BEST]
    return max(candidates, key=lambda c: avg[c].mean())


def _mean_ci(values: pd.Series, fmt: str = ".1f") -> str:
    values = values.dropna()
    half = interval_half_width(values)
    return f"{values.mean():{fmt}}" + ("" if math.isnan(half) else f" ± {half:{fmt}}")


def _gap(avg: pd.DataFrame, a: str, b: str) -> str:
    if a == b:
        return "—"
    mean, half = paired_difference(avg[a].to_dict(), avg[b].to_dict())
    interval = "" if math.isnan(half) else f" ± {half:.1f}"
    verdict = "" if math.isnan(half) else (" (tie)" if abs(mean) <= half else "")
    return f"{mean:+.1f}{interval}{verdict}"


def accuracy_table(trace: pd.DataFrame, reference: str, best: str, window: tuple[int, int] | None = None) -> str:
    """The last round's accuracies, the gaps paired by seed, and two reasons a curve ranks where it does: its fit to
    the clients' own training data (``fit_acc``, where the run evaluated it; under- against over-fitting) and how
    much it still moved over its last 10 rounds (a curve still gaining is ranked by the budget)."""
    avg, worst, fit = (final_per_seed(trace, c, window) for c in ("avg_acc", "worst_acc", "fit_acc"))
    first = trace[trace["profile"] == trace["profile"].iloc[0]]
    moved = last_change(first).droplevel(1) * 100
    order = sorted(avg.columns, key=lambda c: -avg[c].mean())
    rows = []
    for curve in order:
        run = int(trace.loc[trace["curve"] == curve, "run"].min())
        change = "n/a" if math.isnan(moved[curve]) else f"{moved[curve]:+.1f}"
        fitted = _mean_ci(fit[curve]) if curve in fit.columns and fit[curve].notna().any() else "n/a"
        rows.append([curve, "committed" if run == 0 else "new", str(int(avg[curve].notna().sum())), _mean_ci(avg[curve]),
                     _mean_ci(worst[curve]), _gap(avg, curve, reference), _gap(avg, curve, best), fitted, change])  # fmt: skip
    header = ["curve", "run", "seeds", "avg acc (%)", "worst-user acc (%)", f"- {reference} (points)", f"- {best} (points)",
              "fit acc (%)", "last 10 rounds (points)"]  # fmt: skip
    return markdown_table(header, rows, [False, False] + [True] * 7)


def to_target_table(trace: pd.DataFrame, target: float, column: str, fmt: str) -> str:
    """Per curve and profile: ``column`` at the first round where the average accuracy reached ``target``, mean over
    seeds ± its interval and the mean round; 'not reached (k of n seeds)' unless every seed reached it."""
    reached = first_reached(trace, target, "avg_acc", [column, "round"])
    profiles = list(trace["profile"].unique())
    curves = list(trace["curve"].unique())
    rows = []
    for curve in curves:
        row = [curve]
        for profile in profiles:
            seeds = reached[(reached["curve"] == curve) & (reached["profile"] == profile)]
            hit = seeds[column].notna()
            if not hit.all():
                row.append(f"not reached ({int(hit.sum())} of {len(seeds)} seeds)")
                continue
            row.append(f"{_mean_ci(seeds[column], fmt)} (round {seeds['round'].mean():.0f})")
        rows.append(row)
    unit = trace["time_unit"].iloc[0] if column == "time" else "J"
    return markdown_table(["curve"] + [f"{p} ({unit})" for p in profiles], rows, [False] + [True] * len(profiles))


def per_seed_gaps(trace: pd.DataFrame, curves: list[str], against: list[str], window: tuple[int, int] | None = None) -> str:
    """Each curve minus each of ``against``, seed by seed, in points (the numbers behind the paired intervals)."""
    avg = final_per_seed(trace, "avg_acc", window)
    rows = []
    for curve in curves:
        for other in against:
            if curve != other:
                diffs = (avg[curve] - avg[other]).dropna()
                rows.append([f"{curve} - {other}", ", ".join(f"{d:+.1f}" for d in diffs), _gap(avg, curve, other)])
    return markdown_table(["pair", "per seed (points)", "mean ± 95% interval"], rows, [False, True, True])


def in_flight(run_dirs: list[Path]) -> list[Path]:
    """The folders of runs still training: a scenario and checkpoints, no trace yet (a run writes its trace when
    its last unit ends)."""
    return [d for d in run_dirs if not any((d / name).is_file() for name in ("trace.parquet", "trace.csv"))
            and (d / "checkpoints").is_dir()]  # fmt: skip


def render(run_dirs: list[Path], reference: str, best: str | None, target: float | None,
           window: tuple[int, int] | None = None) -> str:
    running = in_flight(run_dirs)
    run_dirs = [d for d in run_dirs if d not in running]
    trace, scenario = load_runs(run_dirs)
    target = float(scenario["target_accuracy"]) if target is None else target
    avg = final_per_seed(trace, "avg_acc", window)
    if avg.empty:
        raise SystemExit(f"error: --rounds {window[0]}:{window[1]}: no evaluated round in it")
    if reference not in avg.columns:
        raise SystemExit(f"error: --reference {reference}: no such curve; curves: {', '.join(avg.columns)}")
    best = best or best_curve(trace, avg)
    if best not in avg.columns:
        raise SystemExit(f"error: --best {best}: no such curve; curves: {', '.join(avg.columns)}")
    new = [c for c in trace.loc[trace["run"] > 0, "curve"].unique()]
    runs = ", ".join(f"`{d}`" for d in run_dirs)
    return "\n".join([
        f"Runs: {runs}; best curve of the first run (the oracle left out): {best}; target {100 * target:.0f}%."
        + ("" if not running else f" Still training, left out: {', '.join(f'`{d}`' for d in running)}."),
        "", ("Final accuracy (last round)" if window is None else
             f"Accuracy, mean of the evaluated rounds {window[0]}-{window[1]},") + " mean over seeds ± 95% interval; gaps paired by seed:", "",
        accuracy_table(trace, reference, best, window), "",
        f"Simulated time to an average accuracy of {100 * target:.0f}%, mean over seeds ± 95% interval (mean round):", "",
        to_target_table(trace, target, "time", ".0f"), "",
        f"All devices' energy until an average accuracy of {100 * target:.0f}%, mean over seeds ± 95% interval (mean round):", "",
        to_target_table(trace, target, "cum_energy_j", ".3g"), "",
        "Per-seed gaps of the added curves:", "",
        per_seed_gaps(trace, new, [reference, best], window), "",
    ])  # fmt: skip


FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".html")


def write_figure(run_dirs: list[Path], path: Path, curves: list[str] | None) -> None:
    """Average accuracy against simulated time of ``curves`` (all: None) over the finished runs, written to ``path``."""
    from wirelessfl.results.figures import fig_accuracy_vs_time
    from wirelessfl.results.io import atomic_write_bytes

    if path.suffix not in FIGURE_SUFFIXES:
        raise SystemExit(f"error: --figure {path}: the name must end in one of {', '.join(FIGURE_SUFFIXES)}")
    finished = [d for d in run_dirs if d not in in_flight(run_dirs)]
    trace, _ = load_runs(finished)
    present = list(dict.fromkeys(trace["curve"]))
    unknown = [c for c in curves or () if c not in present]
    if unknown:
        raise SystemExit(f"error: --curves {', '.join(unknown)}: no such curve; curves: {', '.join(sorted(present))}")
    chosen = trace[trace["curve"].isin(curves)] if curves else trace
    fig = fig_accuracy_vs_time(chosen.drop(columns="run"))
    if path.suffix == ".html":
        data = fig.to_html(include_plotlyjs=True, full_html=True).encode()  # self-contained: opens offline
    else:
        from wirelessfl.results.static import render as render_static

        data = render_static(fig, path.suffix[1:])
    atomic_write_bytes(path, data)


def _window(text: str | None) -> tuple[int, int] | None:
    """``--rounds FIRST:LAST`` as (FIRST, LAST); one line for anything else."""
    if text is None:
        return None
    first, sep, last = text.partition(":")
    if not (sep and first.isdigit() and last.isdigit() and int(first) <= int(last)):
        raise SystemExit(f"error: --rounds {text}: expected FIRST:LAST, two round numbers with FIRST <= LAST (e.g. 98:116)")
    return int(first), int(last)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+", help="the committed run first, then the runs that add curves")
    parser.add_argument("--reference", default="fedavg", help="the curve every gap is also taken against")
    parser.add_argument("--best", help="the curve to beat (default: the first run's best, the oracle left out)")
    parser.add_argument("--target", type=float, help="target average accuracy in (0, 1] (default: the scenario's)")
    parser.add_argument("--out", type=Path, help="write the markdown here instead of printing it")
    parser.add_argument("--rounds", help="FIRST:LAST: accuracies as the mean of the evaluated rounds FIRST to LAST, not the last round")
    parser.add_argument("--figure", type=Path, help="also draw accuracy against simulated time here (.png, .pdf, .svg, .html)")
    parser.add_argument("--curves", help="with --figure: the curves to draw, comma-separated (default: all)")
    args = parser.parse_args(argv)
    if args.curves and not args.figure:
        raise SystemExit("error: --curves chooses the curves of --figure; give --figure too")
    text = render(args.run_dirs, args.reference, args.best, args.target, _window(args.rounds))
    if args.figure:
        write_figure(args.run_dirs, args.figure, args.curves.split(",") if args.curves else None)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
