"""Checkpoints cannot carry code, survive damage and full disks with one line, and round-trip exactly."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import pickle
import struct
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest
import torch
from plotly.offline import get_plotlyjs
from typer.testing import CliRunner

import wirelessfl.results.io as io_module
from wirelessfl import checkpoint
from wirelessfl.algorithms import ALGORITHMS
from wirelessfl.cli import app
from wirelessfl.config import dump_scenario, parse_scenario, scenario_fingerprint
from wirelessfl.results.figures import write_figures
from wirelessfl.results.io import WriteFailed, atomic_write_bytes, resumable_writes
from wirelessfl.seam import CommPlan, RoundTiming, Stream
from wirelessfl.run.build import build_units
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.run.folder import check_checkpoints
from wirelessfl.simulate import simulate

runner = CliRunner()

SMALL = {
    "name": "ckpt",
    "rounds": 3,
    "checkpoint_every": 1,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 4,
        "samples": {"per_client": 20},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}],
}

# the tiny federation of tests/test_simulate.py (a smaller MLP), with Adam moments kept so every state_dict has optimizer state
TINY = {
    "name": "tiny",
    "rounds": 3,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 6,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "optimizer": "adam", "lr": 0.01, "keep_optimizer_state": True},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "slow-ul-unreliable"}],
}


def assert_same(a, b, where="state"):
    """Equal down to types, dtypes, shapes, bytes (NaN and -0.0 included) and dict order."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert a.contiguous().reshape(-1).view(torch.uint8).tolist() == b.contiguous().reshape(-1).view(torch.uint8).tolist(), where
    elif isinstance(a, (np.ndarray, np.generic)):
        assert (a.dtype, a.shape) == (b.dtype, b.shape) and a.tobytes() == b.tobytes(), where
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), where
    elif isinstance(a, (dict, MappingProxyType)):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    else:
        assert a == b, where


def roundtrip(state, types=CHECKPOINT_TYPES):
    return checkpoint.loads(checkpoint.dumps(state, types), "x.safetensors", types)


def test_every_kind_of_value_round_trips_exactly():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    plan = CommPlan((Stream(1.0, frozenset({3, 1}), "s"),), {1: 0.5, 3: 1.0}, {3: 1.0, 1: 2.0}, 7, "p")
    timing = RoundTiming({1: 0.1}, {1: 0.2}, {1: 0.3}, frozenset({1}), 0.3, ((0.1, "rx 1"),), "s")
    state = {
        "floats": [0.1, -0.0, float("nan"), float("inf"), -float("inf"), 1e-310],
        "ints": [0, -1, 2**70, True, False, None, "text", "$not a tag"],
        "int keys": {3: "c", 1: "a"},
        "tag-like keys": {"$tensor": 1, "plain": 2},
        "containers": ((1, (2,)), {5, 4}, frozenset({9, 8}), [], {}, ()),
        "numpy": [np.float64(0.1), np.float32(1 / 3), np.int64(-5), np.bool_(True), np.uint8(200)],
        "arrays": [np.arange(5), np.array([[True, False]]), np.zeros((0, 3), np.float32), np.arange(6.0)[::2]],
        "tensors": [base, base[1], base.T, base, torch.zeros(0), torch.tensor(True), torch.ones(2, dtype=torch.bfloat16)],
        "proxy": MappingProxyType({2: 1.5}),
        "seam": [plan, timing],
    }
    back = roundtrip(state)
    assert_same(state, back)
    assert list(back["containers"][1]) == list(state["containers"][1])  # set iteration order kept, as pickle keeps it
    assert back["seam"][0].participants == frozenset({1, 3}) and back["seam"][0].downlink_payload == 1.0


