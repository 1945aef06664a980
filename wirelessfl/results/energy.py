"""Device energy of a finished trace: energy to target, the summary.md section, and two figures.

The trace's energy columns (``wirelessfl.accounting``) give each round's total
and the cumulative energy of all devices and of the device that spent most.
Here they become the energy each method needs to reach the target accuracy
(the time-to-target question asked in joules), accuracy against cumulative
energy (one panel per profile, like Fig. 3 against time), and an energy-time
Pareto view per profile: which methods no other method beats on both time and
energy to target. A trace written before energy existed has no energy columns;
then there is nothing to report (``has_energy``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from wirelessfl.results.palette import curve_colors, curve_dashes
from wirelessfl.results.tables import METRIC_LABELS, first_reached, markdown_table

ENERGY_COLUMNS = ("energy_j", "cum_energy_j", "cum_energy_max_j", "energy_mean_j", "energy_max_j", "depleted")
_KEYS = ["curve", "profile"]


def has_energy(trace: pd.DataFrame) -> bool:
    return all(c in trace.columns for c in ENERGY_COLUMNS)


def energy_to_target(trace: pd.DataFrame, target: float, metric: str = "avg_acc") -> pd.DataFrame:
    """Per (curve, profile): all devices' energy and the worst device's energy spent until ``metric >= target``
    first held, with the time and round; means over seeds, NaN unless every seed reached the target."""
    seeds = first_reached(trace, target, metric, ["cum_energy_j", "cum_energy_max_j", "time", "round"])
    seeds = seeds.rename(columns={"cum_energy_j": "energy", "cum_energy_max_j": "worst_device"})
    out = []
    for (curve, profile), group in seeds.groupby(_KEYS, sort=False):
        everyone = bool(group["round"].notna().all())
        out.append(
            {
                "curve": curve, "profile": profile, "time_unit": group["time_unit"].iloc[0],
                **{key: group[key].mean() if everyone else math.nan for key in ("energy", "worst_device", "time", "round")},
                "seeds_reached": int(group["round"].notna().sum()), "seeds": len(group),
            }
        )
    return pd.DataFrame(out)


def _per_run(trace: pd.DataFrame) -> pd.DataFrame:
    """Per (curve, profile): energy per round (all devices, per participant), total, worst device, depleted; seed means."""
    rounds = trace[trace["round"] > 0]
    per_seed = rounds.groupby(_KEYS + ["seed"], sort=False).agg(
        per_round=("energy_j", "mean"), per_participant=("energy_mean_j", "mean"), total=("cum_energy_j", "last"),
        worst=("cum_energy_max_j", "last"), depleted=("depleted", "last"),
    )
    first = rounds[rounds["depleted"] > 0].groupby(_KEYS + ["seed"], sort=False)["round"].min().rename("first_depleted_round")
    return per_seed.join(first).groupby(level=[0, 1], sort=False).mean()


def _joules(value: float) -> str:
    if pd.isna(value):
        return "n/a"
    return f"{value:.3g}"


def energy_summary_md(trace: pd.DataFrame, target: float) -> list[str]:
    """summary.md's device-energy section (no lines for a trace without energy columns)."""
    if not has_energy(trace):
        return []
    runs = _per_run(trace).reset_index()
    reach = energy_to_target(trace, target).set_index(_KEYS)
    lines = [
        "## Device energy",
        "",
        "Joules spent by the devices (computation κ·c·samples·f², transmit, receive and idle power over each "
        "participant's round; see docs/results.md 'Device energy' for the model and the profile's parameters), "
        f"mean over seeds. 'To target': until the average client accuracy first reached {100 * target:.1f}%, "
        "all devices together and the device that spent most ('not reached' if some seed never did).",
        "",
        markdown_table(
            ["curve", "profile", "J per round", "J per participant per round", "total J", "worst device J",
             "to target J", "worst device to target J", "devices out of energy"],
            [
                [
                    r.curve, r.profile, _joules(r.per_round), _joules(r.per_participant), _joules(r.total), _joules(r.worst),
                    _reach(reach, r.curve, r.profile, "energy"), _reach(reach, r.curve, r.profile, "worst_device"),
                    f"{r.depleted:g}",
                ]
                for r in runs.itertuples()
            ],
            [False, False] + [True] * 7,
        ),
    ]
    out_of_energy = runs[runs["depleted"] > 0]
    for r in out_of_energy.itertuples():
        lines.append("")
        lines.append(
            f"- **battery** {r.curve} on {r.profile}: {r.depleted:g} devices ran out of energy (mean over seeds), "
            f"the first in round {r.first_depleted_round:.0f}; they took no part afterwards."
        )
    lines.append("")
    return lines


