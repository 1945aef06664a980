"""Plotly figures of a finished trace, in the style of the user-centric FL paper.

Fig. 3 of M. Mestoukirdi et al., "User-Centric Federated Learning: Trading off
Wireless Resources for Personalization" plots average accuracy against normalised
time, one panel per network profile;
Fig. 2 plots it against the round. Both are reproduced here for any trace, with
the mean over seeds as a line and its 95% Student-t interval as a band.

HTML files load one shared ``plotly.min.js`` written beside them (the
machines this runs on are offline; one 4.7 MB copy instead of one per figure). The
static copies (PNG, PDF or SVG) are the same figures drawn by matplotlib
(:mod:`wirelessfl.results.static`); no browser is involved.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import yaml
from plotly.colors import hex_to_rgb
from plotly.subplots import make_subplots

from wirelessfl.results.intervals import CONFIDENCE, interval_half_width
from wirelessfl.results.io import (
    atomic_write_text,
    read_clients,
    read_provenance,
    read_text_file,
    read_trace,
    shares_draws,
    validate_clients,
    validate_trace,
)
from wirelessfl.results.palette import PALETTE as _PALETTE
from wirelessfl.results.palette import curve_colors, curve_dashes
from wirelessfl.results.plotly_js import write_plotly_js
from wirelessfl.results.tables import ACCURACY_METRICS, METRIC_LABELS, identical_across_profiles, check_target, summary_markdown

HTML_FIGURES = ("fig3.html", "fig2.html", "worst_clients.html")
"""The plotly.js the HTML figures load by a relative path (``include_plotlyjs="directory"``)."""
PNG_FIGURES = ("fig3.png", "fig2.png")
"""Static figures every finished run has (``report`` says when they are missing)."""


class Written(NamedTuple):
    """Files a figure writer wrote, and notes for the user (e.g. that the figures are HTML only)."""

    paths: list[Path]
    notes: list[str]


def _check_metric(metric: str) -> None:
    if metric not in ACCURACY_METRICS:
        raise ValueError(f"metric must be one of {list(ACCURACY_METRICS)}, got {metric!r}")


def _ordered(values: pd.Series) -> list:
    return list(dict.fromkeys(values))


def _translucent(hex_color: str, alpha: float = 0.2) -> str:
    red, green, blue = hex_to_rgb(hex_color)
    return f"rgba({red},{green},{blue},{alpha})"


def _seed_bands(trace: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (curve, profile, round): mean time, and the mean of ``metric`` over seeds with its interval (``low``, ``high``).

    The band is the Student-t interval of the mean (:mod:`wirelessfl.results.intervals`),
    as in the summary tables and maps: where two curves' bands overlap, the seeds
    do not rank them. Rounds that were not evaluated (``eval_every`` > 1, metric
    NaN) are left out, so lines join the evaluated rounds instead of breaking at every gap.
    """
    bands = (
        trace.dropna(subset=[metric])
        .groupby(["curve", "profile", "round"], sort=False)
        .agg(
            time=("time", "mean"),
            mean=(metric, "mean"),
            half=(metric, interval_half_width),
            seeds=("seed", "nunique"),
        )
        .reset_index()
        .sort_values(["round"], kind="stable")
    )
    bands = bands.assign(low=bands["mean"] - bands["half"], high=bands["mean"] + bands["half"], sampled=False)
    if metric == "avg_acc" and {"avg_acc_lo", "avg_acc_hi"} <= set(trace.columns):
        # one seed of a sampled evaluation (evaluation.clients): the band is the estimate's own 95% interval
        sample = trace.dropna(subset=[metric]).groupby(["curve", "profile", "round"], sort=False)[["avg_acc_lo", "avg_acc_hi"]].first()
        keys = pd.MultiIndex.from_frame(bands[["curve", "profile", "round"]])
        lo, hi = sample["avg_acc_lo"].reindex(keys).to_numpy(), sample["avg_acc_hi"].reindex(keys).to_numpy()
        use = (bands["seeds"].to_numpy() == 1) & np.isfinite(lo) & np.isfinite(hi)
        bands.loc[use, "low"], bands.loc[use, "high"], bands.loc[use, "sampled"] = lo[use], hi[use], True
    return bands


