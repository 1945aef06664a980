"""What a tuning writes that a reader looks at: the history figure."""

from __future__ import annotations

import pandas as pd

from wirelessfl.tune.outputs import history_figure


def _table(curves: int) -> pd.DataFrame:
    rows = []
    for c in range(curves):
        for trial, (state, value) in enumerate([("complete", 0.2), ("complete", 0.5), ("pruned", 0.1), ("complete", 0.4)]):
            rows.append({"curve": f"curve{c}", "algorithm": "fedavg", "trial": trial, "state": state,
                         "value": value + c / 100, "last_round": 3, "seconds": 1.0})
    return pd.DataFrame(rows)


def test_the_tuning_history_has_a_panel_per_curve_in_its_own_colour():
    """Twelve curves on one axis hid each other (and ten colours repeated): 12 curves are 12 panels in 3 rows
    of 4, each with its own colour, its complete and pruned trials and the best so far (0.2, 0.5, 0.5)."""
    fig = history_figure(_table(12))
    assert [a.text for a in fig.layout.annotations] == [f"curve{c}" for c in range(12)]
    data = [t for t in fig.data if t.showlegend is False]  # the grey legend entries are the rest
    panels = {(t.xaxis, t.yaxis) for t in data}
    assert len(panels) == 12
    colors = {t.xaxis: (t.marker.color if t.mode == "markers" else t.line.color) for t in data}
    assert len(set(colors.values())) == 12
    best = [t for t in data if t.mode == "lines" and t.xaxis == "x"]
    assert list(best[0].y) == [0.2, 0.5, 0.5]
    pruned = [t for t in data if t.mode == "markers" and t.marker.symbol == "circle-open" and t.xaxis == "x"]
    assert list(pruned[0].x) == [2]
    assert [t.name for t in fig.data if t.showlegend is not False] == ["complete", "pruned (last report)", "best so far"]


def test_one_curve_is_one_panel_and_an_empty_study_a_figure():
    assert len(history_figure(_table(1)).layout.annotations) == 1
    assert history_figure(_table(0).reindex(columns=list(_table(1).columns))) is not None
