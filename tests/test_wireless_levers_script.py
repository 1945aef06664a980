"""scripts/wireless_levers.py: time and energy to target, and the paired ratios to the method's full curve, by hand."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

SPEC = importlib.util.spec_from_file_location("wireless_levers", Path(__file__).parents[1] / "scripts" / "wireless_levers.py")
levers = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(levers)


def _curve(curve: str, seed: int, accs: list[float], times: list[float], energies: list[float]) -> pd.DataFrame:
    return pd.DataFrame({
        "curve": curve, "profile": "cell", "seed": seed, "round": range(len(accs)), "avg_acc": accs, "time": times,
        "time_unit": "s", "cum_energy_j": energies,
    })


def test_times_energies_and_paired_ratios_by_hand():
    trace = pd.concat([
        _curve("fedavg full", 0, [0.1, 0.5, 0.9], [0, 2, 4], [0, 10, 20]),
        _curve("fedavg full", 1, [0.1, 0.9, 0.9], [0, 2, 4], [0, 10, 20]),
        _curve("fedavg q", 0, [0.1, 0.5, 0.8], [0, 1, 2], [0, 4, 8]),       # seed 0 reaches 0.8 at round 2: 2 s, 8 J
        _curve("fedavg q", 1, [0.1, 0.85, 0.9], [0, 1, 2], [0, 4, 8]),      # seed 1 at round 1: 1 s, 4 J
        _curve("fedavg k", 0, [0.1, 0.5, 0.6], [0, 1, 2], [0, 1, 2]),       # never
        _curve("fedavg k", 1, [0.1, 0.85, 0.9], [0, 1, 2], [0, 1, 2]),
    ])
    table = levers.comparison(levers.per_seed(trace, 0.8)).set_index("lever")
    assert table.loc["full", "time"] == 3.0 and table.loc["full", "energy"] == 15.0
    assert table.loc["q", "time"] == 1.5 and table.loc["q", "energy"] == 6.0
    # paired: seed 0: 2/4 and 8/20, seed 1: 1/2 and 4/10
    assert table.loc["q", "time_ratio"] == pytest.approx(0.5) and table.loc["q", "time_ratio_ci"] == pytest.approx(0.0)
    assert table.loc["q", "energy_ratio"] == pytest.approx(0.4)
    assert math.isnan(table.loc["k", "time"]) and table.loc["k", "time_reached"] == 1
    assert table.loc["q", "final_acc"] == pytest.approx(0.85)
    # the whole run: 2 s against 4 s and 8 J against 20 J on both seeds; final accuracy -10 and 0 points
    assert table.loc["q", "run_time_ratio"] == pytest.approx(0.5) and table.loc["q", "run_energy_ratio"] == pytest.approx(0.4)
    assert table.loc["q", "acc_gain"] == pytest.approx(-0.05) and table.loc["k", "run_energy_ratio"] == pytest.approx(0.1)
    text = levers.markdown(table.reset_index(), 0.8, "s")
    assert "| fedavg | k | not reached (1/2 seeds) |" in text and "| fedavg | q | 1.50 ±" in text and "| -5.0 ± " in text


def test_the_figure_has_a_column_per_method_and_dots_at_the_tables_time_and_energy_to_target(tmp_path):
    trace = pd.concat([
        _curve("fedavg full", 0, [0.1, 0.5, 0.9], [0, 2, 4], [0, 10, 20]),
        _curve("fedavg full", 1, [0.1, 0.9, 0.9], [0, 2, 4], [0, 10, 20]),
        _curve("fedavg qsgd-8", 0, [0.1, 0.5, 0.8], [0, 1, 2], [0, 4, 8]),
        _curve("fedavg qsgd-8", 1, [0.1, 0.85, 0.9], [0, 1, 2], [0, 4, 8]),
        _curve("ucfl full", 0, [0.1, 0.2, 0.3], [0, 2, 4], [0, 10, 20]),
        _curve("ucfl full", 1, [0.1, 0.2, 0.3], [0, 2, 4], [0, 10, 20]),
    ])
    fig = levers.figure(trace, 0.8, "s")
    axes = fig.axes
    assert len(axes) == 4 and [ax.get_title() for ax in axes[:2]] == ["FedAvg", "UCFL"]
    dots = lambda ax: sorted((line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() == "o")
    assert dots(axes[0]) == [(1.5, 0.8), (3.0, 0.8)] and dots(axes[2]) == [(6.0, 0.8), (15.0, 0.8)]
    assert dots(axes[1]) == [] and any("no curve reaches 80%" in text.get_text() for text in axes[1].texts)
    path = tmp_path / "levers.png"
    levers.write_figure(fig, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_time_jobs_of_two_rounds_share_the_air_by_hand():
    """Round 1's uploads on [0, 2] and [1, 3], round 2's on [2.5, 4]: the air is busy 0..4 (4 s), two rounds at once
    on [2.5, 3] (0.5 s); intervals of one round overlapping each other do not count."""
    assert levers.concurrent_share([(0.0, 2.0, 1), (1.0, 3.0, 1), (2.5, 4.0, 2)]) == (4.0, 0.5)
    assert levers.concurrent_share([(0.0, 1.0, 1), (2.0, 3.0, 2)]) == (2.0, 0.0)
