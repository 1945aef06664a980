"""Trade-off maps of a sweep: which method and which k reach the target first, and what the worst user gets.

The question behind a sweep is the one of M. Mestoukirdi et al.,
"User-Centric Federated Learning: Trading off Wireless Resources for
Personalization" (Fig. 3 and §IV-C):
more downlink streams k personalize better but cost downlink time, and whether
that pays depends on the network (rho, mu, T_min, channels, cell size). A sweep
times every curve under every grid point; these figures read its table
(``sweep.csv``, one row per grid point x curve x seed):

* ``time_to_target``: per cell of two axes, the time of the curve that reaches
  the target first, annotated with its name; one panel per value of the other axes.
* ``best_k``: per cell of the network axes, the number of streams that reaches
  the target first; ``streams=auto`` is not a candidate but its time is printed
  beside the winner, so the map shows whether automatic k lands on the best k.
* ``best_method``: per cell, the method that reaches the target first (all
  stream counts of one method are one method; its best k is named in the text).
* ``pareto``: time to target against final worst-user accuracy, one marker per
  (grid point, curve), the Pareto front (faster and fairer) highlighted.

Seeds are aggregated per (grid point, curve): the time is the mean over the
seeds that reached the target (a cell reached by only some seeds is marked
``*``), with a 95% Student-t interval over those seeds (``± h``, from two seeds
on); accuracies are means over all seeds. A curve reached by every seed
ranks before one reached by only some, whatever their means, since a mean over
the lucky seeds flatters. Every curve of a seed shares its random numbers, so
the first two candidates of a cell are compared seed by seed: when both were
reached by every seed and the 95% interval of their per-seed time difference
holds 0, the cell is a *tie* ("tie: A / B"): the seeds do not tell them apart,
so the map names both and the colour is only the better mean's. With one seed
there is no interval and no tie can be seen; the title says the map is one draw. Failed units (``status`` "failed") are left out and
a cell where every unit failed says so.

References that know the truth (``REFERENCE_ALGORITHMS``: Oracle aggregates
within the true groups) are not in the contest: they never win a cell, and
their time is printed beside the winner ("oracle: 6.00").

Axis values are categories in numeric order (strings such as ``m``, ``auto``
after the numbers), not a numeric scale: grids are usually geometric.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from wirelessfl.results.intervals import CONFIDENCE, interval_half_width, paired_difference
from wirelessfl.results.io import atomic_write_text
from wirelessfl.results.plotly_js import write_plotly_js
from wirelessfl.results.tables import REFERENCE_ALGORITHMS

TABLE_COLUMNS = (
    "point",
    "base_profile",
    "profile",
    "curve",
    "algorithm",
    "variant",
    "seed",
    "status",
    "target",
    "time_to_target",
    "time_unit",
    "final_avg_acc",
    "final_worst_acc",
)
FIGURES = ("time_to_target", "best_k", "best_method", "pareto", "energy_to_target", "best_method_energy")
NOT_REACHED_COLOR = "#bdbdbd"
FAILED_COLOR = "#616161"
_PALETTE = qualitative.Plotly + qualitative.D3
_LEARNING_PREFIXES = ("training.", "data.", "model.", "algorithms.")
_LEARNING_FIELDS = ("seeds", "rounds", "eval_every", "target_accuracy")
_STREAMS_AXIS = re.compile(r"^algorithms\.[^.]+\.streams$")
STREAMS_COLUMN = "params.streams"
"""The number of downlink streams k a curve sets (``sweep.csv``'s parameter columns)."""
_STREAMS_VARIANT = re.compile(r"(?:^|\s)streams=(\S+)")
"""k in a sweep table written before the parameter columns: read back from the ``variant`` text (the fallback)."""
_AXIS_LABELS = {
    "rho": "ρ = T_ul / T_dl",
    "mu": "μ (compute-time rate, 1 / {unit})",
    "t_min": "T_min ({unit})",
    "t_dl": "T_dl ({unit})",
    "deadline": "deadline ({unit})",
    "channels": "uplink channels",
    "schedule": "schedule",
    "duplex": "duplex",
    "stream_order": "stream order",
    "bits_per_parameter": "bits per parameter",
    "physical.cell_radius_m": "cell radius (m)",
    "physical.min_distance_m": "min. distance (m)",
    "physical.bs_power_dbm": "BS power (dBm)",
    "physical.ue_power_dbm": "UE power (dBm)",
    "physical.bandwidth_hz": "bandwidth (Hz)",
    "physical.ul_bandwidth_hz": "uplink bandwidth (Hz)",
    "physical.path_loss_exponent": "path-loss exponent",
    "physical.noise_density_dbm_hz": "noise density (dBm/Hz)",
    "physical.bs_antenna_gain_dbi": "gNB antenna gain (dBi)",
    "physical.ue_antenna_gain_dbi": "UE antenna gain (dBi)",
    "physical.noise_figure_bs_db": "gNB noise figure (dB)",
    "physical.noise_figure_ue_db": "UE noise figure (dB)",
    "physical.other_losses_db": "other losses (dB)",
    "training.lr": "learning rate",
    "training.participation": "participation",
}
_NA = "\x00NA"
"""Axis value of a row the axis does not apply to (the k column of a FedAvg row)."""


def is_network_axis(axis: str) -> bool:
    """A network axis changes only the timing (a SystemProfile field or ``physical.<field>``)."""
    return not (axis.startswith(_LEARNING_PREFIXES) or axis in _LEARNING_FIELDS)


def _is_algorithm_axis(axis: str) -> bool:
    return axis.startswith("algorithms.")


def _fmt_value(value) -> str:
    """One axis value as shown: 1.0 -> "1", 0.25 -> "0.25", inf -> "inf", "m" -> "m"; NA -> the NA marker."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_value(v) for v in value) + "]"
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return _NA
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    number = _number(str(value))
    return _fmt_value(number) if number is not None and str(value).strip() not in ("", "nan") else str(value)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _category_order(values) -> list[str]:
    """Distinct shown values: numbers ascending, then other strings in order of appearance."""
    distinct = [v for v in dict.fromkeys(values) if v != _NA]
    numeric = sorted((v for v in distinct if _number(v) is not None), key=lambda v: _number(v))
    return numeric + [v for v in distinct if _number(v) is None]


def _fmt_time(time: float) -> str:
    if time >= 100:
        return f"{time:.0f}"
    return f"{time:.1f}" if time >= 10 else f"{time:.2f}"


def _axis_title(axis: str | None, unit: str) -> str:
    if axis is None:
        return ""
    if _STREAMS_AXIS.match(axis):
        return f"k = downlink streams ({axis.split('.')[1]})"
    return _AXIS_LABELS.get(axis, axis).format(unit=unit)


def _time_title(units: list[str]) -> str:
    return f"time to target ({' / '.join(units)})"


def _check(table: pd.DataFrame, axes: list[str], x, y, facet) -> tuple[str | None, str | None, str | None]:
    missing = [c for c in (*TABLE_COLUMNS, *axes) if c not in table.columns]
    if missing:
        raise ValueError(f"tradeoff: the sweep table has no column {missing[0]!r} (needs {list(TABLE_COLUMNS)} and one per axis)")
    if len(set(axes)) != len(axes):
        raise ValueError(f"tradeoff: axes must be distinct, got {list(axes)}")
    for name, value in (("x", x), ("y", y), ("facet", facet)):
        if value is not None and value not in axes:
            raise ValueError(f"tradeoff: {name} must be one of the sweep axes {list(axes)}, got {value!r}")
    chosen = [v for v in (x, y, facet) if v is not None]
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"tradeoff: x, y and facet must be different axes, got x={x!r}, y={y!r}, facet={facet!r}")
    if x is None or y is None:
        # Default: the first two network axes, then whatever axes are left.
        free = [a for a in sorted(axes, key=lambda a: not is_network_axis(a)) if a not in chosen]
        if x is None and free:
            x = free.pop(0)
        if y is None and free:
            y = free.pop(0)
    return x, y, facet


def _k_value(row: pd.Series, k_axes: list[str]) -> str:
    """The curve's stream count: a swept streams axis, else its ``params.streams`` column (a table written before
    the parameter columns: the ``streams=`` of its variant text)."""
    for axis in k_axes:
        if row[axis] != _NA:
            return row[axis]
    if STREAMS_COLUMN in row.index:
        return _NA if pd.isna(row[STREAMS_COLUMN]) else _fmt_value(row[STREAMS_COLUMN])
    found = _STREAMS_VARIANT.search(str(row["variant"]) if not pd.isna(row["variant"]) else "")
    return found.group(1) if found else _NA


def _label(row: pd.Series, axes: list[str]) -> str:
    """The curve name, plus any swept algorithm parameter the name does not already carry."""
    label = str(row["curve"])
    for axis in axes:
        param = axis.split(".")[-1]
        if _is_algorithm_axis(axis) and row[axis] != _NA and f"{param}=" not in label:
            label += f" {param}={row[axis]}"
    return label


def _method(label: str, k: str) -> str:
    """All fixed stream counts of one method are one method (its label without ``streams=<k>``, ``k`` the curve's
    stream count); ``streams=auto`` stays a method of its own."""
    if k in (_NA, "auto"):
        return label
    return " ".join(token for token in label.split() if token != f"streams={k}")


def seed_summary(table: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """One row per (grid point, base profile, curve): the seeds aggregated as the figures show them.

    ``time`` is the mean time to target over the seeds that reached it (NaN if
    none), ``reached`` / ``seeds`` count them; ``worst_acc``, ``avg_acc`` are
    means over the seeds that ran; ``failed`` counts failed seeds; ``half`` is the half-width of the
    ``CONFIDENCE`` Student-t interval of ``time`` over the seeds that reached (NaN under two);
    ``seed_times`` maps each seed that reached to its time (for the seed-by-seed comparison of :func:`is_tie`);
    ``reference`` marks an algorithm that knows the truth. Axis columns
    hold the shown value, ``label`` the curve name (with any swept algorithm
    parameter the curve name lacks), ``method`` the label without its stream
    count, ``k`` the number of streams (or NA).
    """
    _check(table, list(axes), None, None, None)
    rows = table.copy()
    for axis in axes:
        rows[axis] = rows[axis].map(_fmt_value)
    rows["ok"] = rows["status"].astype(str) == "ok"
    rows["time_to_target"] = pd.to_numeric(rows["time_to_target"], errors="coerce").where(rows["ok"])
    rows["label"] = rows.apply(_label, axis=1, axes=list(axes))
    k_axes = [a for a in axes if _STREAMS_AXIS.match(a)]
    rows["k"] = rows.apply(_k_value, axis=1, k_axes=k_axes)
    out = []
    for _, group in rows.groupby(["point", "base_profile", "label"], sort=False, dropna=False):
        ok = group[group["ok"]]
        first = group.iloc[0]
        reached = ok["time_to_target"].dropna()
        energy = pd.to_numeric(ok["energy_to_target"], errors="coerce").dropna() if "energy_to_target" in ok else pd.Series(dtype=float)
        out.append(
            {
                **{axis: first[axis] for axis in axes},
                "point": first["point"],
                "base_profile": str(first["base_profile"]),
                "profile": first["profile"],
                "label": first["label"],
                "method": _method(first["label"], first["k"]),
                "k": first["k"],
                "time_unit": first["time_unit"],
                "target": float(first["target"]),
                "seeds": len(ok),
                "failed": len(group) - len(ok),
                "reached": len(reached),
                "time": float(reached.mean()) if len(reached) else math.nan,
                "half": interval_half_width(reached.to_numpy(dtype=float)),
                "seed_times": dict(zip(ok.loc[reached.index, "seed"].tolist(), reached.tolist())),
                "reference": str(first["algorithm"]) in REFERENCE_ALGORITHMS,
                "energy_reached": len(energy),
                "energy": float(energy.mean()) if len(energy) else math.nan,
                "energy_half": interval_half_width(energy.to_numpy(dtype=float)),
                "worst_acc": float(ok["final_worst_acc"].mean()) if len(ok) else math.nan,
                "avg_acc": float(ok["final_avg_acc"].mean()) if len(ok) else math.nan,
            }
        )
    return pd.DataFrame(out)


def is_tie(competing: pd.DataFrame) -> bool:
    """The first two of a ranked contest were reached by every seed (two or more) and the interval of their
    seed-by-seed time difference (``seed_times``) holds 0."""
    if len(competing) < 2:
        return False
    a, b = competing.iloc[0], competing.iloc[1]
    if not all(e["reached"] == e["seeds"] and e["reached"] >= 2 for e in (a, b)):
        return False
    mean, half = paired_difference(b["seed_times"], a["seed_times"])
    return not math.isnan(half) and abs(mean) <= half


def _rank(entries: pd.DataFrame) -> pd.DataFrame:
    """Best first: reached by every seed, then by some, then never; each by mean time, then name."""
    ran = entries[entries["seeds"] > 0]
    key = ran.assign(
        _never=ran["reached"] == 0,
        _partial=ran["reached"] < ran["seeds"],
        _time=ran["time"].fillna(math.inf),
    )
    return key.sort_values(["_never", "_partial", "_time", "label"], kind="stable")


def _cell_state(ranked: pd.DataFrame) -> str:
    if ranked.empty:
        return "failed"
    return "not reached" if ranked.iloc[0]["reached"] == 0 else "ok"


def _time_text(entry: pd.Series) -> str:
    mark = "*" if entry["reached"] < entry["seeds"] else ""
    half = entry.get("half", math.nan)
    spread = f" ± {_fmt_time(half)}" if isinstance(half, float) and not math.isnan(half) else ""
    return f"{_fmt_time(entry['time'])}{spread}{mark}"


def _winner(competing: pd.DataFrame, name) -> str:
    """``name(best)<br>time``, or ``tie:<br>A: time<br>B: time`` when the seeds do not separate the first two.

    One line per candidate keeps a cell narrow enough for its text to stay inside it.
    """
    best = competing.iloc[0]
    if is_tie(competing):
        second = competing.iloc[1]
        return f"tie:<br>{name(best)}: {_time_text(best)}<br>{name(second)}: {_time_text(second)}"
    return f"{name(best)}<br>{_time_text(best)}"


def _beside(ranked: pd.DataFrame) -> str:
    """The references' times, printed under the contest's result (``oracle: 6.00``)."""
    refs = ranked[ranked["reference"]]
    return "".join(f"<br>{e['label']}: {_time_text(e) if e['reached'] else 'not reached'}" for _, e in refs.iterrows())


def _seed_note(entries: pd.DataFrame) -> str:
    notes = []
    if entries["seeds"].max() <= 1 and entries["failed"].max() == 0:
        notes.append("one seed: no interval, a tie cannot be seen; read each cell as one draw")
    else:
        notes.append(f"mean over the seeds that reached the target ± {CONFIDENCE:.0%} t-interval")
        notes.append("tie: the first two's per-seed difference has a 95% interval holding 0; * = reached by only some seeds")
    refs = sorted(set(entries.loc[entries["reference"], "label"]))
    if refs:
        notes.append(f"{', '.join(refs)} (knows the true groups) shown beside, not ranked")
    return "".join(f"<br><sup>{note}</sup>" for note in notes)


def _panels(entries: pd.DataFrame, panel_axes: list[str], labels: dict[str, str] | None = None) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per combination of the panel axes, in axis order; ``labels`` titles a base profile's panels."""
    if not panel_axes:
        return [("", entries)]
    orders = [_category_order(entries[a]) for a in panel_axes]
    keys = entries[panel_axes].apply(tuple, axis=1)
    out = []
    for combo in pd.MultiIndex.from_product(orders) if len(orders) > 1 else [(v,) for v in orders[0]]:
        chosen = entries[keys == tuple(combo)]
        if len(chosen):
            name = ", ".join(_panel_name(a, v, labels or {}) for a, v in zip(panel_axes, combo))
            out.append((name, chosen))
    return out


