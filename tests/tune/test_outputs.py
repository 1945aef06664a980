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


def test_a_tuned_scenario_is_named_tuned_once_and_within_the_name_limit():
    from wirelessfl.config import MAX_NAME
    from wirelessfl.tune.outputs import tuned_name

    assert tuned_name("quickstart") == "quickstart-tuned"
    assert tuned_name("quickstart-tuned") == "quickstart-tuned"
    long = tuned_name("x" * MAX_NAME)
    assert len(long) == MAX_NAME and long.endswith("-tuned")


def test_tuned_yaml_names_its_study_and_its_run_says_where_the_values_came_from(tmp_path):
    """tuned.yaml is ``<scenario>-tuned`` with ``tuned_from`` the tuning folder's name; a run of it is named
    ``<scenario>-tuned-<timestamp>`` and its summary.md names that study; the field changes no fingerprint."""
    import re

    import yaml
    from typer.testing import CliRunner

    from wirelessfl.cli import app
    from wirelessfl.config import dump_scenario, parse_scenario, scenario_fingerprint
    from wirelessfl.tune.outputs import tuned_scenario
    from wirelessfl.tune.study import targets

    doc = {
        "name": "tiny", "rounds": 1, "device": "cpu", "output": str(tmp_path / "results"),
        "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 30}, "partition": [{"name": "iid"}]},
        "model": {"name": "mlp", "options": {"hidden": [8]}}, "algorithms": [{"name": "local"}],
        "tune": {"trials": 2},
    }
    scenario = parse_scenario(doc)
    best = {"local": {"value": 0.5, "trial": 1, "values": {"training.lr": 0.02}}}
    tuned = tuned_scenario(scenario, targets(scenario), best, "tiny-tune-20250101-120000")
    assert (tuned["name"], tuned["tuned_from"]) == ("tiny-tuned", "tiny-tune-20250101-120000")
    assert yaml.safe_load(dump_scenario(scenario))["tuned_from"] is None  # written out, and fingerprinted as before:
    untuned = parse_scenario({k: v for k, v in tuned.items() if k != "tuned_from"})
    assert scenario_fingerprint(parse_scenario(tuned)) == scenario_fingerprint(untuned)
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(tuned))
    done = CliRunner().invoke(app, ["simulate", str(path), "--quiet"])
    assert done.exit_code == 0, done.output
    (run_dir,) = (tmp_path / "results").iterdir()
    assert re.fullmatch(r"tiny-tuned-\d{8}-\d{6}(-\d+)?", run_dir.name), run_dir.name
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert (
        "- tuned: the values `wirelessfl tune` chose on the validation split in the tuning directory "
        "tiny-tune-20250101-120000 (its summary.md, study.csv and study.db); this run measures them on the test split.\n"
    ) in summary
    assert yaml.safe_load((run_dir / "scenario.yaml").read_text())["tuned_from"] == "tiny-tune-20250101-120000"


def test_the_tuning_summary_gives_the_objective_in_percent(tmp_path):
    from wirelessfl.config import parse_scenario
    from wirelessfl.tune.outputs import summary_lines
    from wirelessfl.tune.study import targets

    scenario = parse_scenario({
        "name": "tiny", "data": {"dataset": "digits", "clients": 4}, "algorithms": [{"name": "local"}], "tune": {"trials": 4},
    })
    best = {"local": {"value": 0.8125, "trial": 2, "values": {"training.lr": 0.02}}}
    text = summary_lines(scenario, targets(scenario), best, _table(1).assign(curve="local"), [])
    assert "| curve | best objective % | trial | values | complete / pruned / failed |" in text
    assert "| local | 81.2 | 2 | training.lr = 0.02 | 3 / 1 / 0 |" in text