def test_a_value_a_checkpoint_cannot_hold_is_named():
    with pytest.raises(TypeError, match=r"^checkpoint: cannot store builtin_function_or_method at state\.hook\[1\] \(not a plain value, tensor, array or allowed dataclass\)$"):
        checkpoint.dumps({"hook": [1, len]})
    with pytest.raises(TypeError, match=r"^checkpoint: cannot store a NumPy array of object at state\.a$"):
        checkpoint.dumps({"a": np.array([object()])})


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_state_round_trips_exactly(name):
    """The whole unit state after training (models, optimizer moments, records, plans) comes back bit for bit."""
    unit = build_units(parse_scenario({**TINY, "algorithms": [{"name": name}]}), 0)[0]
    unit.run(TINY["rounds"], 1)
    state = unit.state()
    encoded = checkpoint.dumps(state, CHECKPOINT_TYPES)
    back = checkpoint.loads(encoded, "x.safetensors", CHECKPOINT_TYPES)
    assert_same(state, back)
    assert any(isinstance(v, torch.Tensor) for v in back["algorithm"].values())


class RunsCode:
    """A pickle that runs a shell command when loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _error(result) -> str:
    """The one ``error:`` line of a CLI run (other lines, e.g. the cost note before training, are not errors)."""
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def _run_dir(tmp_path, doc=SMALL):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "scenario.yaml").write_text(dump_scenario(parse_scenario(doc)))
    return run_dir


@pytest.mark.parametrize("how", ["pickle", "torch.save"])
@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_a_crafted_pickle_checkpoint_is_refused_and_never_run(tmp_path, how, suffix):
    run_dir = _run_dir(tmp_path)
    marker = tmp_path / "pwned"
    path = run_dir / "checkpoints" / f"seed0__fedavg.partial{suffix}"
    if how == "pickle":
        path.write_bytes(pickle.dumps(RunsCode(marker)))
    else:
        torch.save({"algorithm": RunsCode(marker)}, path)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: {path}: refused: the file is a Python pickle, which could run code when loaded "
        "(wirelessfl checkpoints are safetensors); delete it to retrain that unit"
    )
    assert not marker.exists()


def test_a_truncated_checkpoint_is_one_line_and_deleting_it_lets_the_run_finish(tmp_path):
    run_dir = _run_dir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        simulate(parse_scenario(SMALL), run_dir, stop_after_rounds=2)
    path = run_dir / "checkpoints" / "seed0__fedavg.partial.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: {path}: damaged checkpoint (truncated: {len(data) // 2} bytes of {len(data)}); "
        f"delete it and run `wirelessfl simulate --resume {run_dir}` to retrain that unit"
    )
    path.unlink()
    again = simulate(parse_scenario(SMALL), run_dir)
    assert again.trained_units == 1 and again.trace["round"].tolist() == [0, 1, 2, 3]


def _damaged(data: bytes) -> str:
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.loads(data, "run/checkpoints/k.done.safetensors")
    return str(caught.value)


def test_damaged_files_name_the_damage():
    good = checkpoint.dumps({"w": torch.ones(4), "n": 1})
    size = int.from_bytes(good[:8], "little")
    advice = "delete it and run `wirelessfl simulate --resume run` to retrain that unit"
    prefix = "run/checkpoints/k.done.safetensors: damaged checkpoint"
    assert _damaged(good[:5]) == f"{prefix} (only 5 bytes); {advice}"
    assert _damaged(good[:20]) == f"{prefix} (truncated: the header alone needs {8 + size} bytes, the file has 20); {advice}"
    assert _damaged(b"\0" * 64) == f"{prefix} (not a safetensors file); {advice}"
    other = checkpoint._save_tensors({"w": torch.ones(2)})
    assert _damaged(other) == f"{prefix} (a safetensors file, but not a wirelessfl checkpoint); {advice}"
    assert _damaged(good + b"xy") == f"{prefix} (2 bytes after the end of the data); {advice}"
    assert _damaged(good[:-1]) == f"{prefix} (truncated: {len(good) - 1} bytes of {len(good)}); {advice}"
    assert checkpoint.loads(good, "k")["n"] == 1


def test_an_object_type_outside_the_allow_list_is_not_built():
    @dataclasses.dataclass
    class Foreign:
        command: str

    data = checkpoint.dumps({"x": Foreign("rm -rf /")}, (Foreign,))
    assert _damaged(data) == (
        "run/checkpoints/k.done.safetensors: damaged checkpoint (object type 'Foreign' is not one a checkpoint may hold); "
        "delete it and run `wirelessfl simulate --resume run` to retrain that unit"
    )


def _full_disk_on(monkeypatch, call: int):
    """From the ``call``-th write on, write half the bytes and then fail with ENOSPC, as a filling disk does."""
    calls = [0]
    real = io_module._write_fully

    def filling(fd, data):
        calls[0] += 1
        if calls[0] < call:
            return real(fd, data)
        os.write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io_module, "_write_fully", filling)


def test_a_full_disk_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "trace.csv"
    target.write_bytes(b"old")
    _full_disk_on(monkeypatch, 1)
    with pytest.raises(WriteFailed) as caught:
        atomic_write_bytes(target, b"new contents")
    assert str(caught.value) == (
        f"cannot write {target}: no space left on device; the previous version (if any) is unchanged; free space and write it again"
    )
    assert caught.value.errno == errno.ENOSPC and caught.value.strerror == "No space left on device"
    with pytest.raises(WriteFailed) as caught, resumable_writes(tmp_path):
        atomic_write_bytes(target, b"new contents")
    assert str(caught.value).endswith(f"; free space and run `wirelessfl simulate --resume {tmp_path}`")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.csv"]


def test_a_full_disk_during_a_checkpoint_is_one_line_and_the_run_resumes_to_the_identical_trace(tmp_path, monkeypatch):
    scenario = parse_scenario(SMALL)
    whole = simulate(scenario)
    run_dir = _run_dir(tmp_path)
    _full_disk_on(monkeypatch, 2)  # the round-1 checkpoint is written, the round-2 one fills the disk
    with pytest.raises(WriteFailed) as caught:
        simulate(scenario, run_dir)
    path = run_dir / "checkpoints" / "seed0__fedavg.partial.safetensors"
    assert str(caught.value) == (
        f"cannot write {path}: no space left on device; the previous version (if any) is unchanged; "
        f"free space and run `wirelessfl simulate --resume {run_dir}`"
    )
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert checkpoint.load_checkpoint(path, CHECKPOINT_TYPES)["records"][-1].round == 1
    monkeypatch.undo()
    resumed = simulate(scenario, run_dir)
    assert resumed.trained_units == 1
    pd.testing.assert_frame_equal(resumed.trace, whole.trace)


def test_done_checkpoints_keep_models_only_on_request(tmp_path):
    doc = {**SMALL, "algorithms": [{"name": "local"}]}
    scenario = parse_scenario(doc)
    lean_dir, full_dir = _run_dir(tmp_path / "lean", doc), _run_dir(tmp_path / "full", doc)
    lean = simulate(scenario, lean_dir)
    full = simulate(scenario, full_dir, keep_models=True)
    pd.testing.assert_frame_equal(lean.trace, full.trace)
    name = "checkpoints/seed0__local.done.safetensors"
    lean_state = checkpoint.load_checkpoint(lean_dir / name, CHECKPOINT_TYPES)
    full_state = checkpoint.load_checkpoint(full_dir / name, CHECKPOINT_TYPES)
    assert set(lean_state) == {"records", "timings", "clock", "wall_s", "phases", "follows", "kind"}
    assert lean_state["kind"] == full_state["kind"] == "done"
    assert set(full_state) == set(lean_state) | {"algorithm"}
    assert (lean_dir / name).stat().st_size * 5 < (full_dir / name).stat().st_size
    # the kept models are the final ones: restored into a fresh unit they give the last round's accuracies
    unit = build_units(scenario, 0)[0]
    unit.restore(full_state)
    acc = unit.algorithm.evaluate("test").accuracy.double().numpy()
    np.testing.assert_array_equal(acc, full_state["records"][-1].client_acc)
    # a finished run re-reports from lean checkpoints alone, without training
    again = simulate(scenario, lean_dir)
    assert again.trained_units == 0
    pd.testing.assert_frame_equal(again.trace, lean.trace)
    assert not list((lean_dir / "checkpoints").glob("*.partial.*"))


def test_a_resumed_run_keeps_models_when_it_was_started_with_keep_models(tmp_path):
    """Analysis scripts need every finished unit's models; a plain `--resume` must not drop those it finishes."""
    doc = {**SMALL, "algorithms": [{"name": "fedavg"}, {"name": "local"}]}
    scenario = parse_scenario(doc)
    run_dir = _run_dir(tmp_path / "run", doc)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir, keep_models=True, stop_after_rounds=5)
    ckpt = run_dir / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir()) == ["KEEP_MODELS", "seed0__fedavg.done.safetensors", "seed0__local.partial.safetensors"]
    resumed = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    for curve in ("fedavg", "local"):
        assert "algorithm" in checkpoint.load_checkpoint(ckpt / f"seed0__{curve}.done.safetensors", CHECKPOINT_TYPES)
    lean_dir = _run_dir(tmp_path / "lean", doc)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, lean_dir, stop_after_rounds=5)
    simulate(scenario, lean_dir)
    assert "algorithm" not in checkpoint.load_checkpoint(
        lean_dir / "checkpoints" / "seed0__local.done.safetensors", CHECKPOINT_TYPES
    )
    assert not (lean_dir / "checkpoints" / "KEEP_MODELS").exists()


