"""Hostile and damaged inputs from outside (issue: trust, second round): no code runs from a received run folder,
a truncated run is not finished silently, and each bad input is one line with exit code 2, nothing written or
changed, and no hang."""

from __future__ import annotations

import math
import os
import shutil
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl import checkpoint
from wirelessfl.cli import app
from wirelessfl.cli import run as cli_run
from wirelessfl.config import dump_scenario, parse_scenario
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.simulate import simulate

runner = CliRunner()

SMALL = {
    "name": "trust",
    "rounds": 3,
    "checkpoint_every": 1,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 20}, "partition": [{"name": "iid"}]},
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}],
}

EVIL_MODULE = """
import pathlib
pathlib.Path("IMPORTED").write_text("evilmod ran")


def f(input_shape, num_classes, **options):
    import torch

    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes))
"""


def _files(run_dir: Path) -> dict[Path, tuple[bytes, int]]:
    """Every file under ``run_dir`` with its bytes and modification time."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _one_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def _finished_run(tmp_path: Path, doc=SMALL, stop_after: int | None = None) -> Path:
    """A run directory as `simulate` leaves it (stopped after ``stop_after`` rounds when given)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "scenario.yaml").write_text(dump_scenario(parse_scenario(doc)))
    if stop_after is None:
        assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0
    else:
        with pytest.raises(KeyboardInterrupt):
            simulate(parse_scenario(doc), run_dir, stop_after_rounds=stop_after)
    return run_dir


def _in_the_folder(run_dir: Path, monkeypatch, capsys, *args: str) -> SimpleNamespace:
    """``cd RUN && python -m wirelessfl ARGS`` in this process (the console entry point): the folder is the
    working directory and first on ``sys.path``, as for the probe. Returns its exit code, stdout and stderr."""
    capsys.readouterr()
    monkeypatch.chdir(run_dir)
    monkeypatch.syspath_prepend(str(run_dir))
    monkeypatch.setattr(sys, "argv", ["wirelessfl", *args])
    try:
        cli_run()
    except SystemExit as stop:
        code = stop.code
    finally:
        sys.modules.pop("evilmod", None)  # imported only by a regression; the next case must import it afresh
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


# ----------------------------------------------------------------------------- no code from a received run folder


@pytest.fixture(scope="module")
def received(tmp_path_factory):
    """A finished run folder as someone may send it: with ``evilmod.py`` beside it, importing which leaves a file."""
    return _finished_run(tmp_path_factory.mktemp("received"))


def _plant(received: Path, tmp_path: Path, edit) -> Path:
    run_dir = tmp_path / "received"
    shutil.copytree(received, run_dir)
    (run_dir / "evilmod.py").write_text(EVIL_MODULE)
    raw = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    edit(raw)
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return run_dir


def _evil_model(raw):
    raw["model"] = {"name": "evilmod:f", "options": {}, "head": None}


def _evil_model_and_renamed_curve(raw):
    _evil_model(raw)
    raw["algorithms"][0]["label"] = "renamed"


def _evil_dataset(raw):
    raw["data"]["dataset"] = "evilmod:f"


def _evil_dataset_and_renamed_curve(raw):
    _evil_dataset(raw)
    raw["algorithms"][0]["label"] = "renamed"


OTHER_SETTINGS = (
    "error: checkpoints/seed0__fedavg.done.safetensors: written for other settings than scenario.yaml (was that file "
    "edited after the run started?); put back the scenario the run started with, or run the edited file as a new run"
)
NONE_FOR_THIS = (
    "error: scenario.yaml: none of the checkpoints in checkpoints was written for this scenario (was the file edited "
    "after the run started?), so its model 'evilmod:f' is not imported; put back the scenario the run started with, "
    "or run the edited file as a new run"
)


EDITS = {
    "model": (_evil_model, OTHER_SETTINGS),
    "model+label": (_evil_model_and_renamed_curve, NONE_FOR_THIS),
    "dataset": (_evil_dataset, OTHER_SETTINGS),
    "dataset+label": (_evil_dataset_and_renamed_curve, NONE_FOR_THIS.replace("its model 'evilmod:f'", "its dataset loader 'evilmod:f'")),
}
COMMANDS = {"command0": ["simulate", "--resume", ".", "--quiet"], "command1": ["validate", "scenario.yaml"]}


