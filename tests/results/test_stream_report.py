"""Stream / cluster diagnostics (wirelessfl/results/streams.py) on a hand-made diagnostics.json.

8 clients, true groups 0 0 0 0 1 1 1 1. Adjusted Rand index by hand (pairs of 8 clients: 28; pairs inside a
true group: 12):
  7/1 ([0]*7 + [1]): pairs inside streams 21 + 0, inside both 6 + 3 = 9 = 12 * 21 / 28 (chance) -> ARI 0.
  alternating ([0, 1] * 4): inside streams 12, inside both 4; chance 12 * 12 / 28 = 36/7;
      ARI = (4 - 36/7) / (12 - 36/7) = -1/6.
  the groups themselves -> ARI 1.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wirelessfl.results.streams import contingency, format_sizes, stream_figure, stream_report, stream_summary_md

GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]
SEVEN_ONE = [0] * 7 + [1]
ALTERNATING = [0, 1] * 4


def make_clients(curves_seeds, groups=GROUPS):
    rows = []
    for curve, seeds in curves_seeds.items():
        for seed in seeds:
            for profile in ("wired", "slow"):
                for client, group in enumerate(groups):
                    rows.append({"scenario": "toy", "algorithm": curve.split()[0], "variant": "", "curve": curve,
                                 "profile": profile, "seed": seed, "client": client, "group": group, "accuracy": 0.5})
    return pd.DataFrame(rows)


CLIENTS = make_clients({"ucfl streams=2": [0], "ucfl streams=4": [0, 1], "ucfl streams=m": [0], "cfl": [0]})

#: As json.load gives it back (round keys are strings).
DIAGNOSTICS = json.loads(json.dumps({
    "seed0__ucfl_streams_2": {1: {"estimated": True, "streams": 2, "stream_sizes": [7, 1], "assignment": SEVEN_ONE}},
    "seed0__ucfl_streams_4": {1: {"estimated": True, "assignment": ALTERNATING}},
    "seed1__ucfl_streams_4": {1: {"estimated": True, "assignment": GROUPS}, 3: {"estimated": True, "assignment": SEVEN_ONE}},
    "seed0__ucfl_streams_m": {1: {"estimated": True, "assignment": list(range(8))}},
    "seed0__cfl": {1: {"clusters": 1, "splits": []}, 2: {"clusters": 1, "splits": []}},
    "seed0__fedfomo": {1: {"something": 1}},
}))


@pytest.fixture(scope="module")
def frame():
    return stream_report(DIAGNOSTICS, CLIENTS)


def test_one_row_per_formation_with_sizes_and_ari(frame):
    got = {(r.unit, r.round): (r.sizes, r.streams, r.ari) for r in frame.itertuples()}
    assert set(got) == {("seed0__ucfl_streams_2", 1), ("seed0__ucfl_streams_4", 1), ("seed1__ucfl_streams_4", 1),
                        ("seed1__ucfl_streams_4", 3), ("seed0__ucfl_streams_m", 1), ("seed0__cfl", 2)}
    assert got["seed0__ucfl_streams_2", 1] == ("7/1", 2, pytest.approx(0.0, abs=1e-15))
    assert got["seed0__ucfl_streams_4", 1] == ("4/4", 2, pytest.approx(-1 / 6, rel=1e-12))
    assert got["seed1__ucfl_streams_4", 1] == ("4/4", 2, pytest.approx(1.0, rel=1e-15))
    assert got["seed0__ucfl_streams_m", 1][:2] == ("1x8", 8)
    # cfl never split: one cluster of everybody, at its last round.
    assert got["seed0__cfl", 2] == ("8", 1, pytest.approx(0.0, abs=1e-15))
    assert set(frame.loc[frame.unit == "seed0__cfl", "kind"]) == {"clusters"}
    assert (frame["true_groups"] == 2).all()


def test_summary_lists_last_formations_and_warns_where_streams_miss_the_groups(frame):
    lines = stream_summary_md(frame)
    assert lines[0] == "## Streams and clusters"
    assert "| ucfl streams=4 | 1 | 3 | 2 | 7/1 | 0.00 |" in lines  # the last formation of seed 1, not round 1
    assert "| ucfl streams=m | 0 | 1 | 8 | 1x8 | 0.00 |" in lines
    warnings = [line for line in lines if line.startswith("- **warning**")]
    assert warnings == [
        "- **warning** ucfl streams=2: streams 7/1 do not follow the 2 true groups (ARI 0.00)",
        "- **warning** ucfl streams=4: streams 4/4 (seed 0) do not follow the 2 true groups (ARI -0.08, mean over 2 runs)",
        "- **warning** cfl: clusters 8 do not follow the 2 true groups (ARI 0.00)",
    ]  # per-user streams (1x8) are no grouping: no warning


def test_no_warning_when_the_streams_follow_the_groups():
    diagnostics = {"seed0__ucfl_streams_2": {"1": {"assignment": [1, 1, 1, 1, 0, 0, 0, 0]}}}
    frame = stream_report(diagnostics, make_clients({"ucfl streams=2": [0]}))
    assert frame["ari"].tolist() == [1.0]
    assert not [line for line in stream_summary_md(frame) if "warning" in line]


def test_one_stream_asked_for_is_no_grouping_to_warn_about():
    diagnostics = {"seed0__ucfl_streams_1": {"1": {"assignment": [0] * 8}}}
    frame = stream_report(diagnostics, make_clients({"ucfl streams=1": [0]}))
    lines = stream_summary_md(frame)
    assert "| ucfl streams=1 | 0 | 1 | 1 | 8 | 0.00 |" in lines
    assert not [line for line in lines if "warning" in line]


def test_a_split_with_one_group_has_no_ari():
    diagnostics = {"seed0__ucfl_streams_2": {"1": {"assignment": SEVEN_ONE}}}
    frame = stream_report(diagnostics, make_clients({"ucfl streams=2": [0]}, groups=[0] * 8))
    assert np.isnan(frame["ari"].iloc[0])
    lines = stream_summary_md(frame)
    assert "| ucfl streams=2 | 0 | 1 | 2 | 7/1 | n/a (one group) |" in lines
    assert not [line for line in lines if "warning" in line]


def test_units_trained_per_profile_show_their_profile():
    diagnostics = {"seed0__ucfl_streams_2__slow": {"1": {"assignment": GROUPS}}}
    frame = stream_report(diagnostics, make_clients({"ucfl streams=2": [0]}))
    assert frame["profile"].tolist() == ["slow"]
    assert "| ucfl streams=2 | 0 | slow | 1 | 2 | 4/4 | 1.00 |" in stream_summary_md(frame)


def test_nothing_formed_gives_no_section():
    frame = stream_report({"seed0__fedfomo": {"1": {"x": 1}}}, make_clients({"fedfomo": [0]}))
    assert frame.empty and stream_summary_md(frame) == []


def test_format_sizes():
    assert format_sizes([97, 1, 1, 1]) == "97/1/1/1"
    assert format_sizes([5, 5, 5, 5, 2, 1, 1, 1, 1]) == "5x4/2/1x4"


def test_contingency_and_figure(frame):
    np.testing.assert_array_equal(contingency(SEVEN_ONE, np.array(GROUPS)), [[4, 0], [3, 1]])
    fig = stream_figure(frame, CLIENTS)
    # One panel per curve: its first run's last formation.
    assert [trace.z.tolist() for trace in fig.data] == [
        [[4, 0], [3, 1]],
        [[2, 2], [2, 2]],
        [[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]],
        [[4], [4]],
    ]
    assert fig.layout.annotations[0].text == "ucfl streams=2 (seed 0, round 1), ARI 0.00"


def test_write_stream_outputs_writes_the_figure_and_returns_the_section(tmp_path):
    from wirelessfl.results.streams import read_diagnostics, write_stream_outputs

    (tmp_path / "diagnostics.json").write_text(json.dumps(DIAGNOSTICS))
    lines = write_stream_outputs(tmp_path, read_diagnostics(tmp_path), CLIENTS)
    assert lines == stream_summary_md(stream_report(DIAGNOSTICS, CLIENTS))
    assert '"type":"heatmap"' in (tmp_path / "streams.html").read_text() and (tmp_path / "plotly.min.js").exists()
    assert read_diagnostics(tmp_path / "nothing") == {} and write_stream_outputs(tmp_path, {}, CLIENTS) == []
