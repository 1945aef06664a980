"""Sweeps: grid expansion and validation, train once / time many, executors, cache, resume, failures."""

from __future__ import annotations

import fcntl
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
import wirelessfl.simulate
from wirelessfl.cli import app
from wirelessfl.config import dump_scenario, parse_scenario
from wirelessfl.sweep import merge_grids, plan_sweep
from wirelessfl.sweep.run import profile_labels

runner = CliRunner()

TINY = {
    "name": "tiny",
    "rounds": 3,
    "checkpoint_every": 1,
    "target_accuracy": 0.1,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 4,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "wired"}],
}
LR_GRID = {"training.lr": [0.05, 0.1], "rho": [1, 4]}


def _write(tmp_path, doc, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "local"
    return wirelessfl.sweep(TINY, LR_GRID, out=out, executor="local")


def test_grid_expansion_network_points_are_profiles_of_one_unit_per_learning_point():
    base = parse_scenario({**TINY, "algorithms": [{"name": "fedavg"}, {"name": "ucfl", "params": {"streams": 2}}]})
    plan = plan_sweep(base, {"rho": [1, 2], "mu": [1, "inf"], "algorithms.ucfl.streams": [1, "m"], "training.lr": [0.05, 0.1]})
    assert [u.label for u in plan.units] == ["training.lr=0.05", "training.lr=0.1"]
    assert [u.scenario.training.lr for u in plan.units] == [0.05, 0.1]
    assert [p.name for p in plan.profiles] == ["wired rho=1 mu=1", "wired rho=1 mu=inf", "wired rho=2 mu=1", "wired rho=2 mu=inf"]
    profiles = plan.units[0].scenario.profiles()
    assert [(p.rho, p.mu) for p in profiles] == [(1.0, 1.0), (1.0, math.inf), (2.0, 1.0), (2.0, math.inf)]
    ucfl = plan.units[0].scenario.algorithms[1]
    assert ucfl.params == {} and ucfl.variants == {"streams": [1, "m"]}
    assert plan.curve_axes(plan.units[0]) == {
        "fedavg": (),
        "ucfl streams=1": (("algorithms.ucfl.streams", 1),),
        "ucfl streams=m": (("algorithms.ucfl.streams", "m"),),
    }
    assert plan.units[0].key != plan.units[1].key and len(plan.units[0].key) == 16


def test_physical_axis_turns_on_the_channel_and_cli_grids_override_the_file():
    plan = plan_sweep(parse_scenario(TINY), {"physical.cell_radius_m": [100, 500]})
    assert [p.physical.cell_radius_m for p in plan.units[0].scenario.profiles()] == [100.0, 500.0]
    assert [p.time_unit for p in plan.profiles] == ["s", "s"]
    grid = merge_grids({"rho": [1, 2], "mu": [1]}, ["rho=4,8", "algorithms.ucfl.streams=1,m,auto", "training.lr=1e-3"])
    assert grid == {"rho": [4, 8], "mu": [1], "algorithms.ucfl.streams": [1, "m", "auto"], "training.lr": [0.001]}


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (["rho=-1"], "--grid rho=-1: rho must be > 0, got -1.0"),
        (
            ["foo=1"],
            "--grid foo: unknown sweep axis; use a network field (rho, mu, ...), physical.<field>, energy.<field>, "
            "or a scenario path such as training.lr or algorithms.ucfl.streams",
        ),
        (["rho"], "--grid rho: expected KEY=V1,V2,..., e.g. rho=1,2,4"),
        (["rho=1,2,1"], "--grid rho: give each value once; repeated: 1"),
        (["channels=0"], "--grid channels=0: channels must be an integer >= 1, got 0"),
        (["training.lr=-1"], "--grid training.lr=-1: training.lr: Input should be greater than 0 (got -1)"),
        (["schedule=fast"], "--grid schedule=fast: schedule must be one of 'phased', 'pipelined', got 'fast'"),
        (
            ["physical.cell_radius_m=5"],
            "--grid physical.cell_radius_m=5: physical.cell_radius_m must be > physical.min_distance_m (10.0), got 5.0",
        ),
        (["algorithms.ucfl.streams=1,2"], "--grid algorithms.ucfl.streams: no algorithm entry named 'ucfl' (by label or name); entries: fedavg, local"),
        (["data.partition.5.alpha=1"], "--grid data.partition.5.alpha=1: data.partition.5 must be a list index from 0 to 1"),
    ],
)
def test_a_bad_grid_is_one_line_naming_key_and_value_exit_2(tmp_path, grid, message):
    args = ["sweep", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "out"), "--quiet"]
    result = runner.invoke(app, args + [f"--grid={g}" for g in grid])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {message}"
    assert not (tmp_path / "out").exists()