def energy_comparison_md(trace: pd.DataFrame, target: float | None) -> list[str]:
    """A reproduction page's device-energy table for one run: per method and profile, joules per participant and
    round (all, and the computation's share), in all, and to ``target`` (all devices, worst device)."""
    if not has_energy(trace):
        return []
    rounds = trace[trace["round"] > 0]
    per_seed = rounds.groupby(_KEYS + ["seed"], sort=False).agg(
        per_participant=("energy_mean_j", "mean"), compute=("energy_compute_j", "sum"), energy=("energy_j", "sum"),
        participants=("participants", "sum"), total=("cum_energy_j", "last"),
    )
    runs = per_seed.groupby(level=[0, 1], sort=False).mean().reset_index()
    reach = energy_to_target(trace, target).set_index(_KEYS) if target is not None else None
    header = ["method", "profile", "J per participant per round", "of which computing", "total J"]
    if reach is not None:
        header += [f"to {100 * target:.0f}% J", "worst device to target J"]
    body = []
    for r in runs.itertuples():
        row = [r.curve, r.profile, _joules(r.per_participant), _joules(r.compute / r.participants if r.participants else math.nan),
               _joules(r.total)]
        if reach is not None:
            row += [_reach(reach, r.curve, r.profile, "energy"), _reach(reach, r.curve, r.profile, "worst_device")]
        body.append(row)
    return ["Device energy (docs/results.md 'Device energy'; mean over seeds):", "",
            markdown_table(header, body, [False, False] + [True] * (len(header) - 2)), ""]


def _reach(reach: pd.DataFrame, curve: str, profile: str, column: str) -> str:
    row = reach.loc[(curve, profile)]
    if pd.isna(row[column]):
        return f"not reached ({row['seeds_reached']}/{row['seeds']} seeds)"
    return _joules(row[column])


def fig_accuracy_vs_energy(trace: pd.DataFrame, metric: str = "avg_acc") -> go.Figure:
    """Accuracy against the devices' cumulative energy, one panel per profile, mean over seeds per round.

    The energy axis is logarithmic when every round after round 0 has spent some energy, so a method that
    spends a hundredth of another's (Local) is a curve of its own and not a line on the y axis."""
    profiles = list(dict.fromkeys(trace["profile"]))
    curves = list(dict.fromkeys(trace["curve"]))
    colors, dashes = curve_colors(curves), curve_dashes(curves)
    means = (
        trace.dropna(subset=[metric]).groupby(_KEYS + ["round"], sort=False)
        .agg(energy=("cum_energy_j", "mean"), value=(metric, "mean"), time=("time", "mean")).reset_index()
        .sort_values("round", kind="stable")
    )
    spent = means[means["round"] > 0]
    log_scale = len(spent) > 0 and bool((spent["energy"] > 0).all())
    if log_scale:  # methods differ by orders of magnitude (Local sends nothing): on a linear axis the cheap ones hug zero
        means = spent
    fig = make_subplots(rows=1, cols=len(profiles), shared_yaxes=True, subplot_titles=profiles, horizontal_spacing=0.04)
    lines = dict(tuple(means.groupby(["curve", "profile"], sort=False)))
    traces, columns = [], []
    for column, profile in enumerate(profiles, start=1):
        for curve in curves:
            rows = lines.get((curve, profile))
            if rows is None:
                continue
            traces.append(go.Scatter(
                x=rows["energy"].to_numpy(), y=rows["value"].to_numpy(), mode="lines+markers" if len(rows) <= 30 else "lines",
                line={"color": colors[curve], "dash": dashes[curve]}, name=curve, legendgroup=curve, showlegend=column == 1,
                customdata=rows[["round", "time"]].to_numpy(),
                hovertemplate=f"{curve}<br>round %{{customdata[0]}}<br>time %{{customdata[1]:.2f}}"
                "<br>energy %{x:.3g} J<br>accuracy %{y:.3f}<extra></extra>",
            ))
            columns.append(column)
    if traces:
        fig.add_traces(traces, rows=[1] * len(traces), cols=columns)
    fig.update_xaxes(title_text="devices' cumulative energy (J)", type="log" if log_scale else "linear")
    fig.update_yaxes(title_text=METRIC_LABELS[metric], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=[0, 1.02])
    subtitle = "mean over seeds" + ("; log energy axis, from round 1 (round 0 has spent nothing)" if log_scale else "")
    fig.update_layout(title=f"{METRIC_LABELS[metric].capitalize()} vs device energy<br><sup>{subtitle}</sup>",
                      template="plotly_white", legend={"title": {"text": "curve"}}, hovermode="closest")
    return fig


