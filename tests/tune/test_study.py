"""``wirelessfl tune``: validation split only, a killed search resumes to the same trials, any executor."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.algorithms.base import Context
from wirelessfl.cli import app
from wirelessfl.config import load_scenario, parse_scenario
from wirelessfl.simulate import simulate
from wirelessfl.sweep.executors import LocalExecutor, ProcessExecutor
from wirelessfl.tune.study import TuneCost, objective, run_tune, targets, trial_scenario, trials_finished

runner = CliRunner()

TINY = {
    "name": "tiny-tune",
    "rounds": 3,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 6, "samples": {"per_client": 40}, "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}]},
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 8, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "wired"}],
    "tune": {"trials": 4, "batch": 2, "startup_trials": 2, "warmup_rounds": 1, "last_rounds": 2},
}
KEY = ["curve", "state", "value"]


def finished_trials(table: pd.DataFrame) -> pd.DataFrame:
    """Trials in the order each curve finished them, without their numbers (a resume renumbers) or timings."""
    kept = table[table["state"] != "interrupted"].sort_values(["curve", "trial"])
    params = sorted(c for c in kept.columns if c.startswith("param "))
    return kept[KEY + params].reset_index(drop=True)


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """The uninterrupted search, trials in a two-process pool."""
    out = tmp_path_factory.mktemp("pooled")
    return run_tune(parse_scenario(TINY), out, ProcessExecutor(2))


def test_a_search_writes_its_study_tuned_scenario_and_history(pooled):
    table = pooled.table
    assert len(table) == 8 and set(table["curve"]) == {"fedavg", "local"}
    assert set(table["state"]) <= {"complete", "pruned"} and (table["state"] == "complete").any()
    for name in ("study.db", "study.csv", "tuned.yaml", "history.html", "summary.md"):
        assert (pooled.dir / name).is_file(), name
    assert str(pooled.dir) not in (pooled.dir / "tuned.yaml").read_text()  # a folder that moves, or is committed, stays right
    tuned = load_scenario(pooled.dir / "tuned.yaml")
    assert tuned.tune is None and [a.label for a in tuned.algorithms] == ["fedavg", "local"]
    for algo in tuned.algorithms:
        best = pooled.best[algo.label]
        row = table[(table["curve"] == algo.label) & (table["trial"] == best["trial"])].iloc[0]
        assert row["value"] == table[(table["curve"] == algo.label) & (table["state"] == "complete")]["value"].max()
        assert algo.training == {"lr": best["values"]["training.lr"], "local_epochs": best["values"]["training.local_epochs"]}


def test_trials_never_read_the_test_split_and_score_the_validation_accuracy(tmp_path, monkeypatch):
    """The objective is avg_val_acc; a tuning that touched a test split would fail here."""
    def refuse(self, clients):
        raise AssertionError("the test split was read during tuning")

    monkeypatch.setattr(Context, "test_sets", refuse)
    result = run_tune(parse_scenario({**TINY, "tune": {**TINY["tune"], "trials": 2}}), tmp_path, LocalExecutor())
    assert (result.table["state"] == "complete").all()
    monkeypatch.undo()
    scenario = parse_scenario(TINY)
    target = targets(scenario)[0]
    row = result.table[result.table["curve"] == target.curve].iloc[0]
    values = {k.removeprefix("param "): v for k, v in row.items() if k.startswith("param ") and not pd.isna(v)}
    values["training.local_epochs"] = int(values["training.local_epochs"])
    trace = simulate(trial_scenario(scenario, target, values)).trace
    assert row["value"] == objective(trace, 2)
    assert objective(trace, 2) == trace[trace["round"] >= 2]["avg_val_acc"].mean()
    assert not math.isclose(objective(trace, 2), trace[trace["round"] >= 2]["avg_acc"].mean())


def test_an_interrupted_search_resumes_to_the_trials_of_an_uninterrupted_one(tmp_path, pooled):
    """Stopped with its second batch asked and running; the resume runs those trials again, then goes on."""
    scenario = parse_scenario(TINY)
    with pytest.raises(KeyboardInterrupt):
        run_tune(scenario, tmp_path, LocalExecutor(), stop_after_trials=2)
    assert trials_finished(scenario, tmp_path) == 4  # the first batch (2 trials of each curve); the running second does not count
    resumed = run_tune(scenario, tmp_path, LocalExecutor())
    assert (resumed.table["state"] == "interrupted").sum() == 4
    assert any("4 trial(s) interrupted" in note for note in resumed.notes)
    pd.testing.assert_frame_equal(finished_trials(resumed.table), finished_trials(pooled.table))
    assert {c: (b["value"], b["values"]) for c, b in resumed.best.items()} == {c: (b["value"], b["values"]) for c, b in pooled.best.items()}


def test_a_killed_tune_command_resumes_with_resume(tmp_path):
    """SIGKILL after the first finished trial (trials of 6 rounds, so the others are still to run), then
    ``wirelessfl tune --resume DIR`` finishes every curve's budget (2 trials, in one batch) and writes tuned.yaml."""
    doc = {**TINY, "tune": {**TINY["tune"], "rounds": 6, "trials": 2}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "t"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wirelessfl", "tune", str(path), "--out", str(out), "--quiet", "--executor", "local"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 300
        for line in proc.stderr:
            if line.startswith(("fedavg trial", "local trial")):
                break
            assert time.monotonic() < deadline, "no trial finished"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert not (out / "tuned.yaml").exists()
    clash = runner.invoke(app, ["tune", "--resume", str(out), "--trials", "5"])
    assert clash.exit_code == 2 and clash.output.startswith(f"error: --resume continues {out} with the scenario in its tune.yaml; leave out --trials")
    result = runner.invoke(app, ["tune", "--resume", str(out), "--quiet", "--executor", "local"])
    assert result.exit_code == 0, result.output
    assert re.search(r"one trial of every curve [^,]+, the [1-3] of 4 trials left (about|under) ", result.output), result.output
    table = pd.read_csv(out / "study.csv")
    assert (table["state"] == "interrupted").sum() >= 1
    counted = table[table["state"].isin(["complete", "pruned"])].groupby("curve").size()
    assert counted.to_dict() == {"fedavg": 2, "local": 2}
    assert "interrupted by the earlier stop were run again" in (out / "summary.md").read_text()
    assert [a.label for a in load_scenario(out / "tuned.yaml").algorithms] == ["fedavg", "local"]


def test_the_python_api_tunes_and_resumes_into_its_folder(tmp_path):
    import wirelessfl

    doc = {**TINY, "algorithms": [{"name": "fedavg"}], "tune": {**TINY["tune"], "trials": 2}}
    first = wirelessfl.tune(doc, tmp_path / "t")
    assert len(first.table) == 2 and (tmp_path / "t" / "tuned.yaml").is_file()
    again = wirelessfl.tune(doc, tmp_path / "t")  # the same scenario: its finished study, no new trial
    pd.testing.assert_frame_equal(again.table, first.table)
    with pytest.raises(ValueError, match="holds a tuning of a different scenario"):
        wirelessfl.tune(doc, tmp_path / "t", trials=3)


def test_ray_runs_the_same_trials(tmp_path, pooled, local_ray):
    """Ray workers report to the same SQLite study: the trials, values and best values of the pool."""
    from wirelessfl.sweep.executors import RayExecutor

    remote = run_tune(parse_scenario(TINY), tmp_path, RayExecutor(None, 2))
    pd.testing.assert_frame_equal(finished_trials(remote.table), finished_trials(pooled.table))


def test_the_cost_preview_of_a_resumed_tuning_times_the_trials_left():
    """By hand: 2 curves x 4 trials, one trial of every curve 120 s; 3 of the 8 trials finished leave 5, so
    4 x 120 s x 5 / 8 = 300 s."""
    cost = TuneCost(curves=2, trials=4, rounds=5, seeds=1, profile="wired", memory_line="m", one_trial_s=120.0)
    assert ", the whole budget about 8 min on this machine" in cost.line()
    resumed = TuneCost(curves=2, trials=4, rounds=5, seeds=1, profile="wired", memory_line="m", one_trial_s=120.0, finished=3)
    assert ", the 5 of 8 trials left about 5 min on this machine" in resumed.line()
