"""What a tuning writes: ``study.csv``, ``tuned.yaml``, ``history.html`` and ``history.png``, ``summary.md``.

``tuned.yaml`` is the scenario ready to run: the ``tune:`` block left out and
every curve its own algorithm entry (``label:`` its curve name), with the best
trial's algorithm parameters in ``params:`` and its training fields in the
entry's ``training:``. Run it with ``wirelessfl simulate tuned.yaml`` to
measure the tuned methods on the test split, with the scenario's seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import yaml
from plotly.subplots import make_subplots

from wirelessfl.config import MAX_NAME, Scenario, TuneConfig, dump_scenario, load_scenario
from wirelessfl.results.io import atomic_write_frame, atomic_write_text
from wirelessfl.results.palette import curve_colors
from wirelessfl.results.plotly_js import write_plotly_js
from wirelessfl.results.tables import percent
from wirelessfl.tune.space import merge_training, split_trial

STUDY_COLUMNS = ("curve", "algorithm", "trial", "state", "value", "last_round", "seconds")


@dataclass
class TuneResult:
    """Where a tuning wrote, its study table, the best values per curve and the notes said at its end."""

    dir: Path
    table: pd.DataFrame
    best: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def study_table(targets, studies) -> pd.DataFrame:
    """One row per trial of every curve: its state, objective, last reported round, duration and values."""
    rows = []
    for target in targets:
        for t in studies[target.curve].get_trials(deepcopy=False):
            seconds = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else math.nan
            steps = list(t.intermediate_values)
            row = {
                "curve": target.curve, "algorithm": target.algorithm, "trial": t.number, "state": t.state.name.lower(),
                "value": t.value if t.value is not None else (t.intermediate_values[steps[-1]] if steps else math.nan),
                "last_round": max(steps) if steps else math.nan, "seconds": seconds,
            }
            if t.user_attrs.get("interrupted"):
                row["state"] = "interrupted"
            row.update({f"param {key}": value for key, value in t.params.items()})
            rows.append(row)
    table = pd.DataFrame(rows, columns=None if rows else list(STUDY_COLUMNS))
    # a round is a whole number, also where some trial reported none (study.csv: 4, not 4.0, and an empty cell)
    table["last_round"] = table["last_round"].astype("Int64")
    return table


def best_values(targets, studies) -> dict[str, dict[str, Any]]:
    """The best complete trial's values per curve (a curve with none is left out)."""
    from optuna.trial import TrialState

    best = {}
    for target in targets:
        complete = [t for t in studies[target.curve].get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
        if complete:
            top = max(complete, key=lambda t: (t.value, -t.number))
            best[target.curve] = {"trial": top.number, "value": top.value, "values": dict(top.params)}
    return best


TUNED_SUFFIX = "-tuned"


def tuned_name(name: str) -> str:
    """``<scenario>-tuned``, so a run of tuned.yaml is named ``<scenario>-tuned-<timestamp>``; within the name's
    length limit, and not ``-tuned-tuned`` when a tuned scenario is tuned again."""
    if name.endswith(TUNED_SUFFIX):
        return name
    return name[: MAX_NAME - len(TUNED_SUFFIX)] + TUNED_SUFFIX


def tuned_scenario(scenario: Scenario, targets, best: dict[str, dict[str, Any]], study: str) -> dict[str, Any]:
    """``scenario`` with each curve as its own algorithm entry carrying its best values (no ``tune:`` block),
    named ``<scenario>-tuned`` and naming the tuning directory ``study`` (its name: the folder may move)."""
    raw = yaml.safe_load(dump_scenario(scenario))
    raw.pop("tune", None)
    raw["name"] = tuned_name(scenario.name)
    raw["tuned_from"] = study
    algorithms = []
    for target in targets:
        params, training = split_trial(best.get(target.curve, {}).get("values", {}))
        entry: dict[str, Any] = {"name": target.algorithm, "label": target.curve, "params": {**target.fixed, **params}}
        merged = merge_training(target.training, training)
        if merged:
            entry["training"] = merged
        algorithms.append(entry)
    raw["algorithms"] = algorithms
    return raw


HISTORY_COLUMNS = 4
"""Panels per row of the tuning history (one panel per curve)."""


def history_figure(table: pd.DataFrame) -> go.Figure:
    """One panel per curve, on one y axis: each trial's objective by trial number (pruned ones hollow, at their
    last reported value) and the best so far. Twelve curves on one axis hid each other's trials."""
    curves = list(dict.fromkeys(table["curve"])) if len(table) else []
    columns = max(1, min(HISTORY_COLUMNS, len(curves)))
    rows = max(1, math.ceil(len(curves) / columns))
    fig = make_subplots(
        rows=rows, cols=columns, subplot_titles=curves or None, shared_yaxes="all", shared_xaxes="all",
        horizontal_spacing=0.04, vertical_spacing=0.12 if rows > 1 else 0.08,
    )
    colors = curve_colors(curves)
    for index, curve in enumerate(curves):
        row, col = divmod(index, columns)
        where = {"row": row + 1, "col": col + 1}
        trials = table[table["curve"] == curve].sort_values("trial")
        done = trials[trials["state"] == "complete"]
        pruned = trials[trials["state"] == "pruned"]
        color = colors[curve]
        fig.add_trace(go.Scatter(x=done["trial"], y=done["value"], mode="markers", name="complete", legendgroup="complete",
                                 showlegend=False, marker={"color": color}), **where)
        if len(pruned):
            fig.add_trace(go.Scatter(x=pruned["trial"], y=pruned["value"], mode="markers", name="pruned (last report)",
                                     legendgroup="pruned", showlegend=False, marker={"color": color, "symbol": "circle-open"}),
                          **where)
        if len(done):
            fig.add_trace(go.Scatter(x=done["trial"], y=done["value"].cummax(), mode="lines", name="best so far",
                                     legendgroup="best", showlegend=False, line={"color": color, "shape": "hv"}), **where)
    # legend entries for the marker kinds, in grey: each panel has its own colour
    for name, marker, line in (("complete", {"color": "grey"}, None), ("pruned (last report)", {"color": "grey", "symbol": "circle-open"}, None),
                               ("best so far", None, {"color": "grey", "shape": "hv"})):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers" if marker else "lines", name=name, marker=marker,
                                 line=line, legendgroup=name), row=1, col=1)
    fig.update_layout(
        title="tuning history: validation accuracy per trial (pruned: hollow), best so far",
        template="plotly_white", height=260 * rows + 120, width=1200 if columns > 2 else 420 * columns + 200,
    )
    fig.update_xaxes(title_text="trial", row=rows)
    fig.update_yaxes(title_text="objective", tickformat=".0%", col=1)
    return fig


