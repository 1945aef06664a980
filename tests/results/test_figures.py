import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import yaml

from wirelessfl.results import figures, palette
from wirelessfl.results.figures import (
    fig_accuracy_vs_round,
    fig_accuracy_vs_time,
    fig_worst_client,
    plot_run,
    report_run,
    write_figures,
)
from wirelessfl.results.io import write_trace

pytestmark = pytest.mark.draws_figures  # figures are the subject here: drawn for real

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _lines(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.name == name]


def test_fig3_has_one_panel_per_profile_and_the_seed_mean(trace):
    fig = fig_accuracy_vs_time(trace)
    assert [a.text for a in fig.layout.annotations] == ["wired", "slow"]
    assert fig.layout.xaxis.title.text == "normalised time t / T_dl"
    assert "line: mean over 2 seeds (aligned by round), band: its 95% Student-t interval" in fig.layout.title.text
    wired, slow = _lines(fig, "fedavg")
    assert (wired.xaxis, slow.xaxis) == ("x", "x2")
    # fedavg on wired: seed times (0, 2, 4) and (0, 3, 6), accuracies (.1, .5, .7) and (.1, .6, .8).
    assert list(wired.x) == pytest.approx([0.0, 2.5, 5.0])
    assert list(wired.y) == pytest.approx([0.1, 0.55, 0.75])
    assert list(slow.x) == pytest.approx([0.0, 6.5, 13.0])
    assert (wired.showlegend, slow.showlegend) == (True, False)
    assert wired.line.color == slow.line.color


def test_fig3_band_is_the_95_percent_interval_of_the_seed_mean(trace):
    """Two seeds: half-width t(0.975, 1) * std / sqrt(2), and t with one degree of freedom is Cauchy's tan(0.475 pi)."""
    fig = fig_accuracy_vs_time(trace)
    band = next(t for t in fig.data if t.name == "ucfl k=4 (95% interval over seeds)")
    t1 = math.tan(math.pi * 0.475)  # 12.706
    # ucfl k=4 on wired, the two seeds' accuracies per round: (.1, .1), (.4, .7), (.85, .9)
    half = [0.0, t1 * 0.3 / 2, t1 * 0.05 / 2]  # std of a pair (a, b) is |a - b| / sqrt(2); over sqrt(2) again
    mean = [0.1, 0.55, 0.875]
    assert list(band.x) == pytest.approx([0.0, 3.5, 7.0, 7.0, 3.5, 0.0])
    assert list(band.y) == pytest.approx([m + h for m, h in zip(mean, half)] + [m - h for m, h in zip(mean, half)][::-1])
    assert band.fill == "toself"


def test_fig3_with_one_seed_has_no_band_and_labels_seconds(trace):
    fig = fig_accuracy_vs_time(trace[trace["seed"] == 0].assign(time_unit="s"))
    assert all("interval" not in t.name for t in fig.data)
    assert "band" not in fig.layout.title.text
    assert len(fig.data) == 4
    assert fig.layout.xaxis.title.text == "time (s)"


def test_fig3_with_one_sampled_seed_draws_the_estimates_interval(trace):
    """A sampled evaluation (evaluation.clients) writes each round's 95% interval of the sampled mean; with one seed
    the band is that interval (zero wide at the last round, which evaluates every client), and only avg_acc has one."""
    one = trace[trace["seed"] == 0].copy()
    one["avg_acc_lo"], one["avg_acc_hi"] = one["avg_acc"] - 0.05, one["avg_acc"] + 0.05
    last = one["round"] == one["round"].max()
    one.loc[last, "avg_acc_lo"] = one.loc[last, "avg_acc_hi"] = one.loc[last, "avg_acc"]
    fig = fig_accuracy_vs_time(one)
    band = next(t for t in fig.data if t.name == "fedavg (95% interval of the sampled estimate)")
    # fedavg on wired, seed 0: times (0, 2, 4), accuracies (.1, .5, .7)
    assert list(band.x) == pytest.approx([0.0, 2.0, 4.0, 4.0, 2.0, 0.0])
    assert list(band.y) == pytest.approx([0.15, 0.55, 0.7, 0.7, 0.45, 0.05])
    assert "band: the 95% interval of the sampled clients' mean (evaluation.clients)" in fig.layout.title.text
    assert all("interval" not in t.name for t in fig_accuracy_vs_time(one, metric="worst_acc").data)
    several = trace.assign(avg_acc_lo=trace["avg_acc"] - 0.05, avg_acc_hi=trace["avg_acc"] + 0.05)
    assert any(t.name == "fedavg (95% interval over seeds)" for t in fig_accuracy_vs_time(several).data)


