"""What the downlink streams (ucfl) and clusters (cfl) were, from a run's diagnostics.json.

Stream formation decides who shares a personalized multicast; when it misses
the data's groups the collaborative curve quietly becomes FedAvg (EMNIST
scenario 2: streams of 97 + 1 + 1 + 1 users, docs/research/reproduction.md). Every run
therefore reports, per round that formed streams, their sizes and the adjusted
Rand index (ARI) against the ground-truth groups of the split (the clients
table's ``group`` column): 1 = the groups exactly, about 0 = no better than a
random partition of the same sizes.

``diagnostics`` is ``diagnostics.json`` as loaded: unit key (``seed0__ucfl_streams_4``,
plus ``__<profile>`` for units trained per profile) -> round -> the
algorithm's ``extra``, where a formation round holds ``assignment`` (one
stream/cluster id per client).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from wirelessfl.results.io import atomic_write_text, read_text_file
from wirelessfl.results.plotly_js import write_plotly_js

#: Below this ARI (with more than one true group) the summary warns that the streams miss the groups.
ARI_WARNING = 0.2

COLUMNS = ["unit", "curve", "seed", "profile", "round", "kind", "streams", "sizes", "true_groups", "ari", "assignment"]


def _slug(text: str) -> str:
    """As simulate's unit keys spell a curve name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def _units(clients: pd.DataFrame) -> dict[str, tuple[str, int, str, np.ndarray]]:
    """unit key -> (curve, seed, profile or "", true group per client) for every key a run can write."""
    units: dict[str, tuple[str, int, str, np.ndarray]] = {}
    for (curve, seed), rows in clients.groupby(["curve", "seed"], sort=False):
        first = rows[rows["profile"] == rows["profile"].iloc[0]].sort_values("client")
        groups = first["group"].to_numpy(dtype=np.int64)
        base = f"seed{int(seed)}__{_slug(str(curve))}"
        units[base] = (str(curve), int(seed), "", groups)
        for profile in rows["profile"].unique():
            units[f"{base}__{profile}"] = (str(curve), int(seed), str(profile), groups)
    return units


