"""Static figures: matplotlib draws what the plotly figure holds, and a reader finds every label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from matplotlib.ticker import PercentFormatter

from wirelessfl.results.energy import fig_accuracy_vs_energy
from wirelessfl.results.figures import fig_accuracy_vs_time
from wirelessfl.results.static import render, static_figure, write_static
from wirelessfl.results.timeline import fig_timeline

pytestmark = pytest.mark.draws_figures  # figures are the subject here: drawn for real


def _energy_trace(trace: pd.DataFrame) -> pd.DataFrame:
    """The toy trace with energy columns: Local spends a thousandth of what FedAvg spends."""
    scale = np.where(trace["curve"] == "fedavg", 1000.0, 1.0)
    cumulative = trace["round"].to_numpy() * scale
    return trace.assign(
        energy_j=scale, cum_energy_j=cumulative, cum_energy_max_j=cumulative / 4, energy_mean_j=scale / 4,
        energy_max_j=scale / 2, depleted=0,
    ).replace({"curve": {"ucfl k=4": "local"}})


def test_every_panel_curve_and_label_of_fig3_is_drawn(trace):
    fig = fig_accuracy_vs_time(trace)
    drawn = static_figure(fig)
    panels = [axes for axes in drawn.axes if axes.get_visible()]
    assert [axes.get_title() for axes in panels] == ["wired", "slow"]
    assert [axes.get_xlabel() for axes in panels] == ["normalised time t / T_dl"] * 2
    assert panels[0].get_ylabel() == "average client accuracy"
    assert isinstance(panels[0].yaxis.get_major_formatter(), PercentFormatter)
    assert panels[0].get_ylim() == (0, 1.02)
    assert [t.get_text() for t in drawn.legends[0].get_texts()] == ["fedavg", "ucfl k=4"]
    assert drawn.get_suptitle().startswith("Average client accuracy vs simulated time\nline: mean over 2 seeds")
    mean = next(t for t in fig.data if t.name == "fedavg" and t.fill is None)  # wired's line, the first panel's
    lines = [line for line in panels[0].get_lines() if len(line.get_xdata()) == len(mean.x)]
    assert any(np.allclose(line.get_xdata(), mean.x) and np.allclose(line.get_ydata(), mean.y) for line in lines)
    assert panels[0].patches  # the seeds' interval band


def test_local_is_its_own_curve_on_a_log_energy_axis(trace):
    energy = _energy_trace(trace)
    fig = fig_accuracy_vs_energy(energy)
    assert fig.layout.xaxis.type == "log"
    assert "log energy axis, from round 1 (round 0 has spent nothing)" in fig.layout.title.text
    local = [t for t in fig.data if t.name == "local"]
    assert local and all(min(t.x) > 0 for t in local)
    drawn = static_figure(fig)
    assert {axes.get_xscale() for axes in drawn.axes} == {"log"}
    assert "local" in [t.get_text() for t in drawn.legends[0].get_texts()]
    linear = fig_accuracy_vs_energy(energy.assign(cum_energy_j=0.0))
    assert linear.layout.xaxis.type == "linear" and "log" not in linear.layout.title.text


def test_every_timeline_panel_has_both_axis_labels():
    rows = []
    for curve in ("fedavg", "local"):
        for profile in ("wired", "slow"):
            for client in (0, 1):
                rows.append({
                    "curve": curve, "profile": profile, "seed": 0, "round": 1, "client": client, "time_unit": "T_dl",
                    "receptions": [(0.0, 1.0)], "t_compute_start": 1.0, "t_computed": 2.0, "t_upload_start": 2.5,
                    "airtime": 1.0, "retransmissions": 0,
                })
    trace = pd.DataFrame([
        {"curve": c, "profile": p, "seed": 0, "round": r, "round_time": 4.0} for c in ("fedavg", "local")
        for p in ("wired", "slow") for r in (0, 1)
    ])
    fig = fig_timeline(pd.DataFrame(rows), trace, 1)
    drawn = static_figure(fig)
    panels = [axes for axes in drawn.axes if axes.get_visible()]
    assert len(panels) == 4
    assert [axes.get_xlabel() for axes in panels] == ["time in round (T_dl)"] * 4
    assert [axes.get_ylabel() for axes in panels] == ["client"] * 4
    assert [t.get_text() for t in drawn.legends[0].get_texts()] == [t.name for t in fig.data if t.showlegend]


def test_vertical_bars_with_error_bars_and_a_line_across():
    fig = go.Figure()
    fig.add_bar(x=["a", "b"], y=[1.0, 2.0], name="one", error_y={"type": "data", "array": [0.1, 0.2], "arrayminus": [0.1, 0.1]})
    fig.add_bar(x=["a", "b"], y=[1.5, 0.5], name="two")
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="no difference")
    drawn = static_figure(fig.update_layout(barmode="group", title="bars"))
    axes = drawn.axes[0]
    heights = sorted(round(patch.get_height(), 6) for patch in axes.patches)
    assert heights == [0.5, 1.0, 1.5, 2.0]
    assert [t.get_text() for t in axes.get_xticklabels()] == ["a", "b"]
    assert "no difference" in [t.get_text() for t in axes.texts]
    assert [t.get_text() for t in drawn.legends[0].get_texts()] == ["one", "two"]


def test_a_trace_kind_it_cannot_draw_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^static figures: a Box trace cannot be drawn \(Scatter, Bar, Heatmap only\)$"):
        static_figure(go.Figure(go.Box(y=[1, 2, 3])))


def test_formats_are_checked_and_the_same_tables_give_the_same_bytes(tmp_path, trace):
    fig = fig_accuracy_vs_time(trace)
    with pytest.raises(ValueError, match=r"^--format must be one of png, pdf, svg, got 'eps'$"):
        write_static(tmp_path, {"fig3": fig}, "eps")
    assert list(tmp_path.iterdir()) == []
    for image_format, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")):
        first = render(fig, image_format)
        assert first.startswith(magic)
        if image_format != "svg":  # svg ids are random per drawing
            assert render(fig, image_format) == first
