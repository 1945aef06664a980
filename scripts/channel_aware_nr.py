"""Does channel-aware stream grouping pay off? Paired per seed, from a finished run (docs/network.md).

Reads a run of ``scenarios/channel-aware-nr.yaml`` (or any run whose curves differ only in
``channel_tiers``) and compares the channel-aware curve (``channel_tiers=2``) with the data-only
one (``channel_tiers=1``) on the same seed and cell (the same users and fading draws):

* the ratio of mean round times, channel-aware / data-only: the network's share of the effect;
* the ratio of times to the scenario's target accuracy, which also carries the learning
  difference (tiers change who shares a stream, so what each user is sent);
* the final average accuracy difference (points).

With ``--policies WORST COVER`` it also pairs, per curve and seed, each profile named ``CELL-COVER`` with
``CELL-WORST`` (the same users and data under the other multicast policy) and prints the same ratios, coverage /
worst-user, and per curve and profile the share of users the scheduler left out of a round and the share of
the scheduled users whose upload was not aggregated (a stream or upload in outage, or past the deadline).

Each is a mean over seeds with a 95% Student-t interval; a ratio whose interval holds 1 is
"no difference measured". Writes the table (markdown) to stdout and, with ``--figure``, a
plotly figure of the ratios with their intervals (HTML, and PNG when kaleido can export).

With ``--downlink-share`` it also times the run's profiles on its plan shape (k equal streams,
every participant uploading) and prints the mean share of a round spent on the downlink.

    python scripts/channel_aware_nr.py RUN_DIR --figure docs/img/channel-aware-nr --downlink-share
    python scripts/channel_aware_nr.py RUN_DIR --policies worst cover90 --figure docs/img/channel-aware-multicell
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

DATA_ONLY, CHANNEL_AWARE = "channel_tiers=1", "channel_tiers=2"


def time_to_target(curve: pd.DataFrame, target: float) -> float:
    """Simulated time of the first round whose average accuracy reaches ``target`` (inf if none)."""
    reached = curve[curve["avg_acc"] >= target]
    return float(reached["time"].iloc[0]) if len(reached) else math.inf


def interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval over seeds (nan with fewer than two finite values)."""
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return float(np.mean(finite)) if finite.size else math.nan, math.nan, math.nan
    mean, sem = float(finite.mean()), float(stats.sem(finite))
    half = float(stats.t.ppf(0.975, finite.size - 1)) * sem
    return mean, mean - half, mean + half


def ratios(base: pd.DataFrame, other: pd.DataFrame, target: float) -> dict:
    """``other`` / ``base`` of mean round time and time to target, and the final accuracy difference (points)."""
    base, other = base.sort_values("round"), other.sort_values("round")
    rounds = lambda c: c[c["round"] > 0]["round_time"].mean()  # noqa: E731
    t_base, t_other = time_to_target(base, target), time_to_target(other, target)
    return {
        "round_time_ratio": rounds(other) / rounds(base),
        "time_to_target_ratio": t_other / t_base if math.isfinite(t_base) and math.isfinite(t_other) else math.nan,
        "final_accuracy_points": 100 * (other["avg_acc"].iloc[-1] - base["avg_acc"].iloc[-1]),
        "data_only_round_s": rounds(base),
    }


def paired(trace: pd.DataFrame, target: float) -> pd.DataFrame:
    """One row per (profile, seed): the channel-aware / data-only ratios and the accuracy difference."""
    rows = []
    for (profile, seed), cell in trace.groupby(["profile", "seed"]):
        by = dict(tuple(cell.groupby("variant")))
        if DATA_ONLY not in by or CHANNEL_AWARE not in by:
            continue
        rows.append({"profile": profile, "seed": seed, **ratios(by[DATA_ONLY], by[CHANNEL_AWARE], target)})
    return pd.DataFrame(rows)