def pareto_mask(time: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """True where no other point is at least as good on both and better on one (lower time, lower energy)."""
    time, energy = np.asarray(time, dtype=float), np.asarray(energy, dtype=float)
    keep = np.isfinite(time) & np.isfinite(energy)
    out = keep.copy()
    for i in np.flatnonzero(keep):
        others = keep & (time <= time[i]) & (energy <= energy[i]) & ((time < time[i]) | (energy < energy[i]))
        out[i] = not others.any()
    return out


def fig_energy_time_pareto(trace: pd.DataFrame, target: float) -> go.Figure:
    """Per profile, each curve's (time to target, energy to target); the Pareto front joined by a line."""
    reach = energy_to_target(trace, target)
    profiles = list(dict.fromkeys(trace["profile"]))
    colors = curve_colors(list(dict.fromkeys(trace["curve"])))
    fig = make_subplots(rows=1, cols=len(profiles), subplot_titles=profiles, horizontal_spacing=0.06)
    missed = []
    for column, profile in enumerate(profiles, start=1):
        rows = reach[reach["profile"] == profile].reset_index(drop=True)
        front = pareto_mask(rows["time"].to_numpy(), rows["energy"].to_numpy())
        missed += [f"{r.curve} ({profile})" for r in rows.itertuples() if pd.isna(r.energy)]
        for index, r in rows.iterrows():
            if pd.isna(r["energy"]):
                continue
            fig.add_trace(
                go.Scatter(
                    x=[r["time"]], y=[r["energy"]], mode="markers", name=r["curve"], legendgroup=r["curve"],
                    marker={"color": colors[r["curve"]], "size": 12 if front[index] else 8,
                            "symbol": "circle" if front[index] else "circle-open"},
                    showlegend=column == 1,
                    hovertemplate=f"{r['curve']}<br>time to target %{{x:.3g}} {r['time_unit']}"
                    f"<br>energy to target %{{y:.3g}} J<br>{'on' if front[index] else 'off'} the Pareto front<extra></extra>",
                ),
                row=1, col=column,
            )
        on_front = rows[front].sort_values("time")
        if len(on_front) > 1:
            fig.add_trace(
                go.Scatter(x=on_front["time"], y=on_front["energy"], mode="lines", line={"color": "grey", "dash": "dot"},
                           showlegend=False, hoverinfo="skip"),
                row=1, col=column,
            )
        unit = rows["time_unit"].iloc[0] if len(rows) else ""
        fig.update_xaxes(title_text=f"time to target ({unit})", row=1, col=column)
    fig.update_yaxes(title_text="devices' energy to target (J)", row=1, col=1)
    subtitle = "filled: on the Pareto front (no curve is faster and cheaper)"
    if missed:
        subtitle += "; not reached: " + ", ".join(missed)
    fig.update_layout(title=f"Energy vs time to {100 * target:.1f}% average accuracy<br><sup>{subtitle}</sup>",
                      template="plotly_white", legend={"title": {"text": "curve"}}, hovermode="closest")
    return fig
