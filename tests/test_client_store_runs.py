"""Runs with per-client state on disk: the same files as in RAM, exact resumption, the estimate and bad input."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl import cost
from wirelessfl.checkpoint import load_checkpoint
from wirelessfl.cli import app
from wirelessfl.config import parse_scenario, scenario_fingerprint
from wirelessfl.learning import client_store
from wirelessfl.learning.data.federated import build_federated_data
from wirelessfl.learning.data.guard import MEMORY_FRACTION
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES
from wirelessfl.simulate import simulate


# participation 0.5: each round writes some clients' rows and leaves the others at their initial value
DOC = {
    "name": "store",
    "rounds": 3,
    "checkpoint_every": 1,
    "device": "cpu",
    "evaluation": {"clients": 4},
    "data": {"dataset": "digits", "clients": 8, "samples": {"per_client": 12}, "partition": [{"name": "iid"}]},
    "model": {"name": "mlp", "options": {"hidden": [8]}},
    "training": {"batch_size": 6, "lr": 0.05, "participation": 0.5, "keep_optimizer_state": True},
    "algorithms": [{"name": "local"}, {"name": "fedper"}, {"name": "fedavg"}],
}
TABLES = ("trace.parquet", "clients.parquet", "client_rounds.parquet")


@pytest.fixture
def made(monkeypatch):
    """The kinds of store each run made, by name."""
    seen: list[tuple[str, str]] = []
    new = client_store.ClientStores.new

    def spy(self, name, rows, default):
        store = new(self, name, rows, default)
        seen.append((store.name, store.where))
        return store

    monkeypatch.setattr(client_store.ClientStores, "new", spy)
    return seen


def test_a_run_with_its_client_state_on_disk_has_the_same_tables_as_in_memory(made):
    scenario = parse_scenario(DOC)
    memory = simulate(scenario, client_store="memory")
    assert {where for _, where in made} == {"memory"}
    made.clear()
    disk = simulate(scenario, client_store="disk")
    assert sorted(made) == [("heads", "disk"), ("models", "disk"), *[("optimizer", "disk")] * 3]
    for table in ("trace", "clients", "client_rounds"):
        pd.testing.assert_frame_equal(getattr(memory, table), getattr(disk, table), check_exact=True)


PERSONAL = {
    "ditto": ({}, ["optimizer", "optimizer-2", "personal"]),
    "pfedme": ({"inner_steps": 2}, ["personal"]),
    "apfl": ({"adaptive_alpha": True}, ["optimizer", "personal"]),
    "pflego": ({"tau": 3}, ["heads"]),
}


@pytest.mark.parametrize("name", sorted(PERSONAL))
def test_personal_models_and_heads_on_disk_give_the_same_tables_as_in_memory(name, made):
    """A held-out client (read as the global model beside the stored rows) and sampled rounds, then a full one."""
    params, stores = PERSONAL[name]
    doc = {**DOC, "rounds": 2, "training": {**DOC["training"], "unseen_fraction": 0.25}, "algorithms": [{"name": name, "params": params}]}
    scenario = parse_scenario(doc)
    memory = simulate(scenario, client_store="memory")
    made.clear()
    disk = simulate(scenario, client_store="disk")
    assert sorted(made) == [(store, "disk") for store in stores]
    for table in ("trace", "clients", "client_rounds"):
        pd.testing.assert_frame_equal(getattr(memory, table), getattr(disk, table), check_exact=True)


@pytest.mark.slow
def test_a_run_with_its_client_state_on_disk_writes_the_same_files_as_in_memory(tmp_path, made):
    wirelessfl.simulate(DOC, out=tmp_path / "memory", client_store={"where": "memory"})
    assert {where for _, where in made} == {"memory"}
    made.clear()
    wirelessfl.simulate(DOC, out=tmp_path / "disk", client_store={"where": "disk"})
    # Local's models, FedPer's heads, and momentum kept for all three (the preflight's units, then the run's)
    assert {name for name, where in made if where == "disk"} == {"models", "heads", "optimizer"} and {w for _, w in made} == {"disk"}
    for table in TABLES:
        assert filecmp.cmp(tmp_path / "memory" / table, tmp_path / "disk" / table, shallow=False), table
    assert not (tmp_path / "disk" / "store").exists()  # finished units leave no store files behind


def test_a_disk_run_interrupted_after_a_checkpoint_resumes_to_the_uninterrupted_trace(tmp_path):
    doc = {**DOC, "rounds": 4, "checkpoint_every": 2, "algorithms": [{"name": "local"}]}
    scenario = parse_scenario(doc)
    whole = simulate(scenario, client_store="disk")
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir, stop_after_rounds=3, client_store="disk")  # round 3 wrote its rows in place
    partial = load_checkpoint(run_dir / "checkpoints" / "seed0__local.partial.safetensors", CHECKPOINT_TYPES)
    reference = partial["algorithm"]["models"]
    assert partial["records"][-1].round == 2 and reference["store"] == "disk"
    store = run_dir / "store" / "seed0__local"
    assert (store / reference["file"]).is_file() and (store / "models.live").is_file()
    resumed = simulate(scenario, run_dir, keep_models=True, client_store="disk")
    assert resumed.trained_units == 1
    pd.testing.assert_frame_equal(resumed.trace, whole.trace)
    pd.testing.assert_frame_equal(resumed.clients, whole.clients)
    done = load_checkpoint(run_dir / "checkpoints" / "seed0__local.done.safetensors", CHECKPOINT_TYPES)
    assert sorted(p.name for p in store.iterdir()) == sorted(snapshots(done["algorithm"]))  # what the kept models need
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, tmp_path / "again", stop_after_rounds=3)  # a checkpoint from RAM resumes on disk
    pd.testing.assert_frame_equal(simulate(scenario, tmp_path / "again", client_store="disk").trace, whole.trace)


def test_dittos_personal_models_on_disk_interrupted_after_a_checkpoint_resume_to_the_uninterrupted_trace(tmp_path):
    """Its personal models and both optimizer states come back from their snapshots, not the live rows round 3 wrote."""
    doc = {**DOC, "rounds": 4, "checkpoint_every": 2, "algorithms": [{"name": "ditto"}]}
    scenario = parse_scenario(doc)
    whole = simulate(scenario, client_store="disk")
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir, stop_after_rounds=3, client_store="disk")
    partial = load_checkpoint(run_dir / "checkpoints" / "seed0__ditto.partial.safetensors", CHECKPOINT_TYPES)
    assert partial["records"][-1].round == 2 and partial["algorithm"]["personal"]["store"] == "disk"
    assert len(snapshots(partial["algorithm"])) == 1 + 2  # the personal models, momentum of both trainings
    resumed = simulate(scenario, run_dir, client_store="disk")
    assert resumed.trained_units == 1
    pd.testing.assert_frame_equal(resumed.trace, whole.trace)
    pd.testing.assert_frame_equal(resumed.clients, whole.clients)


def snapshots(state) -> list[str]:
    """The snapshot files a checkpointed state refers to."""
    if isinstance(state, dict):
        return [state["file"]] if state.get("store") == "disk" else [f for v in state.values() for f in snapshots(v)]
    return [f for v in state for f in snapshots(v)] if isinstance(state, (list, tuple)) else []


def test_the_client_store_is_no_part_of_the_fingerprint():
    on_disk = parse_scenario({**DOC, "client_store": {"where": "disk", "path": "/somewhere"}})
    assert scenario_fingerprint(on_disk) == scenario_fingerprint(parse_scenario(DOC))


def test_the_estimate_counts_a_disk_store_as_disk_and_the_preview_says_so(tmp_path):
    scenario = parse_scenario({**DOC, "algorithms": [{"name": "local"}], "training": {**DOC["training"], "keep_optimizer_state": False}})
    data = build_federated_data(scenario.data_spec(), 0)
    cpu = torch.device("cpu")
    ram, _ = cost.estimate_scenario(scenario, data, cpu)
    disk, arch = cost.estimate_scenario(scenario, data, cpu, "disk")
    models = 8 * arch.param_count * 4
    assert ram.parts["models kept"] - disk.parts["models kept"] == models and ram.disk == 0
    assert disk.disk == 3 * models  # every row can be written in 3 rounds of 4: the live file and two snapshots
    between = int((disk.total + ram.total) / 2 / MEMORY_FRACTION)
    chosen = cost.check_run(scenario, data=data, available=between, probe=False)
    assert chosen.client_store == "disk" and chosen.memory.total == disk.total
    assert f", per-client state on disk up to {cost.format_bytes(disk.disk)} (client_store);" in chosen.line()
    assert cost.check_run(scenario, data=data, probe=False).client_store == "memory"
    with pytest.raises(ValueError, match=r"\), with per-client state on disk \(up to .*, client_store\) but "):
        cost.check_run(scenario, data=data, available=int(disk.total / 2 / MEMORY_FRACTION), probe=False)


def test_a_store_path_that_cannot_be_written_is_one_line_and_nothing_is_written(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    source = tmp_path / "s.yaml"
    source.write_text(yaml.safe_dump({**DOC, "client_store": {"where": "disk", "path": str(blocker / "store")}}))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["simulate", str(source), "--out", str(out), "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        f"error: {source}: client_store.path {blocker / 'store'}: not a folder; give a folder this user can write, "
        "or leave path out (the run directory's store/)"
    )
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "s.yaml"]
    assert not Path(blocker / "store").exists()


def test_a_follower_takes_its_trainers_state_from_the_stores_themselves(tmp_path):
    """FedAvg+ follows FedAvg each round (its state_dict handed over live): on disk, no snapshot per round, and
    the same trace as in RAM."""
    doc = {**DOC, "algorithms": [{"name": "fedavg"}, {"name": "fedavg_ft"}]}
    scenario = parse_scenario(doc)
    memory = simulate(scenario, client_store="memory")
    disk = simulate(scenario, tmp_path / "run", client_store="disk", keep_models=True)
    assert disk.trained_units == 2
    pd.testing.assert_frame_equal(memory.trace, disk.trace, check_exact=True)