def paired_policies(trace: pd.DataFrame, target: float, worst: str, cover: str) -> pd.DataFrame:
    """One row per (curve and cell, seed): the ``CELL-cover`` / ``CELL-worst`` ratios and the accuracy difference
    (the ``profile`` column names the curve and the cell)."""
    rows = []
    for (curve, seed), runs in trace.groupby(["curve", "seed"], sort=False):
        by = dict(tuple(runs.groupby("profile")))
        for name in by:
            if name.endswith(f"-{worst}") and f"{name[: -len(worst)]}{cover}" in by:
                cell = name[: -len(worst) - 1]
                rows.append({"profile": f"{curve}, {cell}", "seed": seed,
                             **ratios(by[name], by[f"{cell}-{cover}"], target)})
    return pd.DataFrame(rows)


def left_out(trace: pd.DataFrame, clients: int) -> pd.DataFrame:
    """Per curve and profile, mean over rounds (from 1) and seeds with a 95% interval over the seeds' means: the
    share of users not scheduled, and the share of the scheduled whose upload was not aggregated."""
    rounds = trace[trace["round"] > 0]
    rows = []
    for (curve, profile), group in rounds.groupby(["curve", "profile"], sort=False):
        per_seed = group.groupby("seed").agg(participants=("participants", "sum"), aggregated=("aggregated", "sum"),
                                             rounds=("round", "size"))
        rows.append({
            "curve": curve, "profile": profile,
            "not scheduled": interval((1 - per_seed["participants"] / (clients * per_seed["rounds"])).to_numpy(dtype=float)),
            "not aggregated": interval((1 - per_seed["aggregated"] / per_seed["participants"]).to_numpy(dtype=float)),
        })
    return pd.DataFrame(rows)


def summarise(pairs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for profile, group in pairs.groupby("profile", sort=False):
        row = {"profile": profile, "seeds": len(group), "data-only round (s)": group["data_only_round_s"].median()}
        for column in ("round_time_ratio", "time_to_target_ratio", "final_accuracy_points"):
            row[column] = interval(group[column].to_numpy(dtype=float))
        row["pairs reaching target"] = int(group["time_to_target_ratio"].notna().sum())
        rows.append(row)
    return pd.DataFrame(rows)


def cell(value: tuple[float, float, float], digits: int) -> str:
    """``mean [low, high]``; the mean alone without an interval, n/a without a mean."""
    mean, low, high = value
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.{digits}f}" if math.isnan(low) else f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def markdown(summary: pd.DataFrame, row: str = "cell", base: str = "data-only") -> str:
    lines = [
        f"| {row} | seeds | {base} round, median (s) | round time ratio | time-to-target ratio (pairs) | final accuracy (points) |",
        "|---|---|---|---|---|---|",
    ]
    for _, row in summary.iterrows():
        lines.append(
            f"| {row['profile']} | {row['seeds']} | {row['data-only round (s)']:.3g} | {cell(row['round_time_ratio'], 3)} | "
            f"{cell(row['time_to_target_ratio'], 3)} ({row['pairs reaching target']}) | {cell(row['final_accuracy_points'], 1)} |"
        )
    return "\n".join(lines)