@pytest.mark.parametrize(
    "edit, message, command",
    [
        pytest.param(*EDITS[e], COMMANDS[c], id=f"{e}-{c}")
        for e in EDITS
        for c in COMMANDS
    ],
)
def test_a_received_run_folder_naming_its_own_module_is_refused_before_the_module_is_imported(
    received, tmp_path, monkeypatch, capsys, command, edit, message
):
    run_dir = _plant(received, tmp_path, edit)
    before = _files(run_dir)
    done = _in_the_folder(run_dir, monkeypatch, capsys, *command)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (2, "", message)
    assert not (run_dir / "IMPORTED").exists()
    assert _files(run_dir) == before


@pytest.fixture
def user_model(tmp_path, monkeypatch):
    """A module of the user's own on ``sys.path`` (a model of ``usermods``), as a user runs it."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "usermods.py").write_text(textwrap.dedent("""
        import math

        import torch
        from torch import nn


        def mlp(input_shape, num_classes, hidden=16):
            return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


        def raises(input_shape, num_classes):
            raise RuntimeError("no such layer")


        class Noisy(nn.Module):
            def __init__(self, features, classes):
                super().__init__()
                self.fc = nn.Linear(features, classes)

            def forward(self, x):
                x = x.flatten(1)
                return self.fc(x) + 0.0 * torch.randn(x.shape[0], self.fc.out_features)


        def noisy(input_shape, num_classes):
            return Noisy(math.prod(input_shape), num_classes)


        class Broken(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, x):
                return self.fc(x)  # [B, 1, 8, 8] into a 3-feature layer


        def broken(input_shape, num_classes):
            return Broken()
    """))
    monkeypatch.syspath_prepend(str(folder))
    yield
    for name in [m for m in sys.modules if m == "usermods"]:
        del sys.modules[name]


def test_a_run_of_a_users_own_model_resumes_and_validates_once_its_checkpoints_vouch_for_it(tmp_path, user_model):
    doc = {**SMALL, "model": {"name": "usermods:mlp", "options": {"hidden": 8}}}
    run_dir = _finished_run(tmp_path, doc, stop_after=2)
    result = runner.invoke(app, ["validate", str(run_dir / "scenario.yaml")])
    assert result.exit_code == 0 and result.output.startswith("ok trust: digits, 4 clients, 3 rounds"), result.output
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0
    assert pd.read_csv(run_dir / "trace.csv")["round"].tolist() == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- a done checkpoint proves it is complete


def _stamp(path: Path) -> str:
    return checkpoint.fingerprint_of(path)


def _rewrite(path: Path, change) -> None:
    """Load a checkpoint, change its state and save it again with fresh checksums and its stamp (what someone
    re-hashing an edited file does)."""
    stamp = _stamp(path)
    state = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES, stamp, PROVENANCE)
    checkpoint.save_checkpoint(path, change(state), CHECKPOINT_TYPES, stamp, PROVENANCE)


def _retrain(run_dir: Path) -> str:
    return f"delete it and run `wirelessfl simulate --resume {run_dir}` to retrain that unit"


def test_an_older_partial_copied_over_the_done_checkpoint_is_refused_and_the_run_left_as_it_was(tmp_path):
    run_dir = _finished_run(tmp_path, stop_after=2)
    ckpt = run_dir / "checkpoints"
    older = tmp_path / "older.partial.safetensors"
    shutil.copyfile(ckpt / "seed0__fedavg.partial.safetensors", older)
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0
    done = ckpt / "seed0__fedavg.done.safetensors"
    shutil.copyfile(older, done)
    before = _files(run_dir)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _one_error(result) == (
        f"error: {done}: holds a partial checkpoint (rounds 0 to 1 of 3) under the name of a done one; {_retrain(run_dir)}"
    )
    assert _files(run_dir) == before
    done.unlink()
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0
    assert pd.read_csv(run_dir / "trace.csv")["round"].tolist() == [0, 1, 2, 3]


def test_a_done_checkpoint_without_its_kind_must_still_hold_every_round(tmp_path):
    """A file written before checkpoints recorded their kind (no ``kind`` in its state) is judged by its rounds."""
    run_dir = _finished_run(tmp_path, stop_after=2)
    partial = run_dir / "checkpoints" / "seed0__fedavg.partial.safetensors"
    done = partial.with_name("seed0__fedavg.done.safetensors")
    _rewrite(partial, lambda state: {k: v for k, v in state.items() if k != "kind"})
    partial.rename(done)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _one_error(result) == (
        f"error: {done}: a finished unit's checkpoint must hold all 3 rounds, this one ends at round 1; {_retrain(run_dir)}"
    )


def _edit_round(state):
    state["records"][2].round = 7
    return state


def _drop_plan(state):
    state["records"][1].plan = None
    return state


def _one_timing_too_many(state):
    state["timings"] = state["timings"] + state["timings"][:1]
    return state


@pytest.mark.parametrize(
    "change, damage",
    [
        (_edit_round, "its records hold rounds [0, 1, 7, 3], not 0, 1, 2, ... in order"),
        (_drop_plan, "a round without its plan"),
        (lambda state: {**state, "records": []}, "no list of round records"),
        (lambda state: {**state, "clock": None}, "no clock"),
        (lambda state: {**state, "kind": "partial"}, None),
    ],
)
def test_a_rehashed_done_checkpoint_with_edited_records_is_one_line(tmp_path, change, damage):
    run_dir = _finished_run(tmp_path)
    done = run_dir / "checkpoints" / "seed0__fedavg.done.safetensors"
    _rewrite(done, change)
    before = _files(run_dir)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    if damage is None:
        expected = f"error: {done}: holds a partial checkpoint (rounds 0 to 3 of 3) under the name of a done one; {_retrain(run_dir)}"
    else:
        expected = f"error: {done}: damaged checkpoint ({damage}); {_retrain(run_dir)}"
    assert _one_error(result) == expected
    assert _files(run_dir) == before


def test_a_partial_checkpoint_with_a_timing_too_many_is_one_line(tmp_path):
    doc = {**SMALL, "networks": [{"preset": "wired", "deadline": 50.0}]}  # trained per profile: a timing per round
    run_dir = _finished_run(tmp_path, doc, stop_after=2)
    partial = run_dir / "checkpoints" / "seed0__fedavg__wired.partial.safetensors"
    _rewrite(partial, _one_timing_too_many)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _one_error(result) == (
        f"error: {partial}: damaged checkpoint (timings for 2 rounds, records for 1); {_retrain(run_dir)}"
    )


# ----------------------------------------------------------------------------- one line where one line is promised


def test_a_model_factory_that_raises_is_one_line(tmp_path, user_model):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "model": {"name": "usermods:raises"}}))
    result = runner.invoke(app, ["validate", str(path), "--build"])
    assert _one_error(result) == f"error: {path}: model 'usermods:raises': the factory raised RuntimeError: no such layer"


def test_a_forward_that_raises_on_real_values_is_one_line(tmp_path, user_model):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "model": {"name": "usermods:broken"}}))
    result = runner.invoke(app, ["simulate", str(path), "--out", str(tmp_path / "run")])
    assert _one_error(result).startswith(
        f"error: {path}: model 'usermods:broken': its forward raised RuntimeError on a [2, 1, 8, 8] batch of zeros: "
        "mat1 and mat2 shapes cannot be multiplied"
    )
    assert not (tmp_path / "run").exists()


def test_a_forward_that_draws_noise_of_the_batch_size_validates_and_trains(tmp_path, user_model):
    """``torch.randn(x.shape[0], k)`` in a forward: the shape probe runs it on the meta device, where the noise is
    made too, instead of mixing a CPU tensor into meta values."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "rounds": 1, "model": {"name": "usermods:noisy"}}))
    assert runner.invoke(app, ["validate", str(path), "--build"]).exit_code == 0
    result = runner.invoke(app, ["simulate", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(tmp_path / "run" / "trace.csv")["round"].tolist() == [0, 1]


# ----------------------------------------------------------------------------- report: validate first, write after, never hang


STREAMS = {
    **SMALL,
    "rounds": 1,
    "data": {**SMALL["data"], "clients": 8, "partition": [{"name": "iid"}, {"name": "label_permutation", "groups": 4}]},
    "algorithms": [{"name": "ucfl", "params": {"streams": 2, "temperature": 1.0}}],
}
"""A run that formed streams, so that report rewrites streams.html as well as summary.md."""


@pytest.fixture(scope="module")
def streams_run(tmp_path_factory):
    return _finished_run(tmp_path_factory.mktemp("streams"), STREAMS)


@pytest.fixture
def reported(streams_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(streams_run, run_dir)
    assert (run_dir / "streams.html").is_file() and (run_dir / "summary.md").is_file()
    return run_dir


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "2"], "error: target accuracy must be a number in (0, 1], got 2.0"),
        (["--target", "nan"], "error: target accuracy must be a number in (0, 1], got nan"),
    ],
)
def test_a_bad_target_is_refused_before_any_file_is_rewritten(reported, args, message):
    before = _files(reported)
    assert _one_error(runner.invoke(app, ["report", str(reported), *args])) == message
    assert _files(reported) == before