def test_a_bad_algorithm_value_fails_before_training_naming_the_axis(tmp_path):
    doc = {**TINY, "algorithms": [{"name": "ucfl"}]}
    result = runner.invoke(app, ["sweep", str(_write(tmp_path, doc)), "--grid", "algorithms.ucfl.streams=2,-1", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: --grid algorithms.ucfl.streams=2,-1: algorithms[0].variants.streams: must be a positive int, 'm', 'all' or "
        "'auto', got -1"
    )


def test_network_grid_trains_once_and_each_cell_equals_a_plain_simulate(tmp_path):
    grid = {"rho": [1, 2], "mu": [1, "inf"]}
    # both curves start from the same model (25%); local reaches 27% at round 1, fedavg never
    doc = {**TINY, "target_accuracy": 0.27}
    swept = wirelessfl.sweep(doc, grid, out=tmp_path / "sw")
    assert swept.trained_units == 2  # fedavg and local, once each, for 4 network points
    assert len(swept.table) == 4 * 2 and set(swept.table.status) == {"ok"}
    name = "wired rho=2 mu=1"
    plain = wirelessfl.simulate({**doc, "networks": [{"preset": "wired", "rho": 2, "mu": 1, "name": name}]})
    cell = swept.trace[swept.trace.profile == name][list(plain.trace.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(cell, plain.trace)
    for curve, rows in plain.trace.groupby("curve"):
        row = swept.table[(swept.table.profile == name) & (swept.table.curve == curve)].iloc[0]
        hit = rows[rows.avg_acc >= doc["target_accuracy"]]
        assert row.point == "rho=2 mu=1" and row.rho == 2 and row.mu == 1.0 and row.base_profile == "wired"
        assert row.final_avg_acc == rows.avg_acc.iloc[-1] and row.final_worst_acc == rows.worst_acc.iloc[-1]
        assert row.total_time == rows.time.iloc[-1] and row.dl_bits == rows.dl_bits.sum()
        if len(hit):
            assert (row.time_to_target, row.rounds_to_target) == (hit.time.iloc[0], hit["round"].iloc[0])
        else:
            assert math.isnan(row.time_to_target)
    assert swept.table.time_to_target.notna().any() and swept.table.time_to_target.isna().any()
    assert swept.table[swept.table.profile == "wired rho=1 mu=inf"].mu.tolist() == [math.inf, math.inf]


def test_table_columns_follow_the_contract(local_sweep):
    table = local_sweep.table
    assert list(table.columns) == [
        "point", "training.lr", "rho", "base_profile", "profile", "curve", "algorithm", "variant", "seed", "status",
        "error", "target", "time_to_target", "time_unit", "rounds_to_target", "final_avg_acc", "final_worst_acc",
        "final_p10_acc", "dl_bits", "ul_bits", "total_time", "energy_to_target", "worst_device_energy_to_target",
        "total_energy",
    ]
    assert len(table) == 2 * 2 * 2
    assert table.point.tolist()[:2] == ["training.lr=0.05 rho=1"] * 2
    on_disk = pd.read_parquet(local_sweep.dir / "sweep.parquet")
    pd.testing.assert_frame_equal(on_disk, table, check_dtype=False)
    assert (local_sweep.dir / "sweep.csv").is_file() and (local_sweep.dir / "summary.md").is_file()
    assert {"point", "training.lr", "rho", "base_profile", "unit"} <= set(pd.read_parquet(local_sweep.dir / "trace.parquet").columns)


def test_a_second_run_recomputes_nothing_and_a_grown_grid_only_the_new_unit(local_sweep, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(local_sweep.dir, copy)
    again = wirelessfl.sweep(TINY, LR_GRID, out=copy)
    assert again.computed == [] and again.trained_units == 0
    pd.testing.assert_frame_equal(again.table, local_sweep.table)
    grown = wirelessfl.sweep(TINY, {**LR_GRID, "training.lr": [0.05, 0.1, 0.2]}, out=copy)
    assert len(grown.computed) == 1 and grown.trained_units == 2
    assert len(grown.table) == 3 * 2 * 2


def test_ray_executor_gives_the_local_table(local_sweep, tmp_path, local_ray):
    remote = wirelessfl.sweep(TINY, LR_GRID, out=tmp_path / "ray", executor="ray")
    assert len(remote.computed) == 2
    pd.testing.assert_frame_equal(remote.table, local_sweep.table)


def test_ray_missing_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = runner.invoke(app, ["sweep", str(_write(tmp_path, TINY)), "--grid", "rho=1,2", "--executor", "ray", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == 'error: --executor ray: Ray is not installed; pip install -e ".[ray]"'


def test_an_interrupted_sweep_resumes_to_the_same_table(local_sweep, tmp_path, monkeypatch):
    original = wirelessfl.simulate.simulate

    def killed_mid_unit(scenario, run_dir=None, **kwargs):
        return original(scenario, run_dir, stop_after_rounds=5, **kwargs)

    monkeypatch.setattr(wirelessfl.simulate, "simulate", killed_mid_unit)
    out = tmp_path / "sw"
    args = ["sweep", str(_write(tmp_path, TINY)), "--out", str(out), "--executor", "local", "--quiet"]
    first = runner.invoke(app, args + ["--grid", "training.lr=0.05,0.1", "--grid", "rho=1,4"])
    assert first.exit_code == 130
    assert first.output.strip() == f"error: interrupted; `wirelessfl sweep --resume {out}` continues (finished units are kept)"
    unit = next((out / "units").iterdir())
    assert not (unit / "trace.parquet").exists() and list((unit / "checkpoints").glob("*.partial.*"))
    monkeypatch.setattr(wirelessfl.simulate, "simulate", original)
    resumed = runner.invoke(app, ["sweep", "--resume", str(out), "--executor", "local", "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    table = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(table, pd.read_parquet(local_sweep.dir / "sweep.parquet"))


def test_a_failing_unit_is_retried_once_then_reported(tmp_path, monkeypatch):
    original = wirelessfl.simulate.simulate
    calls = {0.05: 0, 0.1: 0}

    def flaky(scenario, run_dir=None, **kwargs):
        lr = scenario.training.lr
        calls[lr] += 1
        if lr == 0.1 or calls[lr] == 1:
            raise RuntimeError(f"boom {calls[lr]}")
        return original(scenario, run_dir, **kwargs)

    monkeypatch.setattr(wirelessfl.simulate, "simulate", flaky)
    out = tmp_path / "sw"
    result = runner.invoke(
        app, ["sweep", str(_write(tmp_path, TINY)), "--grid", "training.lr=0.05,0.1", "--out", str(out), "--executor", "local", "--quiet"]
    )
    assert result.exit_code == 1
    assert calls == {0.05: 2, 0.1: 2}
    key = plan_sweep(parse_scenario(TINY), {"training.lr": [0.05, 0.1]}).units[1].key
    assert result.output.strip().splitlines()[-1] == (
        f"error: 1 of 2 units failed: training.lr=0.1 (units/{key}); see {out / 'summary.md'}"
    )
    table = pd.read_csv(out / "sweep.csv", keep_default_na=False, na_values={"time_to_target": [""], "final_avg_acc": [""]})
    failed = table[table["training.lr"] == 0.1]
    assert len(failed) == 2 and set(failed.status) == {"failed"} and set(failed.error) == {"RuntimeError: boom 2"}
    assert failed.final_avg_acc.isna().all()
    assert set(table[table["training.lr"] == 0.05].status) == {"ok"}
    assert f"- training.lr=0.1 (units/{key}), after 2 attempts: RuntimeError: boom 2" in (out / "summary.md").read_text()


def _copy(local_sweep, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(local_sweep.dir, copy)
    return copy


def test_an_out_holding_another_sweep_is_refused_and_the_same_sweep_is_reused(local_sweep, tmp_path):
    copy = _copy(local_sweep, tmp_path)
    before = (copy / "sweep.csv").read_bytes()
    path = _write(tmp_path, TINY)
    base = ["sweep", str(path), "--out", str(copy), "--executor", "local", "--quiet"]
    grid = ["--grid", "training.lr=0.05,0.1", "--grid", "rho=1,4"]
    refusal = f"; choose a new folder, or `wirelessfl sweep --resume {copy}` to finish that sweep"
    for extra, differing in [
        (["--rounds", "2"], "rounds"),  # another scenario
        (["--grid", "training.lr=0.05", "--grid", "rho=1,4"], "sweep"),  # a value dropped: its units would be orphaned
        (["--grid", "rho=1,4", "--grid", "training.lr=0.05,0.1"], "sweep"),  # axes reordered
    ]:
        result = runner.invoke(app, base + (extra if extra[0] == "--grid" else grid + extra))
        assert result.exit_code == 2, result.output
        assert result.output.strip() == (
            f"error: --out {copy}: holds a sweep of another scenario or grid (its sweep.yaml differs in {differing}){refusal}"
        )
        assert (copy / "sweep.csv").read_bytes() == before
    other = _write(tmp_path, {**TINY, "name": "other"}, "other.yaml")
    result = runner.invoke(app, ["sweep", str(other), "--out", str(copy), *grid, "--quiet"])
    assert result.output.strip() == f"error: --out {copy}: holds a sweep of another scenario or grid (its sweep.yaml differs in name){refusal}"
    same = runner.invoke(app, base + grid)
    assert same.exit_code == 0, same.output
    assert same.output.startswith("sweep: 2 of 2 units ok (0 run now, 0 training runs)")
    pd.testing.assert_frame_equal(pd.read_parquet(copy / "sweep.parquet"), local_sweep.table)


def test_rounds_and_seed_override_the_scenario_are_recorded_and_refused_with_resume(tmp_path):
    out = tmp_path / "sw"
    args = ["sweep", str(_write(tmp_path, TINY)), "--grid", "rho=1,4", "--out", str(out), "--rounds", "2", "--seed", "7", "--quiet"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((out / "sweep.yaml").read_text())
    assert (saved["rounds"], saved["seeds"]) == (2, [7])
    assert set(pd.read_parquet(out / "sweep.parquet").seed) == {7}
    assert pd.read_parquet(out / "trace.parquet")["round"].max() == 2
    again = runner.invoke(app, ["sweep", "--resume", str(out), "--rounds", "3", "--seed", "1", "--quiet"])
    assert again.exit_code == 2
    assert again.output.strip() == (
        f"error: --resume continues {out} with the scenario and grid in its sweep.yaml; leave out --rounds, --seed"
    )


def test_without_a_terminal_each_finished_unit_is_a_line(tmp_path):
    out = tmp_path / "sw"
    args = ["sweep", str(_write(tmp_path, TINY)), "--grid", "training.lr=0.05,0.1", "--out", str(out), "--executor", "local"]
    result = runner.invoke(app, args)  # CliRunner's stderr is not a terminal
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("unit ")]
    assert len(lines) == 2
    assert re.fullmatch(r"unit 1/2 done: training\.lr=0\.05 \(\d+\.\d s\)", lines[0]), lines
    assert re.fullmatch(r"unit 2/2 done: training\.lr=0\.1 \(\d+\.\d s\)", lines[1]), lines


def test_plot_and_report_on_a_sweep_remake_its_maps_table_and_summary(local_sweep, tmp_path):
    copy = _copy(local_sweep, tmp_path)
    (copy / "time_to_target.html").unlink()
    plotted = runner.invoke(app, ["plot", str(copy)])
    assert plotted.exit_code == 0, plotted.output
    assert (copy / "time_to_target.html").is_file() and str(copy / "time_to_target.html") in plotted.output.splitlines()
    reported = runner.invoke(app, ["report", str(copy), "--target", "0.99"])
    assert reported.exit_code == 0, reported.output
    assert reported.output.splitlines()[0] == (
        f"rewrote {copy / 'summary.md'}, sweep.csv, sweep.parquet and the trade-off maps with --target 0.99"
    )
    assert "## Fastest curve per cell (time to 99% average accuracy," in (copy / "summary.md").read_text()
    table = pd.read_parquet(copy / "sweep.parquet")
    assert set(table.target) == {0.99} and table.time_to_target.isna().all()
    back = runner.invoke(app, ["report", str(copy)])
    assert back.exit_code == 0 and back.output.splitlines()[0].startswith(f"rewrote {copy / 'summary.md'}, sweep.csv")
    pd.testing.assert_frame_equal(pd.read_parquet(copy / "sweep.parquet"), local_sweep.table)


def test_a_sweep_folder_that_kept_only_its_table_is_reported_from_it(local_sweep, tmp_path):
    """As the committed examples keep it: sweep.yaml and sweep.csv. The summary and the maps come from the
    table, each row's unit told by its training.lr, the same as from the units; the table stays as it was."""
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in ("sweep.yaml", "sweep.csv"):
        shutil.copy(local_sweep.dir / name, kept / name)
    table = (kept / "sweep.csv").read_bytes()
    result = runner.invoke(app, ["report", str(kept)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"wrote {kept / 'summary.md'} (from its sweep.csv) and the trade-off maps"
    summary, full = (kept / "summary.md").read_text().splitlines(), (local_sweep.dir / "summary.md").read_text().splitlines()
    assert summary[2].startswith("2 units (2 finished, 0 failed), summarised from sweep.csv (the units' traces are not in this folder);")
    failed = full.index("## Failed units")  # the notes after it say how PNG export went, which differs by caller
    assert summary[3:failed] == full[3:failed] and " training.lr=0.1 |" in "\n".join(summary)
    assert (kept / "time_to_target.html").is_file() and (kept / "sweep.csv").read_bytes() == table
    refused = runner.invoke(app, ["report", str(kept), "--target", "0.5"])
    assert refused.exit_code == 2
    assert refused.output.strip() == f"error: --target: {kept} kept only its table (no units/ folder); another target needs the units' traces"


def test_panels_of_several_networks_entries_are_titled_by_what_the_grid_leaves_them():
    base = parse_scenario({**TINY, "networks": [{"preset": "wired"}, {"preset": "slow-ul-unreliable"}]})
    assert profile_labels(plan_sweep(base, {"rho": [1, 4]})) == {"wired": "wired: mu=inf", "slow-ul-unreliable": "slow-ul-unreliable: mu=1"}
    both = profile_labels(plan_sweep(base, {"rho": [1, 4], "mu": [1, "inf"]}))
    assert both == {"wired": "wired: rho, mu set by the grid", "slow-ul-unreliable": "slow-ul-unreliable: rho, mu set by the grid"}
    assert profile_labels(plan_sweep(parse_scenario(TINY), {"rho": [1, 4]})) == {}


def test_a_grid_too_large_is_refused_from_its_size_at_once(tmp_path):
    path = str(_write(tmp_path, TINY))
    thousand = ",".join(str(v) for v in range(1, 1001))
    result = runner.invoke(app, ["sweep", path, "--grid", f"rho={thousand}", "--grid", f"mu={thousand}", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: grid too large: rho (1000 values) x mu (1000 values) = 1,000,000 points; at most 1,000 points"
    fifty = ",".join(str(v) for v in range(1, 51))
    result = runner.invoke(app, ["sweep", path, "--grid", f"rho={fifty}", "--grid", "mu=1,inf,2", "--quiet"])
    assert result.output.strip() == (
        "error: grid too large: rho (50 values) x mu (3 values) x 1 base profile (networks:) = 150 network profiles per unit; at most 100"
    )
    digits = "1" * 5000
    result = runner.invoke(app, ["sweep", path, f"--grid=rho={digits}", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --grid rho={digits[:53]}...: a value has more digits than a number may have here (at most 4300)"


def test_a_unit_claimed_by_another_process_is_not_run_twice(tmp_path, monkeypatch):
    plan = plan_sweep(parse_scenario(TINY), {"training.lr": [0.05, 0.1]})
    held = tmp_path / "sw" / "units" / plan.units[0].key
    held.mkdir(parents=True)
    (tmp_path / "sw" / "sweep.yaml").write_text(dump_scenario(plan.base))  # as a running `sweep --resume` has it
    ran = []
    original = wirelessfl.simulate.simulate

    def counted(scenario, run_dir=None, **kwargs):
        ran.append(scenario.training.lr)
        return original(scenario, run_dir, **kwargs)

    monkeypatch.setattr(wirelessfl.simulate, "simulate", counted)
    with open(held / "unit.lock", "w") as handle:  # what a live worker holds while it runs the unit
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.write("4242")
        handle.flush()
        busy = wirelessfl.sweep(TINY, {"training.lr": [0.05, 0.1]}, out=tmp_path / "sw")
    assert ran == [0.1]
    assert busy.outcomes[plan.units[0].key].status == "failed" and not (held / "trace.parquet").exists()
    assert busy.outcomes[plan.units[0].key].error == (
        f"UnitBusy: units/{plan.units[0].key} is being run by another process (pid 4242), which holds its unit.lock; "
        "run `wirelessfl sweep --resume` on the sweep after that process has ended"
    )
    after = wirelessfl.sweep(TINY, {"training.lr": [0.05, 0.1]}, out=tmp_path / "sw")  # the holder has ended: its lock is gone
    assert after.computed == [plan.units[0].key] and ran == [0.1, 0.05]


@pytest.mark.parametrize("signum", [signal.SIGKILL, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])  # each ~3.5 s of CPU
def test_pool_workers_die_with_a_killed_sweep_and_release_their_units(tmp_path, signum):
    out = tmp_path / "sw"
    path = _write(tmp_path, {**TINY, "rounds": 100_000, "checkpoint_every": 1000})
    args = [sys.executable, "-m", "wirelessfl", "sweep", str(path), "--grid", "training.lr=0.05,0.1", "--out", str(out)]
    # one worker: die_with_parent is each worker's own initializer, so one proves it (a second only doubles the imports)
    sweep = subprocess.Popen([*args, "--executor", "process", "--workers", "1", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        locks = []
        for _ in range(3000):  # until the worker holds its unit (a spawn worker imports torch first; minutes on a loaded machine)
            locks = [p for p in out.glob("units/*/unit.lock") if p.read_text().strip().isdigit()]
            if len(locks) == 1 or sweep.poll() is not None:
                break
            time.sleep(0.1)
        assert len(locks) == 1, sweep.stderr.read().decode() if sweep.poll() is not None else "the workers did not start"
        family = psutil.Process(sweep.pid).children(recursive=True)
        assert {int(p.read_text()) for p in locks} <= {child.pid for child in family}
        os.kill(sweep.pid, signum)
        sweep.wait(timeout=10)
        _, alive = psutil.wait_procs(family, timeout=10)
        assert alive == [], f"still running after the sweep was killed: {[(p.pid, p.name()) for p in alive]}"
    finally:
        if sweep.poll() is None:
            sweep.kill()
    for lock in locks:  # released with the dead workers: a --resume can claim the units at once
        with open(lock) as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def tiny_cnn(input_shape, num_classes):
    """A user's model factory, passed to the Python API as a function."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(input_shape[0], 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 8 * 8, num_classes))


def test_the_python_api_takes_a_model_factory():
    result = wirelessfl.simulate({**TINY, "rounds": 1, "networks": [{"preset": "wired"}]}, model=tiny_cnn)
    assert set(result.trace["algorithm"]) >= {"fedavg"} and result.trace["avg_acc"].between(0, 1).all()
    with pytest.raises(ValueError, match=r"^model: a factory passed to the Python API must be importable by name"):
        wirelessfl.simulate(TINY, model=lambda shape, classes: tiny_cnn(shape, classes))


def test_summary_names_ties_and_shows_oracle_beside_the_contest(tmp_path):
    """Two seeds, target 8%: every curve of a seed starts from the same model (25%, 8.3%), so all reach it at time 0 on both
    seeds. The best curve ties with the runner-up (equal times seed by seed), and Oracle, though as fast, is beside."""
    doc = {**TINY, "seeds": [0, 1], "target_accuracy": 0.08, "algorithms": [{"name": "oracle"}, {"name": "fedavg"}, {"name": "local"}]}
    swept = wirelessfl.sweep(doc, {"rho": [1, 2]}, out=tmp_path / "sw")
    summary = (swept.dir / "summary.md").read_text()
    assert "mean over seeds ± 95% t-interval; NaN unless every seed reached it" in summary
    header = "| point | base profile | best curve | time to target | tie with | runner-up - best, seed by seed | final avg acc |"
    assert header + " final worst acc | beside (reference) |" in summary
    rows = [line.split(" | ") for line in summary.splitlines() if line.startswith("| rho=")]
    assert len(rows) == 2
    for row in rows:
        assert row[2] in ("fedavg", "local") and row[3] == "0.0 ± 0.0 T_dl"
        assert row[4] == ({"fedavg", "local"} - {row[2]}).pop() and row[5] == f"{row[4]}: +0.0 ± 0.0"
        assert row[-1] == "oracle: 0.0 ± 0.0 T_dl |"


def test_each_curves_parameter_values_are_columns_of_the_table():
    """``params.<key>`` per parameter any curve sets, typed as the grid's axis columns, empty where a curve sets none."""
    from wirelessfl.sweep.run import _param_columns

    columns = _param_columns([{"streams": 2, "temperature": 0.1}, {}, {"streams": "m"}, {"temperature": 1}])
    assert list(columns.columns) == ["params.streams", "params.temperature"]
    assert columns["params.streams"].tolist() == ["2", None, "m", None]
    assert columns["params.temperature"].tolist()[0::3] == [0.1, 1.0] and columns["params.temperature"][1:3].isna().all()
    assert str(_param_columns([{"streams": 2}, {"streams": 4}])["params.streams"].dtype) == "Int64"