def figure(summary: pd.DataFrame, path: Path, title: str = "Channel-aware / data-only streams (ucfl k = 4, NR link)",
           below: str = "channel-aware faster") -> None:
    import plotly.graph_objects as go

    fig = go.Figure()
    for column, name, color in (("round_time_ratio", "mean round time", "#636efa"), ("time_to_target_ratio", "time to target", "#ef553b")):
        means = [v[0] for v in summary[column]]
        fig.add_bar(
            x=summary["profile"], y=means, name=name, marker_color=color,
            error_y={"type": "data", "symmetric": False,
                     "array": [v[2] - v[0] if not math.isnan(v[2]) else 0 for v in summary[column]],
                     "arrayminus": [v[0] - v[1] if not math.isnan(v[1]) else 0 for v in summary[column]]},
        )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="no difference")
    fig.update_layout(
        title=f"{title}: mean over seeds, 95% interval",
        yaxis_title=f"ratio (below 1: {below})", barmode="group", template="plotly_white",
        width=max(900, 240 * len(summary)), height=500,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(path.with_suffix(".html"), include_plotlyjs="cdn")
    from wirelessfl.results.static import write_static

    write_static(path.parent, {path.stem: fig})


def downlink_share(run: Path, trace: pd.DataFrame, rounds: int = 200) -> pd.DataFrame:
    """Per cell: the mean share of a round spent on the downlink, for the run's plan shape (k streams of
    equal size, every participant uploading one model), timed by the run's own network profiles. Why a
    grouping of the downlink can move a round's length by at most that share."""
    import numpy as np

    from wirelessfl.config import load_scenario
    from wirelessfl.network import NetworkModel
    from wirelessfl.seam import CommPlan, Stream
    from wirelessfl.run.preflight import prepare_links
    from wirelessfl.run.seeds import static_rng

    scenario = load_scenario(run / "scenario.yaml")
    first = trace[(trace["round"] == 1) & (trace["dl_payload"] > 0)].iloc[0]
    params = int(round(first["dl_bits"] / first["dl_payload"] / 32))
    clients, k = scenario.data.clients, int(first["streams"])
    groups = np.array_split(np.arange(clients), k)
    plan = CommPlan(
        streams=tuple(Stream(1.0, frozenset(g.tolist())) for g in groups), uplink={c: 1.0 for c in range(clients)},
        work={c: 1.0 for c in range(clients)}, model_params=params,
    )
    rows = []
    for profile in scenario.profiles():
        prepare_links(profile)
        shares = []
        for seed in scenario.seeds:
            network = NetworkModel(profile, clients, static_rng(seed, profile))
            for r in range(rounds // len(scenario.seeds)):
                inputs = network.draw_round(plan, np.random.default_rng([seed, r]))
                end = network.time_round(plan, np.random.default_rng([seed, r])).t_end
                shares.append(float(np.sum(inputs.stream_durations)) / end)
        rows.append({"profile": profile.name, "downlink share": float(np.mean(shares))})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--figure", type=Path, default=None, help="write PATH.html (and PATH.png)")
    parser.add_argument("--downlink-share", action="store_true", help="also time the downlink's share of a round")
    parser.add_argument("--policies", nargs=2, metavar=("WORST", "COVER"), default=None,
                        help="also pair profiles CELL-COVER with CELL-WORST per curve and seed")
    args = parser.parse_args()
    parquet = args.run / "trace.parquet"
    trace = pd.read_parquet(parquet) if parquet.exists() else pd.read_csv(args.run / "trace.csv")
    target = float(yaml.safe_load((args.run / "scenario.yaml").read_text())["target_accuracy"])
    summary = summarise(paired(trace, target))
    print(markdown(summary))
    if args.policies:
        worst, cover = args.policies
        policies = summarise(paired_policies(trace, target, worst, cover))
        print()
        print(markdown(policies, row=f"curve, cell: {cover} / {worst}", base=worst))
        clients = int(yaml.safe_load((args.run / "scenario.yaml").read_text())["data"]["clients"])
        print()
        print("| curve | profile | users not scheduled (share of a round) | scheduled users not aggregated |\n|---|---|---|---|")
        for _, row in left_out(trace, clients).iterrows():
            print(f"| {row['curve']} | {row['profile']} | {cell(row['not scheduled'], 3)} | {cell(row['not aggregated'], 3)} |")
    if args.downlink_share:
        print()
        print("| cell | downlink share of a round |\n|---|---|")
        for _, row in downlink_share(args.run, trace).iterrows():
            print(f"| {row['profile']} | {row['downlink share']:.3f} |")
    if args.figure is not None:
        if args.policies:
            worst, cover = args.policies
            short = {CHANNEL_AWARE: "aware", DATA_ONLY: "data-only", "ucfl k=4 ": ""}
            curves = [p.split(",")[0] for p in policies["profile"]]
            for long, brief in short.items():
                curves = [c.replace(long, brief) for c in curves]
            both = pd.concat([summary.assign(profile=[f"aware/data-only, {p}" for p in summary["profile"]]),
                              policies.assign(profile=[f"{cover}/{worst}, {c}" for c in curves])])
            figure(both, args.figure, title="Channel-aware / data-only streams (ucfl k = 4) and coverage / worst-user multicast",
                   below="the first faster")
        else:
            figure(summary, args.figure)


if __name__ == "__main__":
    main()