def _add_curve(fig: go.Figure, rows: pd.DataFrame, x: str, curve: str, color: str, dash: str, column: int, legend: bool) -> None:
    x_values = rows[x].to_numpy()
    sampled = bool(rows["sampled"].any())
    if rows["seeds"].max() > 1 or sampled:
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([x_values, x_values[::-1]]),
                y=np.concatenate([rows["high"].to_numpy(), rows["low"].to_numpy()[::-1]]),
                mode="lines",
                fill="toself",
                fillcolor=_translucent(color),
                line={"width": 0},
                hoverinfo="skip",
                legendgroup=curve,
                showlegend=False,
                name=f"{curve} ({CONFIDENCE:.0%} interval {'of the sampled estimate' if sampled else 'over seeds'})",
            ),
            row=1,
            col=column,
        )
    fig.add_trace(
        go.Scatter(
            x=x_values,
            y=rows["mean"].to_numpy(),
            mode="lines+markers" if len(rows) <= 30 else "lines",
            line={"color": color, "dash": dash},
            name=curve,
            legendgroup=curve,
            showlegend=legend,
            customdata=rows[["round", "time"]].to_numpy(),
            hovertemplate=f"{curve}<br>round %{{customdata[0]}}<br>time %{{customdata[1]:.2f}}<br>accuracy %{{y:.3f}}<extra></extra>",
        ),
        row=1,
        col=column,
    )


def _panels(trace: pd.DataFrame, metric: str, x: str, panel_profiles: list[str], titles: list[str], x_titles: list[str], title: str):
    curves = _ordered(trace["curve"])
    colors, dashes = curve_colors(curves), curve_dashes(curves)
    bands = _seed_bands(trace, metric)
    fig = make_subplots(rows=1, cols=len(panel_profiles), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.04)
    for column, profile in enumerate(panel_profiles, start=1):
        for curve in curves:
            rows = bands[(bands["curve"] == curve) & (bands["profile"] == profile)]
            if len(rows):
                _add_curve(fig, rows, x, curve, colors[curve], dashes[curve], column, legend=column == 1)
        fig.update_xaxes(title_text=x_titles[column - 1], row=1, col=column)
    fig.update_yaxes(title_text=METRIC_LABELS[metric], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=[0, 1.02])
    if bands["seeds"].max() > 1:
        seeds = int(bands["seeds"].max())
        title += f"<br><sup>line: mean over {seeds} seeds (aligned by round), band: its {CONFIDENCE:.0%} Student-t interval</sup>"
    elif bands["sampled"].any():
        title += f"<br><sup>band: the {CONFIDENCE:.0%} interval of the sampled clients' mean (evaluation.clients)</sup>"
    fig.update_layout(title=title, template="plotly_white", legend={"title": {"text": "curve"}}, hovermode="closest")
    return fig


def _time_axis_title(unit: str) -> str:
    return "normalised time t / T_dl" if unit == "T_dl" else f"time ({unit})"


def fig_accuracy_vs_time(trace: pd.DataFrame, metric: str = "avg_acc") -> go.Figure:
    """Fig. 3 style: one panel per profile, one line per curve, mean over seeds with its interval as a band.

    Seeds are aligned by round: the line goes through (mean time, mean accuracy) of each round.
    """
    validate_trace(trace)
    _check_metric(metric)
    profiles = _ordered(trace["profile"])
    units = trace.groupby("profile", sort=False)["time_unit"].first()
    return _panels(
        trace,
        metric,
        "time",
        profiles,
        profiles,
        [_time_axis_title(units[p]) for p in profiles],
        f"{METRIC_LABELS[metric].capitalize()} vs simulated time",
    )


def fig_accuracy_vs_round(trace: pd.DataFrame, metric: str = "avg_acc") -> go.Figure:
    """Fig. 2 style: accuracy against the round.

    One panel when every profile gave the same per-round accuracies (training
    replayed through the profiles), else one panel per profile.
    """
    validate_trace(trace)
    _check_metric(metric)
    profiles = _ordered(trace["profile"])
    if len(profiles) > 1 and identical_across_profiles(trace, ["curve", "seed", "round"], metric):
        panel_profiles, titles = profiles[:1], [f"all profiles ({', '.join(profiles)}): identical per round"]
    else:
        panel_profiles, titles = profiles, profiles
    return _panels(
        trace,
        metric,
        "round",
        panel_profiles,
        titles,
        ["round"] * len(panel_profiles),
        f"{METRIC_LABELS[metric].capitalize()} vs round",
    )


