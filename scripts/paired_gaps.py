"""Seed-by-seed gaps between curves of several runs of one scenario (a protocol run and a side run beside it).

Every curve of a scenario seed shares its random numbers (the data split, the initial model, the batch orders),
also across runs of the same scenario, so a curve of a side run (e.g. a method at another rate) and a curve of the
main run can be compared seed by seed, as ``summary.md``'s paired ranking compares the curves of one run. For each
``--pair A:B`` this prints A - B per seed (each seed's accuracy averaged over the evaluated rounds among the last
``--last`` rounds, the run's first profile) and their mean with its 95% Student-t interval.

    python scripts/paired_gaps.py docs/runs/pflego-emnist-k31-protocol docs/runs/pflego-emnist-k31-authors-rate \\
        --last 10 --pair pflego-authors-code:fedper-lr0.007
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from wirelessfl.results.intervals import paired_difference
from wirelessfl.results.io import read_trace
from wirelessfl.results.tables import last_rounds_rows


def per_seed(run_dirs: list[Path], last: int, column: str) -> pd.DataFrame:
    """``column`` in percent per (seed, curve) over the runs, each run read on its first profile."""
    frames, scenarios = [], set()
    for directory in run_dirs:
        trace = read_trace(directory)
        scenarios.update(trace["scenario"].unique())
        rows = last_rounds_rows(trace[trace["profile"] == trace["profile"].iloc[0]], [column], last)
        frames.append(rows.assign(run=str(directory)))
    if len(scenarios) > 1:
        raise SystemExit(f"error: the runs are of different scenarios ({', '.join(sorted(scenarios))}); their seeds do not pair")
    table = pd.concat(frames)
    twice = table.groupby("curve")["run"].nunique()
    if (twice > 1).any():
        raise SystemExit(f"error: curve {twice[twice > 1].index[0]!r} is in more than one run; rename one (label:)")
    return table.pivot_table(index="seed", columns="curve", values=column) * 100


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--pair", action="append", required=True, metavar="A:B", help="print curve A - curve B")
    parser.add_argument("--last", type=int, default=1, help="average each seed over the evaluated rounds among the last N")
    parser.add_argument("--column", default="avg_acc")
    args = parser.parse_args(argv)
    values = per_seed(args.run_dirs, args.last, args.column)
    for pair in args.pair:
        a, _, b = pair.partition(":")
        missing = [c for c in (a, b) if c not in values.columns]
        if missing or not b:
            raise SystemExit(f"error: --pair {pair}: no curve {missing[0] if missing else '(B)'}; curves: {', '.join(values.columns)}")
        print(gap_line(values, a, b))


def gap_line(values: pd.DataFrame, a: str, b: str) -> str:
    """``A - B: mean ± half-width points (seed s: d, ...)`` over the seeds both curves ran."""
    mean, half = paired_difference(values[a].to_dict(), values[b].to_dict())
    seeds = ", ".join(f"seed {s}: {d:+.2f}" for s, d in (values[a] - values[b]).dropna().items())
    interval = "no interval with one seed" if math.isnan(half) else f"± {half:.2f}"
    return f"{a} - {b}: {mean:+.2f} points, {interval} ({seeds})"


if __name__ == "__main__":
    sys.exit(main())
