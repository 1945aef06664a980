"""One simulation's training groups on Ray actors (``simulate --executor ray``) write the in-process trace.

One test starts a local two-worker Ray cluster (several seconds); the rest need
no cluster: the whole run through ``PickledShards`` (what an actor does, in
process) and the one-line refusals.
"""

from __future__ import annotations

import socket
import sys

import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl.algorithms.specs import BUILT_INS
from wirelessfl.cli import app
from wirelessfl.config import parse_scenario
from wirelessfl.learning.shards import PickledShards
from wirelessfl.simulate import simulate

runner = CliRunner()

TINY = {
    "name": "tiny",
    "rounds": 3,
    "checkpoint_every": 1,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 4,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05},
    # FedAvg, two personalised methods and a corrected local objective, all through engine.train
    "algorithms": [{"name": "fedavg"}, {"name": "fedper"}, {"name": "local"}, {"name": "fedprox"}],
    "networks": [{"preset": "wired"}],
}


def _write(tmp_path, doc=TINY):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_run_whose_groups_are_shipped_writes_the_in_process_trace():
    scenario = parse_scenario(TINY)
    here = simulate(scenario)
    shards = PickledShards()
    there = simulate(scenario, shards=shards)
    assert shards.sent > 0
    assert here.trace.to_csv(index=False) == there.trace.to_csv(index=False)
    assert here.clients.to_csv(index=False) == there.clients.to_csv(index=False)


def test_shipped_groups_of_clients_that_index_their_pool_write_the_in_process_trace():
    """Clients dealt in passes over the pool (``data.samples.reuse``) carry the pool and their rows to a shard."""
    data = {"dataset": "digits", "clients": 150, "samples": {"per_client": 15, "reuse": 2}, "partition": [{"name": "iid"}]}
    scenario = parse_scenario({**TINY, "data": data, "training": {**TINY["training"], "participation": 0.1},
                               "algorithms": [{"name": "fedavg"}, {"name": "fedper"}]})
    here = simulate(scenario)
    shards = PickledShards()
    there = simulate(scenario, shards=shards)
    assert shards.sent > 0
    assert here.trace.to_csv(index=False) == there.trace.to_csv(index=False)


def test_simulate_on_two_local_ray_workers_writes_the_single_process_trace(tmp_path, local_ray):
    path = _write(tmp_path)
    wirelessfl.simulate(path, out=tmp_path / "local")  # the same writer as the CLI's, without its PNG figures
    too_many = runner.invoke(
        app, ["simulate", str(path), "--out", str(tmp_path / "x"), "--quiet", "--executor", "ray", "--workers", "3"]
    )
    remote = runner.invoke(
        app, ["simulate", str(path), "--out", str(tmp_path / "ray"), "--quiet", "--executor", "ray", "--workers", "2"]
    )
    assert too_many.exit_code == 2 and not (tmp_path / "x").exists()
    assert too_many.output.strip() == "error: --workers 3: the Ray cluster has 2 CPUs (a worker takes one)"
    assert remote.exit_code == 0, remote.output
    assert "ray: 2 workers" in remote.output
    for name in ("trace.parquet", "trace.csv", "clients.parquet", "client_rounds.parquet"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_ray_missing_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path)), "--out", str(out), "--executor", "ray", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == 'error: --executor ray: Ray is not installed; pip install -e ".[ray]"'
    assert not out.exists()


def test_an_address_that_does_not_answer_is_one_line_and_writes_nothing(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    with socket.socket() as s:  # a port nobody listens on: bound, then released
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "run"
    address = f"127.0.0.1:{port}"
    result = runner.invoke(
        app, ["simulate", str(_write(tmp_path)), "--out", str(out), "--executor", "ray", "--address", address, "--quiet"]
    )
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --address {address}: no Ray cluster answers there; start one with `ray start --head`"
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--address", "127.0.0.1:6379"], "error: --address: use with --executor ray"),
        (["--workers", "2"], "error: --workers: use with --executor ray"),
        (["--executor", "ray", "--address", "nowhere"], "error: --address must be host:port, ray://host:port or auto, got 'nowhere'"),
        (["--executor", "ray", "--workers", "0"], "error: --workers must be an integer >= 1, got 0"),
        (["--executor", "ray", "--device", "cuda"], "error: --executor ray trains on the workers' CPUs; use --device cpu"),
    ],
)
def test_bad_executor_options_are_one_line(tmp_path, args, message):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path)), "--out", str(out), "--quiet", *args])
    assert result.exit_code == 2
    assert result.output.strip() == message
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_every_built_in_writes_the_in_process_trace_through_shipped_groups(name):
    """Shards run ``engine.train``'s groups, whatever the algorithm asks of it (masks, corrections, sample
    weights, optimizer state, step by step); its other entry points stay on the driver."""
    scenario = parse_scenario({**TINY, "algorithms": [{"name": name}]})
    assert simulate(scenario).trace.to_csv(index=False) == simulate(scenario, shards=PickledShards()).trace.to_csv(index=False)


@pytest.mark.slow
def test_a_killed_ray_worker_restarts_and_the_trace_is_unchanged(tmp_path, local_ray):
    """Ray restarts the actor (``max_restarts``), which fetches its datasets again from the object store; a driver
    stopped mid-run resumes from its checkpoints, here in process: the executor is not part of the trace."""
    from wirelessfl.learning.ray_shards import RayShards

    ray = local_ray
    scenario = parse_scenario({**TINY, "algorithms": [{"name": "fedavg"}], "rounds": 4})
    here = simulate(scenario)
    with RayShards(workers=2) as shards:
        killed = []

        def kill_one(progress):
            if progress["round"] == 2 and not killed:
                actor = next(iter(shards.actors.values()))[0]
                ray.kill(actor, no_restart=False)
                killed.append(actor)

        there = simulate(scenario, shards=shards, on_round=kill_one)
        with pytest.raises(KeyboardInterrupt):
            simulate(scenario, run_dir=tmp_path, shards=shards, stop_after_rounds=2)
    assert list((tmp_path / "checkpoints").glob("*.partial.*"))  # stopped after round 2, checkpointed
    resumed = simulate(scenario, run_dir=tmp_path)
    assert killed
    assert here.trace.to_csv(index=False) == there.trace.to_csv(index=False) == resumed.trace.to_csv(index=False)


def test_the_python_api_refuses_bad_executor_options_in_one_line(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^--executor must be one of local, ray, got 'process'$"):
        wirelessfl.simulate(TINY, out=out, executor="process")
    with pytest.raises(ValueError, match=r"^--workers: use with --executor ray$"):
        wirelessfl.simulate(TINY, out=out, workers=2)
    assert not out.exists()