def fig_worst_client(clients: pd.DataFrame) -> go.Figure:
    """Every client's final accuracy per curve (box + points): the worst-client view.

    One box per curve when all profiles agree client by client, else one box per profile.
    """
    validate_clients(clients)
    profiles = _ordered(clients["profile"])
    same = identical_across_profiles(clients, ["curve", "seed", "client"], "accuracy")
    shown = [(profiles[0], f"all profiles ({', '.join(profiles)})")] if same else [(p, p) for p in profiles]
    fig = go.Figure()
    for index, (profile, name) in enumerate(shown):
        rows = clients[clients["profile"] == profile]
        fig.add_trace(
            go.Box(
                x=rows["curve"],
                y=rows["accuracy"],
                name=name,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker={"color": _PALETTE[index % len(_PALETTE)], "size": 5},
                customdata=rows[["client", "group", "seed"]].to_numpy(),
                hovertemplate="%{x}<br>client %{customdata[0]} (group %{customdata[1]}, seed %{customdata[2]})"
                "<br>accuracy %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        title="Final accuracy of every client (own model, own test split)",
        template="plotly_white",
        boxmode="group",
        xaxis={"title": {"text": "curve"}, "categoryorder": "array", "categoryarray": _ordered(clients["curve"])},
        yaxis={"title": {"text": "client accuracy"}, "tickformat": ".0%", "range": [0, 1.02]},
        legend={"title": {"text": "profile"}},
        showlegend=True,
    )
    return fig


def _static_note(directory: Path, names) -> str:
    """The note of a run whose figures are HTML only; ``report`` writes the same one."""
    return f"no {', '.join(names)} in this run directory: `wirelessfl plot {directory}` draws them"


def _write_figures(
    run_dir, trace, clients, image_format: str | None, client_rounds: pd.DataFrame | None = None,
    target: float | None = None, timeline_round: int | None = None,
) -> Written:
    from wirelessfl.results.energy import fig_accuracy_vs_energy, fig_energy_time_pareto, has_energy
    from wirelessfl.results.timeline import fig_timeline

    directory = Path(run_dir)
    figures = {"fig3": fig_accuracy_vs_time(trace), "fig2": fig_accuracy_vs_round(trace)}
    html_only = {"worst_clients": fig_worst_client(clients)}
    if has_energy(trace):
        figures["energy"] = fig_accuracy_vs_energy(trace)
        if target is not None:
            figures["energy_pareto"] = fig_energy_time_pareto(trace, target)
    if client_rounds is not None and len(client_rounds):
        figures["timeline"] = fig_timeline(client_rounds, trace, timeline_round)
    written = [write_plotly_js(directory)]
    for name, fig in {**figures, **html_only}.items():
        atomic_write_text(directory / f"{name}.html", fig.to_html(include_plotlyjs="directory", full_html=True))
        written.append(directory / f"{name}.html")
    if image_format is None:
        return Written(written, [_static_note(directory, [f"{name}.png" for name in figures])])
    from wirelessfl.results.static import write_static  # matplotlib (1 s to import) only to draw
    return Written(written + write_static(directory, figures, image_format), [])


def write_figures(
    run_dir, trace: pd.DataFrame, clients: pd.DataFrame, *, image_format: str | None = "png",
    client_rounds: pd.DataFrame | None = None, target: float | None = None,
) -> list[str]:
    """Write fig3, fig2, energy, energy_pareto (given ``target``) and timeline (given ``client_rounds``) as HTML
    and as static ``image_format`` files (None: HTML only), and worst_clients.html.

    Returns notes for summary.md (which static figures were not drawn).
    """
    return _write_figures(run_dir, trace, clients, image_format, client_rounds, target).notes


def plot_run(run_dir, image_format: str | None = "png", *, timeline_round: int | None = None) -> Written:
    """Re-make every figure of a run directory from its tables; ``timeline_round`` picks the timeline's round."""
    from wirelessfl.results.timeline import CLIENT_ROUNDS_FILE, read_client_rounds

    directory = Path(run_dir)
    rounds = read_client_rounds(directory) if (directory / CLIENT_ROUNDS_FILE).is_file() or timeline_round is not None else None
    try:
        target = _scenario_target(directory)
    except ValueError:
        target = None
    return _write_figures(directory, read_trace(directory), read_clients(directory), image_format, rounds, target, timeline_round)


def plot_timeline(run_dir, round: int, image_format: str | None = "png") -> Written:
    """Re-make only the timeline of a run directory (timeline.html and its static figure), for ``round``."""
    from wirelessfl.results.timeline import TIMELINE_HTML, fig_timeline, read_client_rounds

    directory = Path(run_dir)
    fig = fig_timeline(read_client_rounds(directory), read_trace(directory), round)
    written = [write_plotly_js(directory)]
    atomic_write_text(directory / TIMELINE_HTML, fig.to_html(include_plotlyjs="directory", full_html=True))
    written.append(directory / TIMELINE_HTML)
    if image_format is None:
        return Written(written, [_static_note(directory, ["timeline.png"])])
    from wirelessfl.results.static import write_static  # matplotlib (1 s to import) only to draw
    return Written(written + write_static(directory, {"timeline": fig}, image_format), [])


def _scenario_target(run_dir: Path) -> float:
    """scenario.yaml's ``target_accuracy``, read as plain YAML (no scenario validation: nothing is imported)."""
    path = run_dir / "scenario.yaml"
    if not path.exists():
        raise ValueError(f"no target accuracy given and {path} does not exist; pass the target explicitly")
    try:
        scenario = yaml.safe_load(read_text_file(path))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).strip().split("\n")[0]
        raise ValueError(f"{path}: not valid YAML{where}: {problem}; fix it or pass --target") from None
    except RecursionError:
        raise ValueError(f"{path}: not valid YAML: nested too deeply; fix it or pass --target") from None
    if not isinstance(scenario, dict) or "target_accuracy" not in scenario:
        raise ValueError(f"no target accuracy given and {path} has no top-level 'target_accuracy'; pass the target explicitly")
    return scenario["target_accuracy"]