def stream_report(diagnostics: Mapping[str, Mapping[Any, Mapping[str, Any]]], clients: pd.DataFrame) -> pd.DataFrame:
    """One row per (unit, round) that formed streams or clusters (columns ``COLUMNS``).

    A cfl unit that never split gets one row, at its last round, with everybody
    in one cluster. ``ari`` is NaN when the split has a single true group.
    Units absent from ``clients`` are skipped.
    """
    units = _units(clients)
    rows = []
    for key, rounds in diagnostics.items():
        if key not in units:
            continue
        curve, seed, profile, groups = units[key]
        ordered = sorted(((int(r), extra) for r, extra in rounds.items()), key=lambda item: item[0])
        formed = [(r, extra) for r, extra in ordered if "assignment" in extra]
        if not formed and any("clusters" in extra for _, extra in ordered):
            formed = [(ordered[-1][0], {"assignment": [0] * len(groups), "clusters": 1})]
        if formed:
            from sklearn.metrics import adjusted_rand_score  # scikit-learn (1.3 s to import) only for runs that form streams
        for rnd, extra in formed:
            assignment = np.asarray(extra["assignment"], dtype=np.int64)
            if len(assignment) != len(groups):
                raise ValueError(
                    f"diagnostics {key} round {rnd}: assignment has {len(assignment)} clients, the clients table {len(groups)}"
                )
            true_groups = len(np.unique(groups))
            sizes = sorted(np.bincount(assignment)[np.bincount(assignment) > 0].tolist(), reverse=True)
            rows.append(
                {
                    "unit": key,
                    "curve": curve,
                    "seed": seed,
                    "profile": profile,
                    "round": rnd,
                    "kind": "clusters" if "clusters" in extra else "streams",
                    "streams": len(sizes),
                    "sizes": format_sizes(sizes),
                    "true_groups": true_groups,
                    "ari": float(adjusted_rand_score(groups, assignment)) if true_groups > 1 else float("nan"),
                    "assignment": assignment.tolist(),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def format_sizes(sizes: list[int]) -> str:
    """``97/1/1/1``; a run of more than three equal sizes as ``1x20``."""
    parts: list[str] = []
    i = 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        parts.extend([str(sizes[i])] * (j - i) if j - i <= 3 else [f"{sizes[i]}x{j - i}"])
        i = j
    return "/".join(parts)


def last_formations(frame: pd.DataFrame) -> pd.DataFrame:
    """The last formation of each unit, in the order curves first appear."""
    if frame.empty:
        return frame
    last = frame.sort_values("round", kind="stable").groupby("unit", sort=False).tail(1)
    order = {curve: i for i, curve in enumerate(dict.fromkeys(frame["curve"]))}
    return last.sort_values(["curve", "seed", "profile"], key=lambda s: s.map(order) if s.name == "curve" else s, kind="stable")


STREAMS_HEADING = "## Streams and clusters"


def previous_stream_section(summary: Path) -> list[str]:
    """The streams section of an existing summary.md, for a run directory that has lost its diagnostics.json
    (a copy of its traces only): the section cannot be remade there, and re-reporting must not drop it."""
    if not summary.exists():
        return []
    lines = read_text_file(summary).splitlines()
    if STREAMS_HEADING not in lines:
        return []
    start = lines.index(STREAMS_HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def stream_summary_md(frame: pd.DataFrame) -> list[str]:
    """Markdown lines for summary.md: each run's last formation and a warning per curve whose streams
    miss the true groups (mean ARI < 0.2 with more than one true group, streams not all single users, and not
    one stream asked for; one CFL cluster is CFL's own finding and is warned about)."""
    if frame.empty:
        return []
    last = last_formations(frame)
    show_profile = bool((last["profile"] != "").any())
    lines = [
        STREAMS_HEADING,
        "",
        "Who shares a downlink stream (ucfl) or a cluster (cfl) at the last round that formed them: sizes, largest "
        "first, and the adjusted Rand index against the split's true groups (1 = the groups exactly, ~0 = chance).",
        "",
        "| curve | seed |" + (" profile |" if show_profile else "") + " round | streams | sizes | ARI |",
        "|---|---:|" + ("---|" if show_profile else "") + "---:|---:|---|---:|",
    ]
    for r in last.itertuples():
        ari = "n/a (one group)" if np.isnan(r.ari) else f"{r.ari:.2f}"
        profile = f" {r.profile} |" if show_profile else ""
        lines.append(f"| {r.curve} | {r.seed} |{profile} {r.round} | {r.streams} | {r.sizes} | {ari} |")
    warnings = stream_warnings(frame)
    if warnings:
        lines += ["", *(f"- **warning** {w}" for w in warnings)]
    return lines + [""]


def stream_warnings(frame: pd.DataFrame) -> list[str]:
    """One line per curve whose streams or clusters miss the true groups (see :func:`stream_summary_md`)."""
    if frame.empty:
        return []
    last = last_formations(frame)
    warnings = []
    for curve, runs in last.groupby("curve", sort=False):
        one_stream = (runs["kind"] == "streams") & (runs["streams"] == 1)  # asked for: no grouping to judge
        grouped = runs[(runs["true_groups"] > 1) & (runs["sizes"].map(_not_per_user)) & ~one_stream]
        if grouped.empty or grouped["ari"].mean() >= ARI_WARNING:
            continue
        worst = grouped.loc[grouped["ari"].idxmin()]
        noun = "clusters" if worst["kind"] == "clusters" else "streams"
        groups = int(worst["true_groups"])
        if len(grouped) == 1:
            warnings.append(f"{curve}: {noun} {worst['sizes']} do not follow the {groups} true groups (ARI {worst['ari']:.2f})")
        else:
            warnings.append(
                f"{curve}: {noun} {worst['sizes']} (seed {worst['seed']}) do not follow the {groups} true groups "
                f"(ARI {grouped['ari'].mean():.2f}, mean over {len(grouped)} runs)"
            )
    return warnings


def _not_per_user(sizes: str) -> bool:
    """False for per-user streams (every size 1): that is no grouping to compare."""
    return any(part not in ("1",) and not part.startswith("1x") for part in sizes.split("/"))


def contingency(assignment: list[int], groups: np.ndarray) -> np.ndarray:
    """``[true group, stream]`` client counts."""
    a = np.asarray(assignment, dtype=np.int64)
    _, g = np.unique(groups, return_inverse=True)
    table = np.zeros((int(g.max()) + 1, int(a.max()) + 1), dtype=np.int64)
    np.add.at(table, (g, a), 1)
    return table


def stream_figure(frame: pd.DataFrame, clients: pd.DataFrame) -> go.Figure:
    """Heatmaps of true group x stream client counts, one panel per curve (its first run's last formation)."""
    if frame.empty:
        raise ValueError("stream_figure needs at least one formation (no ucfl/cfl assignment in the diagnostics)")
    units = _units(clients)
    panels = last_formations(frame).groupby("curve", sort=False).head(1)
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    titles = [
        f"{r.curve} (seed {r.seed}, round {r.round})" + ("" if np.isnan(r.ari) else f", ARI {r.ari:.2f}")
        for r in panels.itertuples()
    ]
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.18)
    for index, r in enumerate(panels.itertuples()):
        table = contingency(r.assignment, units[r.unit][3])
        row, col = index // columns + 1, index % columns + 1
        fig.add_trace(
            go.Heatmap(
                z=table,
                x=[f"{'c' if r.kind == 'clusters' else 's'}{c}" for c in range(table.shape[1])],
                y=[f"group {g}" for g in range(table.shape[0])],
                text=table,
                texttemplate="%{text}",
                colorscale="Blues",
                showscale=False,
                hovertemplate="%{y}, %{x}: %{z} clients<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(title_text="stream" if r.kind == "streams" else "cluster", row=row, col=col)
    fig.update_layout(
        title="Who is in which stream / cluster, against the true groups (client counts)",
        height=320 * rows + 80,
        width=380 * columns + 80,
        template="plotly_white",
    )
    return fig


def read_diagnostics(run_dir) -> dict[str, Any]:
    """``diagnostics.json`` of a run directory ({} when the run wrote none)."""
    path = Path(run_dir) / "diagnostics.json"
    if not path.exists():
        return {}
    try:
        return json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None


def stream_outputs(diagnostics: Mapping[str, Any], clients: pd.DataFrame) -> tuple[str | None, list[str]]:
    """``streams.html``'s text (None when nothing formed streams) and the summary.md section lines, made before
    anything is written."""
    frame = stream_report(diagnostics, clients)
    if frame.empty:
        return None, []
    html = stream_figure(frame, clients).to_html(include_plotlyjs="directory", full_html=True)
    return html, stream_summary_md(frame)


def write_streams_html(run_dir, html: str | None) -> None:
    """``streams.html`` (and the plotly.js beside it) when there is one."""
    if html is not None:
        directory = Path(run_dir)
        write_plotly_js(directory)
        atomic_write_text(directory / "streams.html", html)


def write_stream_outputs(run_dir, diagnostics: Mapping[str, Any], clients: pd.DataFrame) -> list[str]:
    """Write ``streams.html`` (when anything formed streams) and return the summary.md section lines."""
    html, lines = stream_outputs(diagnostics, clients)
    write_streams_html(run_dir, html)
    return lines