def test_a_reproduction_page_for_a_run_of_no_paper_is_refused_before_any_file_is_rewritten(reported, tmp_path):
    before = _files(reported)
    page = tmp_path / "nope.md"
    line = _one_error(runner.invoke(app, ["report", str(reported), "--reproduction", str(page)]))
    assert line.startswith(f"error: {reported}: scenario 'trust' is not one of the paper scenarios [")
    assert _files(reported) == before and not page.exists()


def test_report_on_a_run_whose_scenario_yaml_does_not_parse_is_one_line(reported):
    (reported / "scenario.yaml").write_text("name: [unclosed\n")
    before = _files(reported)
    result = runner.invoke(app, ["report", str(reported)])
    assert _one_error(result) == (
        f"error: {reported / 'scenario.yaml'}: not valid YAML at line 2, column 1: expected ',' or ']', but got "
        "'<stream end>'; fix it or pass --target"
    )
    assert _files(reported) == before


def test_report_on_a_trace_that_is_a_fifo_is_one_line_and_does_not_hang(reported, no_longer_than):
    (reported / "trace.parquet").unlink()
    (reported / "trace.csv").unlink()
    os.mkfifo(reported / "trace.csv")
    with no_longer_than(60):
        result = runner.invoke(app, ["report", str(reported)])
    assert _one_error(result) == (
        f"error: {reported / 'trace.csv'}: a FIFO, not a file; wirelessfl reads only regular files in a run folder "
        "(replace it with the file or remove it)"
    )