def test_html_figures_share_one_plotly_js_beside_them(tmp_path):
    result = simulate(parse_scenario({**SMALL, "rounds": 1}))
    written = write_figures(tmp_path, result.trace, result.clients, image_format=None, client_rounds=result.client_rounds, target=0.5)
    assert written == [
        f"no fig3.png, fig2.png, energy.png, energy_pareto.png, timeline.png in this run directory: `wirelessfl plot {tmp_path}` draws them"
    ]
    assert (tmp_path / "plotly.min.js").read_text(encoding="utf-8") == get_plotlyjs()
    figures = ["energy.html", "energy_pareto.html", "fig2.html", "fig3.html", "timeline.html", "worst_clients.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*figures, "plotly.min.js"])
    for name in figures:
        html = (tmp_path / name).read_text(encoding="utf-8")
        assert '<script charset="utf-8" src="plotly.min.js"></script>' in html
        assert "fedavg" in html and len(html) < 200_000  # plotly.js (4.7 MB) is not embedded


def test_keep_models_and_a_full_disk_while_writing_results_through_the_cli(tmp_path, monkeypatch):
    """--keep-models through the CLI, and result writes that fail on a full disk say to resume."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(dump_scenario(parse_scenario({**SMALL, "rounds": 1})))
    run_dir = tmp_path / "run"
    calls = [0]
    real = io_module._write_fully

    def full_on_fourth_write(fd, data):  # scenario.yaml, KEEP_MODELS, the done checkpoint, then provenance.json
        calls[0] += 1
        if calls[0] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(io_module, "_write_fully", full_on_fourth_write)
    result = runner.invoke(app, ["simulate", str(scenario), "--out", str(run_dir), "--quiet", "--keep-models"])
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: cannot write {run_dir / 'provenance.json'}: no space left on device; the previous version (if any) is unchanged; "
        f"free space and run `wirelessfl simulate --resume {run_dir}`"
    )
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".")]
    assert "algorithm" in checkpoint.load_checkpoint(run_dir / "checkpoints" / "seed0__fedavg.done.safetensors", CHECKPOINT_TYPES)
    resumed = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    assert pd.read_parquet(run_dir / "trace.parquet")["round"].tolist() == [0, 1]


def _interrupted_run(tmp_path, doc=SMALL):
    """A run directory stopped after 2 rounds, with its partial checkpoint."""
    run_dir = _run_dir(tmp_path, doc)
    with pytest.raises(KeyboardInterrupt):
        simulate(parse_scenario(doc), run_dir, stop_after_rounds=2)
    return run_dir, run_dir / "checkpoints" / "seed0__fedavg.partial.safetensors"


def _only_line(result) -> str:
    """A refused resume prints its error and nothing else (no cost note before it)."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return _error(result)


def test_flipped_bytes_in_the_model_tensor_are_refused_in_one_line(tmp_path):
    run_dir, path = _interrupted_run(tmp_path)
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    largest = max((k for k in header if k not in ("__metadata__", "tree")), key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])
    start, end = header[largest]["data_offsets"]
    middle = 8 + size + (start + end) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _only_line(result) == (
        f"error: {path}: damaged checkpoint (checksum mismatch in entry '{largest}': its bytes changed after it was "
        f"written); delete it and run `wirelessfl simulate --resume {run_dir}` to retrain that unit"
    )
    path.unlink()
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0