def _panel_name(axis: str, value: str, labels: dict[str, str]) -> str:
    """``mu=1``; a base profile by its label (the values that tell it apart), else ``profile=<name>``.

    A grid over ``rho`` overrides the ``rho`` of every ``networks:`` entry, so
    "profile=wired" on a panel at ρ = 4 would name a network the panel does not
    show; the label says what the entry still sets.
    """
    if axis == "base_profile":
        return labels.get(value, f"profile={value}")
    return f"{axis}={value}"


def _panel_axes(entries: pd.DataFrame, axes: list[str], shown: list[str], facet: str | None) -> list[str]:
    """Every axis not on x/y gives panels (never silently averaged over), ``facet`` first.

    Algorithm-parameter axes (``algorithms.ucfl.streams``) are the exception
    unless chosen as facet: their values are curves that compete in each cell.
    """
    rest = [a for a in axes if a not in shown and (not _is_algorithm_axis(a) or a == facet)]
    rest.sort(key=lambda a: a != facet)
    if entries["base_profile"].nunique() > 1:
        rest.append("base_profile")
    return rest


def _heatmap(
    entries: pd.DataFrame,
    x: str | None,
    y: str | None,
    panel_axes: list[str],
    cell,
    title: str,
    coloraxis: dict,
    labels: dict[str, str] | None = None,
) -> go.Figure:
    """One heatmap panel per panel-axis combination; ``cell(ranked rows) -> (state, z, text, hover)``.

    Cells whose state is not "ok" are painted grey (not reached) or dark grey
    (every unit failed) by an overlay, with the state as text.
    """
    panels = _panels(entries, panel_axes, labels)
    rows, cols = 1, len(panels)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[name for name, _ in panels], horizontal_spacing=0.08)
    units = list(dict.fromkeys(entries["time_unit"]))
    xs = _category_order(entries[x]) if x else [""]
    ys = _category_order(entries[y]) if y else [""]
    for index, (_, rows_) in enumerate(panels):
        z = np.full((len(ys), len(xs)), np.nan)
        grey = np.full((len(ys), len(xs)), np.nan)
        text = np.full((len(ys), len(xs)), "", dtype=object)
        grey_text = np.full((len(ys), len(xs)), "", dtype=object)
        hover = np.full((len(ys), len(xs)), "no grid point", dtype=object)
        for i, yv in enumerate(ys):
            for j, xv in enumerate(xs):
                chosen = rows_
                if x:
                    chosen = chosen[chosen[x] == xv]
                if y:
                    chosen = chosen[chosen[y] == yv]
                if chosen.empty:
                    continue
                state, value, label, hover[i, j] = cell(_rank(chosen), chosen)
                if state == "ok":
                    z[i, j], text[i, j] = value, label
                else:
                    grey[i, j], grey_text[i, j] = (0.0 if state == "not reached" else 1.0), label
        row, col = index // cols + 1, index % cols + 1
        common = {"x": xs, "y": ys, "texttemplate": "%{text}", "hovertext": hover, "hoverinfo": "text", "xgap": 2, "ygap": 2}
        fig.add_trace(go.Heatmap(z=z, text=text, coloraxis="coloraxis", textfont={"size": 11}, **common), row=row, col=col)
        fig.add_trace(
            go.Heatmap(
                z=grey,
                text=grey_text,
                zmin=0,
                zmax=1,
                colorscale=[[0, NOT_REACHED_COLOR], [1, FAILED_COLOR]],
                showscale=False,
                textfont={"size": 11, "color": "black"},
                **common,
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=xs, title_text=_axis_title(x, units[0]), row=row, col=col)
        fig.update_yaxes(type="category", categoryorder="array", categoryarray=ys, row=row, col=col)
    fig.update_yaxes(title_text=_axis_title(y, units[0]), row=1, col=1)
    width = 160 + len(panels) * (60 + 200 * len(xs))  # ~200 px a cell: four lines of "ucfl streams=20: 9850 ± 2096*"
    height = 240 + 110 * len(ys)
    fig.update_layout(title=title, template="plotly_white", coloraxis=coloraxis, margin={"t": 130}, width=width, height=height)
    return fig


def _target_text(entries: pd.DataFrame) -> str:
    return " / ".join(f"{t:.0%}" for t in dict.fromkeys(entries["target"]))


def _hover(chosen: pd.DataFrame, ranked: pd.DataFrame) -> str:
    head = chosen.iloc[0]
    lines = [f"point: {head['point']}", f"profile: {head['profile']}"]
    for _, entry in ranked.iterrows():
        role = " (reference)" if entry["reference"] else ""
        if entry["reached"]:
            lines.append(f"{entry['label']}{role}: {_time_text(entry)} {entry['time_unit']} ({entry['reached']}/{entry['seeds']} seeds)")
        else:
            lines.append(f"{entry['label']}{role}: not reached ({entry['seeds']} seeds)")
    return "<br>".join(lines)


def _state_text(competing: pd.DataFrame, ranked: pd.DataFrame | None = None) -> str:
    if competing.empty and ranked is not None and not ranked.empty:
        return "only references ran"
    return "failed" if competing.empty else "not reached"


def _no_winner(state: str, competing: pd.DataFrame, ranked: pd.DataFrame) -> str:
    """A cell whose contest is empty while references ran is "not reached" (grey), not "failed"."""
    return "not reached" if competing.empty and not ranked.empty else state


def _by_energy(entries: pd.DataFrame) -> pd.DataFrame:
    """The entries with the devices' energy to target (J) in place of the time, so the time maps rank by energy."""
    return entries.assign(time=entries["energy"], reached=entries["energy_reached"], half=entries["energy_half"], time_unit="J")


def fig_energy_to_target(entries: pd.DataFrame, axes: list[str], x, y, facet, labels: dict[str, str] | None = None) -> go.Figure:
    """Energy the devices spend to reach the target, of the cheapest curve per cell, named in the cell."""
    fig = fig_time_to_target(_by_energy(entries), axes, x, y, facet, labels)
    title = f"Device energy to reach {_target_text(entries)} average accuracy: cheapest curve per cell{_seed_note(entries)}"
    return fig.update_layout(title=title, coloraxis_colorbar_title_text="devices' energy to target (J)")


def fig_best_method_energy(entries: pd.DataFrame, axes: list[str], x, y, facet, labels: dict[str, str] | None = None) -> go.Figure:
    """The method whose devices spend least energy to reach the target per cell."""
    fig = fig_best_method(_by_energy(entries), axes, x, y, facet, labels)
    return fig.update_layout(title=f"Method that reaches {_target_text(entries)} average accuracy on the least device energy{_seed_note(entries)}")


def fig_time_to_target(entries: pd.DataFrame, axes: list[str], x, y, facet, labels: dict[str, str] | None = None) -> go.Figure:
    """Time of the fastest curve per cell, named in the cell; grey "not reached" where no curve reached the target."""
    shown = [a for a in (x, y) if a]
    rows = entries
    for axis in (x, y, facet):
        if axis and _is_algorithm_axis(axis):  # only the curves of that algorithm have a value on its axis
            rows = rows[rows[axis] != _NA]

    def cell(ranked, chosen):
        competing = ranked[~ranked["reference"]]
        state = _cell_state(competing)
        if state != "ok":
            return _no_winner(state, competing, ranked), math.nan, _state_text(competing, ranked) + _beside(ranked), _hover(chosen, ranked)
        return state, competing.iloc[0]["time"], _winner(competing, lambda e: e["label"]) + _beside(ranked), _hover(chosen, ranked)

    units = list(dict.fromkeys(rows["time_unit"]))
    title = f"Time to reach {_target_text(rows)} average accuracy: fastest curve per cell{_seed_note(rows)}"
    coloraxis = {"colorscale": "Viridis", "reversescale": True, "colorbar": {"title": {"text": _time_title(units), "side": "right"}}}
    return _heatmap(rows, x, y, _panel_axes(rows, axes, shown, facet), cell, title, coloraxis, labels)


def _categorical_axis(categories: list[str], title: str) -> dict:
    """A colour axis with one flat colour band per category and the names as colorbar ticks."""
    n = max(len(categories), 1)
    scale = []
    for i in range(n):
        color = _PALETTE[i % len(_PALETTE)]
        scale += [[i / n, color], [(i + 1) / n, color]]
    return {
        "colorscale": scale,
        "cmin": -0.5,
        "cmax": n - 0.5,
        "colorbar": {"title": {"text": title, "side": "right"}, "tickvals": list(range(n)), "ticktext": categories},
    }


def _only_winners(fig: go.Figure, categories: list[str], title: str) -> go.Figure:
    """Re-number a categorical map over the categories some cell took, so its colour bar lists only those.

    The candidates (every k, every method) are known before the cells are
    ranked; a colour bar over all of them would show values no cell has.
    """
    coloured = [trace for trace in fig.data if trace.coloraxis == "coloraxis"]
    taken = sorted({int(v) for trace in coloured for v in np.asarray(trace.z, dtype=float).ravel() if not math.isnan(v)})
    new = {old: index for index, old in enumerate(taken)}
    for trace in coloured:
        z = np.asarray(trace.z, dtype=float)
        trace.z = np.vectorize(lambda v: math.nan if math.isnan(v) else float(new[int(v)]), otypes=[float])(z) if z.size else z
    coloraxis = _categorical_axis([categories[i] for i in taken], title)
    coloraxis["showscale"] = bool(taken)
    fig.update_layout(coloraxis=coloraxis)
    return fig


def _best_map_axes(axes: list[str], x, y, facet) -> tuple[str | None, str | None, str | None]:
    """x, y, facet of the per-cell "best" maps, where the stream counts and methods compete within a cell.

    The chosen x/y that are not algorithm parameters, filled up with other
    network axes, then other axes; an algorithm-parameter facet is dropped.
    """
    facet = None if facet and _is_algorithm_axis(facet) else facet
    kept = [a for a in (x, y) if a and not _is_algorithm_axis(a)]
    kept += [a for a in axes if is_network_axis(a) and a not in kept and a != facet]
    kept += [a for a in axes if not _is_algorithm_axis(a) and a not in kept and a != facet]
    kept += [None, None]
    return kept[0], kept[1], facet


def fig_best_k(entries: pd.DataFrame, axes: list[str], x, y, facet, labels: dict[str, str] | None = None) -> go.Figure | None:
    """The number of streams that reaches the target first per cell; ``auto``'s time beside it. None without k."""
    with_k = entries[entries["k"] != _NA]
    if with_k.empty:
        return None
    fixed = with_k[with_k["k"] != "auto"]
    candidates = fixed if len(fixed) else with_k
    ks = _category_order(candidates["k"])
    bx, by, facet = _best_map_axes(axes, x, y, facet)

    def cell(ranked, chosen):
        competing = ranked[ranked["k"].isin(ks)]
        auto = ranked[ranked["k"] == "auto"]
        extra = ""
        if len(auto) and len(fixed):
            best_auto = auto.iloc[0]
            extra = f"<br>auto: {_time_text(best_auto)}" if best_auto["reached"] else "<br>auto: not reached"
        state = _cell_state(competing)
        if state != "ok":
            return state, math.nan, _state_text(competing) + extra, _hover(chosen, ranked)
        best = competing.iloc[0]
        return state, ks.index(best["k"]), _winner(competing, lambda e: f"k={e['k']}") + extra, _hover(chosen, ranked)

    title = f"Number of streams k that reaches {_target_text(with_k)} average accuracy first{_seed_note(with_k)}"
    shown = [a for a in (bx, by) if a]
    fig = _heatmap(with_k, bx, by, _panel_axes(with_k, axes, shown, facet), cell, title, _categorical_axis(ks, "best k"), labels)
    return _only_winners(fig, ks, "best k")


def fig_best_method(entries: pd.DataFrame, axes: list[str], x, y, facet, labels: dict[str, str] | None = None) -> go.Figure:
    """The method that reaches the target first per cell (categorical), its curve and time as text."""
    bx, by, facet = _best_map_axes(axes, x, y, facet)
    methods = list(dict.fromkeys(entries.loc[~entries["reference"], "method"]))

    def cell(ranked, chosen):
        competing = ranked[~ranked["reference"]]
        state = _cell_state(competing)
        if state != "ok":
            return _no_winner(state, competing, ranked), math.nan, _state_text(competing, ranked) + _beside(ranked), _hover(chosen, ranked)
        best = competing.iloc[0]
        return state, methods.index(best["method"]), _winner(competing, lambda e: e["label"]) + _beside(ranked), _hover(chosen, ranked)

    title = f"Method that reaches {_target_text(entries)} average accuracy first{_seed_note(entries)}"
    shown = [a for a in (bx, by) if a]
    fig = _heatmap(entries, bx, by, _panel_axes(entries, axes, shown, facet), cell, title, _categorical_axis(methods, "best method"), labels)
    return _only_winners(fig, methods, "best method")


def pareto_front(times, worst) -> np.ndarray:
    """Indices of the points no other point beats on both (time lower or equal, worst accuracy higher or equal).

    A point is dominated when another is at least as fast and at least as fair
    and strictly better on one of the two; ties on both are all on the front.
    Returned in increasing time.
    """
    times, worst = np.asarray(times, dtype=float), np.asarray(worst, dtype=float)
    front = []
    for i in range(len(times)):
        better_or_equal = (times <= times[i]) & (worst >= worst[i])
        strictly = (times < times[i]) | (worst > worst[i])
        if not np.any(better_or_equal & strictly):
            front.append(i)
    return np.array(sorted(front, key=lambda i: (times[i], -worst[i])), dtype=int)


def fig_pareto(entries: pd.DataFrame) -> go.Figure:
    """Time to target vs final worst-user accuracy per (grid point, curve); the Pareto front drawn as a line."""
    ran = entries[entries["seeds"] > 0]
    placed = ran[ran["reached"] > 0].reset_index(drop=True)
    units = list(dict.fromkeys(ran["time_unit"]))
    fig = go.Figure()
    for index, label in enumerate(dict.fromkeys(placed["label"])):
        rows = placed[placed["label"] == label]
        symbols = ["diamond" if r < s else "circle" for r, s in zip(rows["reached"], rows["seeds"])]
        fig.add_trace(
            go.Scatter(
                x=rows["time"],
                y=rows["worst_acc"],
                mode="markers",
                name=label,
                marker={"color": _PALETTE[index % len(_PALETTE)], "size": 9, "symbol": symbols},
                customdata=np.stack([rows["point"], rows["profile"], rows["reached"], rows["seeds"]], axis=1),
                hovertemplate=f"{label}<br>point %{{customdata[0]}}<br>profile %{{customdata[1]}}<br>time %{{x:.3g}}"
                "<br>worst-user accuracy %{y:.3f}<br>reached by %{customdata[2]}/%{customdata[3]} seeds<extra></extra>",
            )
        )
    front = placed.iloc[pareto_front(placed["time"], placed["worst_acc"])] if len(placed) else placed
    fig.add_trace(
        go.Scatter(
            x=front["time"],
            y=front["worst_acc"],
            mode="lines+markers",
            name="Pareto front",
            line={"color": "black", "dash": "dot", "shape": "hv"},
            marker={"symbol": "circle-open", "size": 16, "color": "black", "line": {"width": 2}},
            customdata=np.stack([front["label"], front["point"]], axis=1) if len(front) else None,
            hovertemplate="Pareto front: %{customdata[0]}<br>point %{customdata[1]}<extra></extra>",
        )
    )
    notes = []
    if ran["seeds"].max() > 1:
        notes.append("mean over seeds (time: over the seeds that reached); ◆ = reached by only some seeds")
    never = len(ran) - len(placed)
    if never:
        notes.append(f"{never} (point, curve) pairs never reached the target and are not shown")
    subtitle = "".join(f"<br><sup>{note}</sup>" for note in notes)
    fig.update_layout(
        title=f"Time to {_target_text(ran)} average accuracy vs worst-user accuracy (up and left is better){subtitle}",
        template="plotly_white",
        xaxis={"title": {"text": _time_title(units)}},
        yaxis={"title": {"text": "final worst-user accuracy"}, "tickformat": ".0%", "range": [0, 1.02]},
        legend={"title": {"text": "curve"}},
        margin={"t": 130},
    )
    return fig


def tradeoff_figures(
    table: pd.DataFrame,
    axes,
    x: str | None = None,
    y: str | None = None,
    facet: str | None = None,
    profile_labels: dict[str, str] | None = None,
) -> dict[str, go.Figure]:
    """The trade-off figures of a sweep table: ``time_to_target``, ``best_k`` (when k varies), ``best_method``, ``pareto``,
    and, from the devices' energy, ``energy_to_target`` and ``best_method_energy`` (the cheapest curve and method per cell).

    ``x``/``y`` default to the first two network axes (then other axes);
    every axis not on x/y gives one panel per value (``facet`` first, then the
    others), so nothing is averaged over a grid axis. ``profile_labels`` titles the
    panels of each ``networks:`` entry (base profile name -> title; default
    ``profile=<name>``).
    """
    axes = list(axes)
    x, y, facet = _check(table, axes, x, y, facet)
    entries = seed_summary(table, axes)
    if entries.empty:
        raise ValueError("tradeoff: the sweep table has no rows")
    figures = {"pareto": fig_pareto(entries)}
    if x is not None:
        figures["time_to_target"] = fig_time_to_target(entries, axes, x, y, facet, profile_labels)
        best_k = fig_best_k(entries, axes, x, y, facet, profile_labels)
        if best_k is not None:
            figures["best_k"] = best_k
        figures["best_method"] = fig_best_method(entries, axes, x, y, facet, profile_labels)
        if entries["energy"].notna().any():  # sweeps run before device energy have no energy columns
            figures["energy_to_target"] = fig_energy_to_target(entries, axes, x, y, facet, profile_labels)
            figures["best_method_energy"] = fig_best_method_energy(entries, axes, x, y, facet, profile_labels)
    return {name: figures[name] for name in FIGURES if name in figures}


def write_tradeoff_figures(sweep_dir, table: pd.DataFrame, axes, *, image_format: str | None = "png", **choice) -> list[str]:
    """Write ``<name>.html`` and ``<name>.<image_format>`` (None: HTML only) for every trade-off figure into
    ``sweep_dir``.

    The HTML files share one ``plotly.min.js`` in the directory. ``choice``
    passes ``x``, ``y``, ``facet`` on. Returns notes for the summary.
    """
    directory = Path(sweep_dir)
    figures = tradeoff_figures(table, axes, **choice)
    write_plotly_js(directory)
    for name, fig in figures.items():
        atomic_write_text(directory / f"{name}.html", fig.to_html(include_plotlyjs="directory", full_html=True))
    notes = []
    if "best_k" not in figures:
        notes.append("no best_k map: no curve in the sweep has a number of streams (e.g. ucfl streams variants)")
    if image_format is None:
        return [*notes, "trade-off figures as HTML only: `wirelessfl plot SWEEP_DIR` draws their PNGs"]
    from wirelessfl.results.static import write_static  # matplotlib (1 s to import) only to draw
    write_static(directory, figures, image_format)
    return notes