def _run_notes(summary: Path) -> list[str]:
    """The notes of an existing summary.md about the run itself (training mode, runtime), not about its PNGs."""
    if not summary.exists():
        return []
    _, found, tail = read_text_file(summary).partition("\n## Notes\n")
    notes = [line[2:] for line in tail.splitlines() if line.startswith("- ")] if found else []
    return [note for note in notes if note != "none" and not note.startswith(("PNG export skipped", "no fig"))]


KEPT_STREAMS_NOTE = "streams and clusters: kept from the previous summary.md (no diagnostics.json in this run directory to remake them)"


class RunReport(NamedTuple):
    """What ``report`` rewrites in one run directory, made in full before anything is written."""

    directory: Path
    summary: str
    streams_html: str | None

    def write(self) -> Path:
        """Write streams.html (when the run formed streams), then summary.md; returns summary.md's path."""
        from wirelessfl.results.streams import write_streams_html

        write_streams_html(self.directory, self.streams_html)
        path = self.directory / "summary.md"
        atomic_write_text(path, self.summary)
        return path


def report_run(run_dir, target: float | None = None, last_rounds: int = 1) -> Path:
    """Re-make summary.md of a run directory (:func:`prepare_report`, then its files written)."""
    return prepare_report(run_dir, target, last_rounds).write()


def prepare_report(run_dir, target: float | None = None, last_rounds: int = 1) -> RunReport:
    """The summary.md (and streams.html) of a run directory, read and made without writing anything, so that a bad
    input is refused with the run folder as it was; the target defaults to scenario.yaml's ``target_accuracy``;
    ``last_rounds`` > 1 reports accuracies as means over the evaluated rounds among the last ones.

    The run's own notes (training mode, runtime) are kept; the PNG note is re-checked. Without
    diagnostics.json the streams section cannot be remade, so the previous one is kept, with a note. The paired
    ranking says whether the curves of a seed share their draws, from the run's ``provenance.json``.
    """
    directory = Path(run_dir)
    trace, clients = read_trace(directory), read_clients(directory)
    if target is None:
        target = _scenario_target(directory)
    notes = _run_notes(directory / "summary.md")
    missing = [name for name in PNG_FIGURES if not (directory / name).exists()]
    if missing:
        notes.append(_static_note(directory, missing))
    from wirelessfl.results.energy import energy_summary_md
    from wirelessfl.results.sampled import sample_section
    from wirelessfl.results.streams import previous_stream_section, read_diagnostics, stream_outputs

    html = None
    if diagnostics := read_diagnostics(directory):
        html, streams = stream_outputs(diagnostics, clients)
    else:
        streams = previous_stream_section(directory / "summary.md")
        if streams and KEPT_STREAMS_NOTE not in notes:
            notes.append(KEPT_STREAMS_NOTE)
    check_target(target)
    sections = energy_summary_md(trace, target) + sample_section(trace) + streams
    summary = summary_markdown(
        trace, clients, str(trace["scenario"].iloc[0]), target, notes, sections, last_rounds,
        shares_draws(read_provenance(directory)),
    )
    return RunReport(directory, summary, html)