def summary_lines(scenario: Scenario, targets, best, table: pd.DataFrame, notes: list[str]) -> str:
    cfg = scenario.tune if scenario.tune is not None else TuneConfig()
    seeds = list(cfg.seeds or scenario.seeds[:1])
    lines = [
        f"# Tuning: {scenario.name}", "",
        f"{cfg.trials} trials per curve, {cfg.rounds or scenario.rounds} rounds, seeds {seeds}, profile "
        f"{scenario.profiles()[0].name}; objective: mean validation accuracy over the last {cfg.last_rounds} evaluated "
        f"rounds (the test split is never evaluated); TPE sampler (seed {cfg.sampler_seed}, {cfg.startup_trials} random "
        f"trials first), pruner: {cfg.pruner}.", "",
        "| curve | best objective % | trial | values | complete / pruned / failed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for target in targets:
        rows = table[table["curve"] == target.curve] if len(table) else table
        counts = " / ".join(str(int((rows["state"] == s).sum())) if len(rows) else "0" for s in ("complete", "pruned", "fail"))
        found = best.get(target.curve)
        if found is None:
            lines.append(f"| {target.curve} | none complete | | | {counts} |")
            continue
        shown = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in found["values"].items())
        lines.append(f"| {target.curve} | {percent(found['value'])} | {found['trial']} | {shown} | {counts} |")
    lines += ["", "`tuned.yaml` holds these values; `wirelessfl simulate tuned.yaml` measures them on the test split.", ""]
    lines += [f"Note: {note}" for note in notes]
    return "\n".join(lines).rstrip() + "\n"


def write_outputs(scenario: Scenario, out_dir: Path, targets, studies, notes: list[str], png: bool = True):
    out_dir = Path(out_dir)
    table = study_table(targets, studies)
    best = best_values(targets, studies)
    atomic_write_frame(out_dir / "study.csv", table)
    tuned = tuned_scenario(scenario, targets, best, out_dir.resolve().name)
    header = (
        f"# {scenario.name} with the values `wirelessfl tune` found on the validation split\n"
        f"# (study.db and study.csv beside this file). Run: wirelessfl simulate tuned.yaml\n"
    )
    atomic_write_text(out_dir / "tuned.yaml", header + yaml.safe_dump(tuned, sort_keys=False))
    load_scenario(out_dir / "tuned.yaml")  # what we hand over must run
    figure = history_figure(table) if len(table) else go.Figure()
    write_plotly_js(out_dir)
    atomic_write_text(out_dir / "history.html", figure.to_html(include_plotlyjs="directory", full_html=True))
    notes = list(notes)
    if png:
        from wirelessfl.results.static import write_static  # matplotlib (1 s to import) only to draw
        write_static(out_dir, {"history": figure})
    missing = [t.curve for t in targets if t.curve not in best]
    if missing:
        notes.append(f"no complete trial for {', '.join(missing)}: tuned.yaml keeps their scenario values")
    atomic_write_text(out_dir / "summary.md", summary_lines(scenario, targets, best, table, notes))
    return TuneResult(out_dir, table, best, notes)