def test_fig3_on_another_metric_and_a_bad_metric(trace):
    fig = fig_accuracy_vs_time(trace, metric="worst_acc")
    assert fig.layout.yaxis.title.text == "worst client accuracy"
    assert list(_lines(fig, "fedavg")[0].y) == pytest.approx([0.0, 0.35, 0.55])
    with pytest.raises(ValueError, match=r"^metric must be one of \['avg_acc', 'worst_acc', 'p10_acc', 'avg_val_acc'\], got 'time'$"):
        fig_accuracy_vs_time(trace, metric="time")


def test_fig2_merges_profiles_with_identical_rounds(trace):
    fig = fig_accuracy_vs_round(trace)
    assert [a.text for a in fig.layout.annotations] == ["all profiles (wired, slow): identical per round"]
    (line,) = _lines(fig, "fedavg")
    assert list(line.x) == [0, 1, 2]
    assert list(line.y) == pytest.approx([0.1, 0.55, 0.75])


def test_fig2_splits_profiles_that_differ(trace):
    changed = trace.copy()
    changed.loc[(changed["profile"] == "slow") & (changed["round"] == 2), "avg_acc"] = 0.3
    fig = fig_accuracy_vs_round(changed)
    assert [a.text for a in fig.layout.annotations] == ["wired", "slow"]
    assert list(_lines(fig, "fedavg")[1].y) == pytest.approx([0.1, 0.55, 0.3])


def test_worst_client_figure_one_box_or_one_per_profile(clients):
    fig = fig_worst_client(clients)
    assert [t.name for t in fig.data] == ["all profiles (wired, slow)"]
    assert len(fig.data[0].y) == 16  # 2 curves x 2 seeds x 4 clients, one profile shown
    changed = clients.copy()
    changed.loc[changed["profile"] == "slow", "accuracy"] = 0.5
    assert [t.name for t in fig_worst_client(changed).data] == ["wired", "slow"]