def test_a_checkpoint_of_the_previous_format_without_checksums_is_refused():
    old = checkpoint._save_tensors(
        {"tree": torch.frombuffer(bytearray(b'{"n":1}'), dtype=torch.uint8)}, metadata={"format": checkpoint.FORMAT, "version": "1"}
    )
    assert _damaged(old) == (
        "run/checkpoints/k.done.safetensors: damaged checkpoint (written by an older wirelessfl, without the checksums "
        "this one verifies); delete it and run `wirelessfl simulate --resume run` to retrain that unit"
    )


@pytest.mark.parametrize("edit", [("lr: 0.05", "lr: 0.5"), ("rounds: 3", "rounds: 2")])
def test_resuming_after_the_run_scenario_was_edited_is_refused(tmp_path, edit):
    run_dir, path = _interrupted_run(tmp_path)
    source = run_dir / "scenario.yaml"
    text = source.read_text()
    assert edit[0] in text
    source.write_text(text.replace(edit[0], edit[1]))
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _only_line(result) == (
        f"error: {path}: written for other settings than {source} (was that file edited after the run started?); "
        "put back the scenario the run started with, or run the edited file as a new run"
    )
    source.write_text(text)
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0


def _files(run_dir):
    return {path: path.read_bytes() for path in sorted(run_dir.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("seeding", [None, "per-algorithm"])
def test_a_run_started_under_another_seeding_is_refused_and_left_as_it_was(tmp_path, seeding):
    """A run folder whose checkpoints were written before common random numbers (no seeding recorded)
    or under another scheme must not continue: its curves would mix two seedings."""
    run_dir, path = _interrupted_run(tmp_path)
    size = int.from_bytes(path.read_bytes()[:8], "little")
    stamp = json.loads(path.read_bytes()[8 : 8 + size])["__metadata__"]["fingerprint"]
    state = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES, stamp, PROVENANCE)
    checkpoint.save_checkpoint(path, state, CHECKPOINT_TYPES, stamp, None if seeding is None else {"seeding": seeding})
    before = _files(run_dir)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    made = "before its seeding was recorded (each algorithm seeded apart)" if seeding is None else "with the seeding 'per-algorithm'"
    assert _only_line(result) == (
        f"error: {run_dir}: refused to resume: {path.name} was written {made}, and this wirelessfl seeds with "
        f"'common-random-numbers' (one run would mix two seedings); start a new run: "
        f"`wirelessfl simulate {run_dir / 'scenario.yaml'} --out NEW_DIR`"
    )
    assert _files(run_dir) == before


def test_a_run_started_under_the_current_seeding_resumes_to_the_uninterrupted_trace(tmp_path):
    run_dir, path = _interrupted_run(tmp_path)
    size = int.from_bytes(path.read_bytes()[:8], "little")
    meta = json.loads(path.read_bytes()[8 : 8 + size])["__metadata__"]
    assert json.loads(meta["provenance"]) == {"seeding": "common-random-numbers"}
    resumed = simulate(parse_scenario(SMALL), run_dir)
    assert resumed.trained_units == 1
    pd.testing.assert_frame_equal(resumed.trace, simulate(parse_scenario(SMALL)).trace)


def test_provenance_is_checked_before_the_fingerprint():
    data = checkpoint.dumps({"n": 1}, fingerprint="a", provenance={"seeding": "x"})
    assert checkpoint.loads(data, "k", fingerprint="a", provenance={"seeding": "x"}) == {"n": 1}
    with pytest.raises(checkpoint.ProvenanceMismatch) as caught:
        checkpoint.loads(data, "k", fingerprint="b", provenance={"seeding": "y"})
    assert (caught.value.name, caught.value.found) == ("seeding", "x")
    with pytest.raises(checkpoint.ProvenanceMismatch) as missing:
        checkpoint.loads(checkpoint.dumps({"n": 1}), "k", provenance={"seeding": "y"})
    assert missing.value.found is None


def test_settings_that_cannot_change_training_may_be_edited_before_a_resume(tmp_path):
    run_dir, _ = _interrupted_run(tmp_path)
    source = run_dir / "scenario.yaml"
    source.write_text(source.read_text().replace("target_accuracy: 0.8", "target_accuracy: 0.5"))
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0


def test_a_file_where_the_checkpoint_folder_belongs_is_one_line(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "checkpoints").rmdir()
    (run_dir / "checkpoints").write_text("not a folder")
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _only_line(result) == (
        f"error: {run_dir / 'checkpoints'}: a file, not the run's checkpoint folder; move it away "
        "(the run then retrains from round 0)"
    )


@pytest.mark.parametrize("target", ["fifo", "outside"])
def test_a_checkpoint_that_is_a_symlink_is_refused_without_reading_it(tmp_path, target):
    run_dir = _run_dir(tmp_path)
    if target == "fifo":
        pointee = tmp_path / "pipe"
        os.mkfifo(pointee)  # opening it to read would block forever
    else:
        _, real = _interrupted_run(tmp_path / "other")
        pointee = real
    path = run_dir / "checkpoints" / "seed0__fedavg.partial.safetensors"
    path.symlink_to(pointee)
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _only_line(result) == (
        f"error: {path}: refused: a symbolic link (a checkpoint must be a regular file inside the run folder); "
        "delete it to retrain that unit"
    )


def test_a_fifo_in_the_checkpoint_folder_is_refused(tmp_path):
    run_dir = _run_dir(tmp_path)
    path = run_dir / "checkpoints" / "seed0__fedavg.done.safetensors"
    os.mkfifo(path)
    with pytest.raises(checkpoint.CheckpointError, match="refused: not a regular file"):
        simulate(parse_scenario(SMALL), run_dir)


def test_a_run_that_gains_a_curve_and_a_seed_resumes_without_retraining_its_finished_units(tmp_path):
    """Each unit is stamped with its own settings (run.keys.unit_fingerprint), and common random numbers make
    its trace independent of the other curves and seeds: adding `local` and seed 1 to a finished run's
    scenario.yaml trains only the three new units, and the trace is the one a fresh run of the larger
    scenario gives."""
    run_dir = _run_dir(tmp_path)
    assert simulate(parse_scenario(SMALL), run_dir).trained_units == 1
    larger = {**SMALL, "seeds": [0, 1], "algorithms": [{"name": "fedavg"}, {"name": "local"}]}
    (run_dir / "scenario.yaml").write_text(dump_scenario(parse_scenario(larger)))
    assert runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"]).exit_code == 0
    resumed = simulate(parse_scenario(larger), run_dir)
    assert resumed.trained_units == 0
    pd.testing.assert_frame_equal(resumed.trace, simulate(parse_scenario(larger)).trace)
    # and a unit whose own settings change is still refused
    edited = {**larger, "algorithms": [{"name": "fedavg"}, {"name": "local", "training": {"lr": 0.5}}]}
    (run_dir / "scenario.yaml").write_text(dump_scenario(parse_scenario(edited)))
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert _only_line(result).startswith(f"error: {run_dir / 'checkpoints' / 'seed0__local.done.safetensors'}: written for")


def test_checkpoints_stamped_for_the_whole_scenario_resume_while_it_is_unchanged(tmp_path):
    """Checkpoints written before units had their own stamp carry the scenario's fingerprint: still read while
    the scenario is the one they were written for (and re-stamped for their unit then), refused once it changed."""
    run_dir, path = _interrupted_run(tmp_path)
    scenario = parse_scenario(SMALL)
    state = checkpoint.load_checkpoint(path, CHECKPOINT_TYPES)
    checkpoint.save_checkpoint(path, state, CHECKPOINT_TYPES, scenario_fingerprint(scenario), PROVENANCE)
    done = run_dir / "checkpoints" / "seed0__fedavg.done.safetensors"
    resumed = simulate(scenario, run_dir)
    assert resumed.trained_units == 1
    pd.testing.assert_frame_equal(resumed.trace, simulate(scenario).trace)
    # a finished unit's file stamped for the whole scenario is re-stamped for its unit when a resume reads it
    done_state = checkpoint.load_checkpoint(done, CHECKPOINT_TYPES)
    checkpoint.save_checkpoint(done, done_state, CHECKPOINT_TYPES, scenario_fingerprint(scenario), PROVENANCE)
    assert simulate(scenario, run_dir).trained_units == 0
    assert checkpoint.fingerprint_of(done) == build_units(scenario, 0)[0].fingerprint != scenario_fingerprint(scenario)
    check_checkpoints(parse_scenario({**SMALL, "seeds": [0, 1]}), run_dir)  # so the run may now gain a seed
    checkpoint.save_checkpoint(path, state, CHECKPOINT_TYPES, scenario_fingerprint(scenario), PROVENANCE)
    with pytest.raises(checkpoint.CheckpointError, match="written for other settings"):
        check_checkpoints(parse_scenario({**SMALL, "seeds": [0, 1]}), run_dir)


def test_check_checkpoints_says_how_far_each_unit_got(tmp_path):
    """Units run in order: with 3 rounds each, stopping in the 5th trained round (before its checkpoint)
    leaves seed 0's fedavg done, seed 0's local checkpointed at round 1 and seed 1 untouched; the resume's
    cost preview and progress bar count from these."""
    doc = {**SMALL, "seeds": [0, 1], "algorithms": [{"name": "fedavg"}, {"name": "local"}]}
    run_dir = _run_dir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        simulate(parse_scenario(doc), run_dir, stop_after_rounds=5)
    assert check_checkpoints(parse_scenario(doc), run_dir) == {"seed0__fedavg": 3, "seed0__local": 1}
    assert check_checkpoints(parse_scenario(doc), tmp_path / "never-ran") == {}


def test_a_resumed_unit_keeps_the_phase_times_of_the_rounds_before_its_kill(tmp_path):
    """runtime.json's phases split a unit's wall time: a unit killed after its round-4 checkpoint and resumed
    must still account for rounds 1-4 (they were charged only when run() returned, so a kill lost them and
    a resumed unit's phases covered its last rounds alone). Phases include round 0 and the checkpoints, so
    they add up to at least wall_s, for the trainer and for FedAvg+ that follows it."""
    doc = {**SMALL, "rounds": 6, "checkpoint_every": 2, "algorithms": [{"name": "fedavg"}, {"name": "fedavg_ft"}]}
    run_dir = _run_dir(tmp_path, doc)
    with pytest.raises(KeyboardInterrupt):
        simulate(parse_scenario(doc), run_dir, stop_after_rounds=5)
    resumed = simulate(parse_scenario(doc), run_dir)
    assert set(resumed.runtime) == {"seed0__fedavg", "seed0__fedavg_ft"}
    for key, unit in resumed.runtime.items():
        assert sum(unit["phases"].values()) >= unit["wall_s"] > 0, (key, unit)
    assert resumed.runtime["seed0__fedavg"]["phases"]["local training"] > 0


def test_serialising_holds_one_copy_of_the_file_at_a_time():
    """``dumps`` serialises twice (the digests of the first pass go into the second): the first pass's bytes are
    hashed in place and freed before the second, so Python holds one file's bytes at a time, not three (the first,
    a slice of it, the second: 6.3 GB for a 2.1 GB checkpoint of 100,000 FedPer heads)."""
    import tracemalloc

    from wirelessfl.checkpoint import dumps

    state = {"rows": torch.ones(1_000_000)}  # 4 MB
    tracemalloc.start()
    try:
        data = dumps(state)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) > 4_000_000 and peak < 1.5 * len(data)
