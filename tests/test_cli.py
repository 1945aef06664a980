"""End to end through the command line, as a user runs it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app

runner = CliRunner()

SCENARIO = {
    "name": "e2e",
    "rounds": 2,
    "target_accuracy": 0.3,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 4,
        "samples": {"per_client": 30},
        "partition": [{"name": "dirichlet", "alpha": 0.5}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp"},
    "training": {"batch_size": 10},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "slow-ul-unreliable"}, {"preset": "wired"}],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    scenario = root / "s.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    out = root / "run"
    result = runner.invoke(app, ["simulate", str(scenario), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def test_simulate_writes_trace_summary_and_figures(run_dir):
    for name in ("scenario.yaml", "trace.csv", "trace.parquet", "clients.csv", "summary.md", "fig3.html", "fig2.html"):
        assert (run_dir / name).is_file(), name
    trace = pd.read_csv(run_dir / "trace.csv")
    trace["variant"] = trace["variant"].fillna("")
    assert len(trace) == (2 + 1) * 2 * 2
    assert {"scenario", "algorithm", "variant", "profile", "seed", "round", "time", "avg_acc", "worst_acc"} <= set(trace)
    for _, group in trace.groupby(["curve", "profile"]):
        assert group.sort_values("round")["time"].is_monotonic_increasing
    assert trace.avg_acc.between(0, 1).all()
    summary = (run_dir / "summary.md").read_text()
    assert "fedavg" in summary and "wired" in summary
    html = (run_dir / "fig3.html").read_text()
    assert "slow-ul-unreliable" in html and "local" in html
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "trace.parquet"), trace, check_dtype=False)
    runtime = json.loads((run_dir / "runtime.json").read_text())
    assert set(runtime) == {"seed0__fedavg", "seed0__local"}
    assert all(unit["rounds"] == 2 and unit["train_samples_per_round"] > 0 for unit in runtime.values())
    assert "local-training samples/s" in summary


def test_plot_and_report_remake_outputs(run_dir):
    (run_dir / "fig3.html").unlink()
    assert runner.invoke(app, ["plot", str(run_dir)]).exit_code == 0
    assert (run_dir / "fig3.html").is_file()
    assert runner.invoke(app, ["report", str(run_dir)]).exit_code == 0
    assert (run_dir / "summary.md").is_file()


def test_validate_and_list(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0 and "ok" in result.output
    listing = runner.invoke(app, ["list"])
    assert listing.exit_code == 0
    for name in ("fedavg", "dirichlet", "digits", "lenet5", "slow-ul-unreliable"):
        assert name in listing.output


def test_user_error_is_one_line_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "rounds": 0}))
    out = tmp_path / "never"
    result = runner.invoke(app, ["simulate", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert "rounds: Input should be greater than or equal to 1" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_missing_dataset_fails_before_writing(tmp_path):
    doc = {**SCENARIO, "data": {**SCENARIO["data"], "dataset": "emnist", "root": str(tmp_path / "empty")}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "never"
    result = runner.invoke(app, ["simulate", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "emnist" in result.output.lower() and "Traceback" not in result.output
    assert not out.exists()