@pytest.mark.parametrize(
    "name, data, reason",
    [
        ("trace.csv", b"\xff\xfe not text", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
        ("trace.parquet", b"PAR1 not parquet", "Could not open Parquet input source"),
    ],
)
def test_a_damaged_trace_is_named_in_its_decode_error(reported, name, data, reason):
    (reported / "trace.parquet").unlink()
    (reported / name).write_bytes(data)
    line = _one_error(runner.invoke(app, ["report", str(reported)]))
    assert line.startswith(f"error: {reported / name}: cannot be read as the run's trace ({reason}")


# ----------------------------------------------------------------------------- messages


def test_user_text_is_printed_literally_not_as_emoji(tmp_path):
    missing = tmp_path / "x:a:y.yaml"
    assert _one_error(runner.invoke(app, ["validate", str(missing)])) == f"error: {missing}: no such scenario file"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "model": {"name": "pkg:smile:"}}))
    line = _one_error(runner.invoke(app, ["validate", str(path)]))
    assert line.endswith("or 'package.module:factory', got 'pkg:smile:'"), line


def test_uploads_lost_to_empty_batteries_are_not_called_missed_deadlines(tmp_path):
    """A budget of 1e-9 J empties every battery in round 1 (no deadline anywhere); the run still writes its results
    (the timeline shows round 1, the last with a participant, not the middle round nobody took part in)."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "networks": [{"preset": "wired", "energy": {"budget_j": 1e-9}}]}))
    result = runner.invoke(app, ["simulate", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    line = ("on wired, under 80% of the participants' uploads were aggregated per round (their batteries ran out): "
            "fedavg 0%")
    assert f"warning: {line}" in result.output and "deadline" not in result.output
    assert f"- **warning** {line}" in (tmp_path / "run" / "summary.md").read_text()
    assert (tmp_path / "run" / "timeline.html").is_file()


def test_the_study_table_writes_rounds_as_whole_numbers(tmp_path):
    """A trial killed before it reported a round (an interrupted tuning) leaves an empty cell, and the others
    keep their rounds as integers: 4, not 4.0."""
    import optuna

    from wirelessfl.results.io import atomic_write_frame
    from wirelessfl.tune.outputs import study_table

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    for step in range(1, 5):
        trial.report(0.1 * step, step)
    study.tell(trial, 0.4)
    study.ask()  # left running, as a killed tuning leaves it
    table = study_table([SimpleNamespace(curve="fedavg", algorithm="fedavg")], {"fedavg": study})
    atomic_write_frame(tmp_path / "study.csv", table)
    lines = (tmp_path / "study.csv").read_text().splitlines()
    assert lines[0].startswith("curve,algorithm,trial,state,value,last_round,seconds")
    assert lines[1].startswith("fedavg,fedavg,0,complete,0.4,4,")
    assert lines[2].startswith("fedavg,fedavg,1,running,,,")
    assert math.isnan(table["value"].iloc[1])