def test_write_figures_html_without_png(tmp_path, trace, clients):
    notes = write_figures(tmp_path, trace, clients, image_format=None)
    assert notes == [f"no fig3.png, fig2.png in this run directory: `wirelessfl plot {tmp_path}` draws them"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig2.html", "fig3.html", "plotly.min.js", "worst_clients.html"]
    assert "plotly.js v" in (tmp_path / "plotly.min.js").read_text(encoding="utf-8")
    for name in ("fig3.html", "fig2.html", "worst_clients.html"):
        html = (tmp_path / name).read_text(encoding="utf-8")
        # offline: the only script fetched is the plotly.min.js beside the file, and plotly.js is not embedded
        assert re.findall(r"<script[^>]*\ssrc=[^>]*>", html) == ['<script charset="utf-8" src="plotly.min.js">']
        assert "plotly.js v" not in html
        for label in ("fedavg", "ucfl k=4", "wired", "slow"):
            assert label in html, (name, label)


def test_pngs_are_drawn_with_no_browser_on_the_path(tmp_path, trace, clients, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    assert write_figures(tmp_path, trace, clients) == []
    for name in ("fig3.png", "fig2.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def _run_dir(tmp_path: Path, trace, clients, scenario: dict | None) -> Path:
    run_dir = tmp_path / "toy-20240102-030405"
    run_dir.mkdir()
    write_trace(run_dir, trace, clients)
    if scenario is not None:
        (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return run_dir


def test_plot_run_remakes_figures_from_the_run_directory(tmp_path, trace, clients):
    run_dir = _run_dir(tmp_path, trace, clients, None)
    written = plot_run(run_dir, None)
    assert [p.name for p in written.paths] == ["plotly.min.js", "fig3.html", "fig2.html", "worst_clients.html"]
    assert written.notes == [f"no fig3.png, fig2.png in this run directory: `wirelessfl plot {run_dir}` draws them"]
    pdfs = plot_run(run_dir, "pdf")
    assert [p.name for p in pdfs.paths][-2:] == ["fig3.pdf", "fig2.pdf"] and pdfs.notes == []
    assert (run_dir / "fig3.pdf").read_bytes().startswith(b"%PDF")
    assert "ucfl k=4" in (run_dir / "fig3.html").read_text(encoding="utf-8")


def test_report_run_reads_the_target_from_scenario_yaml(tmp_path, trace, clients):
    run_dir = _run_dir(tmp_path, trace, clients, {"name": "toy", "target_accuracy": 0.6})
    text = report_run(run_dir).read_text(encoding="utf-8")
    assert "| fedavg | 3.5 ± 6.4 (round 1.5) | 9.5 ± 31.8 (round 1.5) |" in text
    assert f"- no fig3.png, fig2.png in this run directory: `wirelessfl plot {run_dir}` draws them" in text
    explicit = report_run(run_dir, target=0.88).read_text(encoding="utf-8")
    assert "| fedavg | not reached (0/2 seeds) | not reached (0/2 seeds) |" in explicit


def test_report_run_keeps_the_run_notes_and_rechecks_the_png_note(tmp_path, trace, clients):
    run_dir = _run_dir(tmp_path, trace, clients, {"name": "toy", "target_accuracy": 0.6})
    (run_dir / "summary.md").write_text(
        "# old\n\n## Notes\n\n- 2 training runs (trained per profile); wall time 1.0 s.\n- PNG export skipped: no Chrome or Chromium found.\n"
    )
    text = report_run(run_dir).read_text(encoding="utf-8")
    assert text.endswith(
        "## Notes\n\n- 2 training runs (trained per profile); wall time 1.0 s.\n"
        f"- no fig3.png, fig2.png in this run directory: `wirelessfl plot {run_dir}` draws them\n"
    )
    for name in ("fig3.png", "fig2.png"):
        (run_dir / name).write_bytes(PNG_MAGIC)
    assert report_run(run_dir).read_text(encoding="utf-8").endswith("## Notes\n\n- 2 training runs (trained per profile); wall time 1.0 s.\n")


def test_rounds_without_evaluation_are_joined_not_gaps(trace):
    sparse = trace.copy()
    sparse.loc[sparse["round"] == 1, "avg_acc"] = float("nan")
    fig = fig_accuracy_vs_time(sparse)
    wired = _lines(fig, "fedavg")[0]
    assert list(wired.x) == pytest.approx([0.0, 5.0])
    assert list(wired.y) == pytest.approx([0.1, 0.75])
    assert list(_lines(fig_accuracy_vs_round(sparse), "fedavg")[0].x) == [0, 2]


def test_report_run_without_a_target_anywhere(tmp_path, trace, clients):
    run_dir = _run_dir(tmp_path, trace, clients, {"name": "toy"})
    with pytest.raises(ValueError, match=r"^no target accuracy given and .*scenario.yaml has no top-level 'target_accuracy'; pass the target explicitly$"):
        report_run(run_dir)
    (run_dir / "scenario.yaml").unlink()
    with pytest.raises(ValueError, match=r"^no target accuracy given and .*scenario.yaml does not exist; pass the target explicitly$"):
        report_run(run_dir)


def test_results_package_imports_neither_torch_nor_simpy():
    code = "import sys, wirelessfl.results; print(sorted(m for m in ('torch', 'simpy') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2])
    assert done.stdout.strip() == "[]"


def test_twelve_curves_get_distinct_colours_and_a_png_tall_enough_for_the_legend(trace):
    """The cross-paper scenario plots 12 methods: with the 10-colour palette two pairs shared a hue and
    the 480 px PNG cut the legend after ten entries."""
    from wirelessfl.results.static import static_figure

    curves = [f"method-{i}" for i in range(12)]
    base = trace[trace.curve == "fedavg"]
    many = pd.concat([base.assign(curve=c, algorithm=c) for c in curves], ignore_index=True)
    fig = fig_accuracy_vs_time(many)
    colours = {t.line.color for t in fig.data if t.showlegend}
    assert len(colours) == 12
    assert [t.line.dash for t in fig.data if t.showlegend] == list(palette.LARGE_DASHES[:12])
    assert {t.line.dash for t in fig_accuracy_vs_time(trace).data if t.showlegend} == {"solid"}
    drawn = static_figure(fig)
    drawn.canvas.draw()
    legend = drawn.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == curves
    box, page = legend.get_window_extent(), drawn.bbox
    assert page.y0 <= box.y0 and box.y1 <= page.y1 and box.x1 <= page.x1


def _cielab(hex_colour: str) -> np.ndarray:
    """sRGB hex -> CIELAB (D65), the textbook formulas."""
    rgb = np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(np.maximum(xyz / np.array([0.95047, 1.0, 1.08883]), (6 / 29) ** 3))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_large_palette_look_alike_colours_get_different_dashes():
    """Dark24 pairs magentas (#DA16FF, #FB00D1) and pinks (#E15F99, #FC0080) under 30 CIELAB units apart: in a
    13-curve figure they read as one colour, so every pair closer than 40 units is told apart by its dash."""
    assert len(palette.LARGE_DASHES) == len(palette.LARGE_PALETTE)
    labs = [_cielab(c) for c in palette.LARGE_PALETTE]
    close = [(i, j) for i in range(len(labs)) for j in range(i) if np.linalg.norm(labs[i] - labs[j]) < 40]
    assert (4, 11) in [(j, i) for i, j in close] and len(close) > 20
    assert all(palette.LARGE_DASHES[i] != palette.LARGE_DASHES[j] for i, j in close)
    assert _cielab("#FFFFFF") == pytest.approx([100, 0, 0], abs=0.05)
