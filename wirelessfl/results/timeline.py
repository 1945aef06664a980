"""Where one round's time goes: a per-client Gantt chart from ``client_rounds.parquet``.

Each participant's round is cut into consecutive segments covering [0, round
time] (``wirelessfl.network.energy.segments``): receiving each downlink stream
it is sent, computing, waiting for an uplink channel, uploading (HARQ
retransmissions included: slot by slot inside the upload), and idle for the
rest. One column of panels per profile, one row per curve, so k = 1 against
k = m streams (m receptions instead of one) and phased against pipelined
schedules (everyone computing after the whole downlink, or each as soon as its
own stream has arrived) are visible at a glance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from wirelessfl.network.energy import SEGMENT_KINDS, segments

CLIENT_ROUNDS_FILE = "client_rounds.parquet"
TIMELINE_HTML = "timeline.html"
TIMELINE_PNG = "timeline.png"
MAX_PANEL_CURVES = 8
"""More curves than this: the first ones, in the scenario's order (a note says which were left out)."""
MAX_CLIENTS = 60
"""More participants than this: the ones with the lowest ids (a bar per client stops being readable)."""
_COLORS = {
    "receive": "#1f77b4", "compute": "#2ca02c", "wait": "#ff7f0e", "upload": "#d62728",
    "idle": "#e5e5e5",
}


def default_round(rounds: int) -> int:
    """The middle round (round 1 of a one-round run)."""
    return max(1, (rounds + 1) // 2)


def read_client_rounds(run_dir) -> pd.DataFrame:
    """``client_rounds.parquet`` of a run directory; one line naming it when it is missing."""
    path = Path(run_dir) / CLIENT_ROUNDS_FILE
    if not path.is_file():
        raise ValueError(f"{path}: no per-client round table in this run directory (runs before device energy, and sweep units, have none)")
    return pd.read_parquet(path)


def client_segments(rows: pd.DataFrame, round_time: float) -> pd.DataFrame:
    """Every segment of every row of one round: client, kind, start, end."""
    out = []
    for r in rows.itertuples():
        for kind, a, b in segments(tuple(r.receptions), r.t_compute_start, r.t_computed, r.t_upload_start,
                                   r.airtime, round_time):
            out.append((int(r.client), kind, a, b))
    return pd.DataFrame(out, columns=["client", "kind", "start", "end"])


def round_table(client_rounds: pd.DataFrame, trace: pd.DataFrame, round: int, seed: int | None = None) -> pd.DataFrame:
    """The segments of ``round`` for every (profile, curve) of one seed (the first unless given)."""
    if round not in set(client_rounds["round"].tolist()):
        rounds = sorted(set(client_rounds["round"].tolist()))
        raise ValueError(f"--timeline: round {round} is not in this run; rounds are {rounds[0]}..{rounds[-1]}")
    seed = int(client_rounds["seed"].iloc[0]) if seed is None else seed
    chosen = client_rounds[(client_rounds["round"] == round) & (client_rounds["seed"] == seed)]
    shown = np.sort(chosen["client"].unique())[:MAX_CLIENTS]
    chosen = chosen[chosen["client"].isin(shown)]
    ends = trace[(trace["round"] == round) & (trace["seed"] == seed)].set_index(["curve", "profile"])["round_time"]
    parts = []
    for (curve, profile), rows in chosen.groupby(["curve", "profile"], sort=False):
        table = client_segments(rows, float(ends[(curve, profile)]))
        parts.append(table.assign(curve=curve, profile=profile, time_unit=rows["time_unit"].iloc[0]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["client", "kind", "start", "end"])


def _axis(name: str, index: int) -> str:
    """make_subplots' name of the ``index``-th axis (row-major from 1): ``xaxis``, ``xaxis2``, ..."""
    return name if index == 1 else f"{name}{index}"


def fig_timeline(client_rounds: pd.DataFrame, trace: pd.DataFrame, round: int | None = None, seed: int | None = None) -> go.Figure:
    """Gantt chart of one round (default: the middle one, or the round nearest to it in which some client took
    part: devices whose batteries ran out take part in no later round): a column of panels per profile, a row per curve."""
    if round is None:
        middle = default_round(int(trace["round"].max()))
        present = set(client_rounds["round"].tolist())
        round = min(present, key=lambda r: (abs(r - middle), r)) if present else middle
    table = round_table(client_rounds, trace, round, seed)
    profiles = list(dict.fromkeys(trace["profile"]))
    curves = list(dict.fromkeys(trace["curve"]))
    shown = curves[:MAX_PANEL_CURVES]
    titles = [f"{curve} | {profile}" for curve in shown for profile in profiles]
    fig = make_subplots(rows=len(shown), cols=len(profiles), subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.05, vertical_spacing=0.4 / max(len(shown), 1))
    pieces = dict(tuple(table.groupby(["curve", "profile", "kind"], sort=False))) if len(table) else {}
    units = dict(zip(zip(table["curve"], table["profile"]), table["time_unit"])) if len(table) else {}
    traces, rows, columns, legend = [], [], [], set()
    for row, curve in enumerate(shown, start=1):
        for column, profile in enumerate(profiles, start=1):
            for kind in SEGMENT_KINDS:
                part = pieces.get((curve, profile, kind))
                if part is None:
                    continue
                start, end = part["start"].to_numpy(), part["end"].to_numpy()
                traces.append(go.Bar(
                    x=end - start, base=start, y=part["client"].astype(str).to_numpy(), orientation="h",
                    marker={"color": _COLORS[kind], "line": {"width": 0.5, "color": "white"}},
                    name=kind, legendgroup=kind, showlegend=kind not in legend, customdata=np.stack([start, end], axis=1),
                    hovertemplate=f"client %{{y}}<br>{kind} %{{customdata[0]:.3g}} - %{{customdata[1]:.3g}}<extra></extra>",
                ))
                rows.append(row)
                columns.append(column)
                legend.add(kind)
    if traces:
        fig.add_traces(traces, rows=rows, cols=columns)
    layout = {}
    for column, profile in enumerate(profiles, start=1):  # every panel labelled: a reader looks at one panel at a time
        unit = next((units[(c, profile)] for c in shown if (c, profile) in units), "")
        for row in range(1, len(shown) + 1):
            layout[_axis("xaxis", (row - 1) * len(profiles) + column)] = {"title": {"text": f"time in round ({unit})"}}
            layout[_axis("yaxis", (row - 1) * len(profiles) + column)] = {"title": {"text": "client"}}
    fig.update_layout(layout)
    fig.update_yaxes(type="category")
    subtitle = "seed " + str(int(client_rounds["seed"].iloc[0]) if seed is None else seed)
    if len(curves) > len(shown):
        subtitle += f"; {len(curves) - len(shown)} more curves not shown: {', '.join(curves[len(shown):])}"
    if client_rounds["client"].nunique() > MAX_CLIENTS:
        subtitle += f"; the {MAX_CLIENTS} participants with the lowest ids"
    fig.update_layout(
        title=f"Round {round}: where each client's time goes<br><sup>{subtitle}</sup>", barmode="overlay",
        template="plotly_white", width=max(900, 480 * len(profiles)),
        height=max(420, 120 + len(shown) * (60 + 9 * min(client_rounds["client"].nunique(), MAX_CLIENTS))),
        legend={"title": {"text": "activity"}},
    )
    return fig
