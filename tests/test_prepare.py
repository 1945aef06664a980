"""One door into a run: ``wirelessfl simulate`` and ``wirelessfl.simulate(...)`` refuse the same things, in the same words.

Both go through ``wirelessfl.run.prepare``: the dataset, the memory guard, the
build checks, then the directory rule (a new run needs a new or empty directory;
a run continues only when asked, ``--resume DIR`` or ``resume=True``). The CLI
prefixes a scenario's refusal with its file and names its own flags.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl.learning.data import guard as data_guard
from wirelessfl.cli import app

runner = CliRunner()
OK = {
    "name": "ok",
    "rounds": 2,
    "seeds": [0],
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 3, "samples": {"per_client": 20}},
    "model": {"name": "mlp", "options": {"hidden": [4]}},
    "training": {"batch_size": 10},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}],
}


def _write(tmp_path, doc=OK):
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _cli_error(args) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_the_memory_guard_refuses_through_the_python_api_as_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setattr(data_guard, "available_ram", lambda: 1_000)  # not even the data (460 kB) fits
    path = _write(tmp_path)
    with pytest.raises(ValueError) as refused:
        wirelessfl.simulate(str(path), out=tmp_path / "api")
    message = str(refused.value)
    assert message.startswith("memory: building the data needs about ") and "but 1.0 kB is available" in message
    assert _cli_error(["simulate", str(path), "--out", str(tmp_path / "cli"), "--quiet"]) == f"error: {path}: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.yaml"]


def test_a_missing_dataset_is_refused_by_both_doors_in_the_same_words(tmp_path):
    doc = {**OK, "data": {**OK["data"], "dataset": "emnist", "root": str(tmp_path / "nothing"), "download": False}}
    path = _write(tmp_path, doc)
    with pytest.raises(ValueError) as refused:
        wirelessfl.simulate(doc, out=tmp_path / "api")
    message = str(refused.value)
    assert message.startswith("scenario: ") and "emnist" in message
    cli_line = _cli_error(["simulate", str(path), "--out", str(tmp_path / "cli"), "--quiet"])
    assert cli_line == f"error: {path}: {message.removeprefix('scenario: ')}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.yaml"]


def test_a_directory_that_holds_anything_is_refused_by_both_doors_and_resumed_only_when_asked(tmp_path):
    path = _write(tmp_path)
    run_dir = tmp_path / "run"
    first = wirelessfl.simulate(str(path), out=run_dir)
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(ValueError) as refused:
        wirelessfl.simulate(str(path), out=run_dir)
    assert str(refused.value) == (
        f"out {run_dir}: already exists and is not an empty directory; choose a new one "
        "(an interrupted run continues with resume=True)"
    )
    assert _cli_error(["simulate", str(path), "--out", str(run_dir), "--quiet"]) == (
        f"error: --out {run_dir}: already exists and is not an empty directory; choose a new one "
        f"(an interrupted run continues with --resume {run_dir})"
    )
    assert sorted(p.name for p in run_dir.iterdir()) == before
    resumed = wirelessfl.simulate(None, out=run_dir, resume=True)
    assert resumed.trained_units == 0 and resumed.dir == run_dir
    pd.testing.assert_frame_equal(resumed.trace, first.trace)


def test_a_resume_through_the_python_api_keeps_the_runs_own_settings(tmp_path):
    path = _write(tmp_path)
    with pytest.raises(ValueError, match=r"^resume: continues the run in out with the settings in its scenario.yaml; give out$"):
        wirelessfl.simulate(str(path), resume=True)
    with pytest.raises(ValueError) as refused:
        wirelessfl.simulate(None, out=tmp_path / "run", resume=True, seeds=[1])
    assert str(refused.value) == "resume: continues the run in out with the settings in its scenario.yaml; leave out seeds"
    with pytest.raises(ValueError) as missing:
        wirelessfl.simulate(None, out=tmp_path, resume=True)
    assert str(missing.value) == f"out {tmp_path}: no scenario.yaml there (not a wirelessfl run directory)"
    wirelessfl.simulate(str(path), out=tmp_path / "run")
    with pytest.raises(ValueError) as other:
        wirelessfl.simulate({**OK, "rounds": 3}, out=tmp_path / "run", resume=True)
    assert str(other.value) == (
        f"out {tmp_path / 'run'}: scenario differs from the run's scenario.yaml in rounds; "
        "leave scenario out to continue the run as it was started"
    )
