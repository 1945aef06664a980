"""Algorithms by import path: a user's ``Algorithm`` subclass from a file outside the package runs through
simulate, a process-pool sweep, tune and --resume, and everything it gets wrong is one line naming it.

The process-pool sweep here also carries a user's dataset by import path (one pool proves both kinds of user
code reach the workers; tests/learning/test_user_datasets.py covers the loader itself)."""

from __future__ import annotations

import sys
import textwrap

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl.cli import app
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.simulate import simulate as run_simulation

from simulated import LEARNING, curve, scenario

runner = CliRunner()

MODULE = "wfl_user_methods"
SOURCE = textwrap.dedent('''
    """A user's methods, written against wirelessfl.algorithms only."""
    import random

    from wirelessfl.algorithms import COMMON_SEARCH_SPACE, Algorithm, MixingAlgorithm, Param


    class ServerMomentum(MixingAlgorithm):
        """FedAvg whose server moves with momentum: v <- beta v + (average - x), x <- x + v (its state: v)."""

        name = "server_momentum"
        hparams = {"beta": 0.5}
        search_space = {**COMMON_SEARCH_SPACE, "beta": Param.range(0.0, 0.9)}

        def __init__(self, ctx, **hparams):
            super().__init__(ctx, **hparams)
            self.velocity = self.models * 0

        def step(self, round, arrived):
            before = self.models
            info = super().step(round, arrived)
            self.velocity = self.params["beta"] * self.velocity + (self.models - before)
            self.models = before + self.velocity
            return info

        def state_dict(self):
            return {**super().state_dict(), "velocity": self.velocity.clone()}

        def load_state_dict(self, state):
            super().load_state_dict(state)
            self.velocity = state["velocity"].clone()


    class Boom(MixingAlgorithm):
        name = "boom"

        def step(self, round, arrived):
            if round == 2:
                raise ZeroDivisionError("division by zero\\nsecond line")
            return super().step(round, arrived)


    class Unstorable(MixingAlgorithm):
        name = "unstorable"

        def state_dict(self):
            return {**super().state_dict(), "draws": random.Random(0)}


    class Clash(MixingAlgorithm):
        name = "fedavg"


    class Unfinished(Algorithm):
        name = "unfinished"

        def plan(self, round):
            return None


    def helper():
        return None
''')
METHOD = f"{MODULE}:ServerMomentum"
DATA_MODULE = "wfl_user_data"
DATA_SOURCE = textwrap.dedent('''
    """A user's dataset: six writers of 8x8 grey images, a stripe per class (learnable), writer w mostly w and w + 1."""
    import numpy as np


    def load(writers=6, per_writer=20):
        rng = np.random.default_rng(0)
        ids = np.repeat(np.arange(writers), per_writer)
        labels = (ids + rng.integers(0, 2, size=len(ids))) % 10
        images = rng.integers(0, 256, size=(len(ids), 8, 8), dtype=np.uint8)
        images[np.arange(len(ids)), labels % 8, :] = 255
        return images, labels, ids
''')


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    """The user's modules in a folder of their own, on sys.path (a spawned pool worker inherits it)."""
    folder = tmp_path_factory.mktemp("user")
    (folder / f"{MODULE}.py").write_text(SOURCE)
    (folder / f"{DATA_MODULE}.py").write_text(DATA_SOURCE)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop(MODULE, None)
    sys.modules.pop(DATA_MODULE, None)


def doc(algorithms, **overrides):
    return scenario(algorithms, **{"checkpoint_every": 1, **overrides})


@pytest.fixture(scope="module")
def trace(user_dir):
    return wirelessfl.simulate(doc([{"name": "fedavg"}, {"name": METHOD, "label": "momentum"}])).trace


def test_a_method_by_import_path_runs_beside_the_built_ins(trace):
    momentum, fedavg = curve(trace, "momentum"), curve(trace, "fedavg")
    assert set(trace.loc[trace["curve"] == "momentum", "algorithm"]) == {METHOD}
    pd.testing.assert_frame_equal(momentum.loc[[(0, 0), (0, 1)]], fedavg.loc[[(0, 0), (0, 1)]], check_exact=True)
    assert momentum.loc[(0, 3), "mean_loss"] != fedavg.loc[(0, 3), "mean_loss"]  # its own server rule from round 2


def test_an_interrupted_run_resumes_the_methods_state_to_the_identical_trace(user_dir, trace, tmp_path):
    sc = parse_scenario(doc([{"name": METHOD, "label": "momentum"}]))
    with pytest.raises(KeyboardInterrupt):
        run_simulation(sc, tmp_path, stop_after_rounds=2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["seed0__momentum.partial.safetensors"]
    resumed = run_simulation(sc, tmp_path).trace
    pd.testing.assert_frame_equal(curve(resumed, "momentum"), curve(trace, "momentum"), check_exact=True)


def test_a_process_pool_sweep_imports_the_method_and_the_dataset_in_its_workers(user_dir, tmp_path):
    """One spawned worker imports the user's method and the user's loader by their paths (the parent's sys.path
    travels with the spawn) and trains both grid points to the in-process sweep's table and curves, exactly."""
    users = doc([{"name": METHOD, "label": "momentum"}],
                data={"dataset": f"{DATA_MODULE}:load", "clients": 6, "partition": [{"name": "natural"}]})
    grid = {"training.lr": [0.01, 0.02]}
    local = wirelessfl.sweep(users, grid, out=tmp_path / "local", executor="local")
    pooled = wirelessfl.sweep(users, grid, out=tmp_path / "pool", executor="process", workers=1)
    assert {o.status for o in pooled.outcomes.values()} == {"ok"}, pooled.outcomes
    assert len(pooled.computed) == 2
    pd.testing.assert_frame_equal(pooled.table, local.table)
    for lr in grid["training.lr"]:
        point, here = (s.trace[s.trace["training.lr"] == lr] for s in (pooled, local))
        assert set(point["algorithm"]) == {METHOD}
        pd.testing.assert_frame_equal(curve(point, "momentum", LEARNING), curve(here, "momentum", LEARNING), check_exact=True)


def test_tune_searches_the_methods_own_search_space(user_dir, tmp_path):
    tuned = wirelessfl.tune(
        doc([{"name": METHOD, "label": "momentum"}], rounds=2, tune={"trials": 2, "batch": 2, "startup_trials": 2, "warmup_rounds": 1, "last_rounds": 1}),
        tmp_path / "t",
    )
    assert len(tuned.table) == 2 and "param beta" in tuned.table.columns
    assert tuned.table["param beta"].between(0.0, 0.9).all()
    assert "beta" in yaml.safe_load((tmp_path / "t" / "tuned.yaml").read_text())["algorithms"][0]["params"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("wfl_no_such_module:X", "algorithm 'wfl_no_such_module:X': cannot import module 'wfl_no_such_module' (ModuleNotFoundError: No module named 'wfl_no_such_module')"),
        (f"{MODULE}:Missing", f"algorithm '{MODULE}:Missing': module '{MODULE}' has no attribute 'Missing'"),
        (f"{MODULE}:helper", f"algorithm '{MODULE}:helper': helper is a function, not a subclass of wirelessfl.algorithms.Algorithm"),
        (f"{MODULE}:random", f"algorithm '{MODULE}:random': random is a module, not a subclass of wirelessfl.algorithms.Algorithm"),
        (f"{MODULE}:Unfinished", f"algorithm '{MODULE}:Unfinished': Unfinished does not define client_params, step (abstract in Algorithm)"),
        (f"{MODULE}:Clash", f"algorithm '{MODULE}:Clash': Clash.name is 'fedavg', the name of the built-in FedAvg; give the class a name of its own"),
        ("a:b:c", "algorithm 'a:b:c': an algorithm by import path is written 'package.module:Class'"),
    ],
)
def test_a_method_that_cannot_be_used_is_one_line_naming_it(user_dir, name, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc([{"name": name}]))
    assert str(err.value) == f"scenario: algorithms[0]: {message}"


def test_unknown_parameters_of_a_method_by_import_path_are_refused_by_name(user_dir):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc([{"name": METHOD, "params": {"gamma": 1}}]))
    assert str(err.value) == f"scenario: algorithms[0]: {METHOD} has no parameter 'gamma'; allowed: beta"


def _write(folder, content, name="s.yaml"):
    path = folder / name
    path.write_text(yaml.safe_dump(content))
    return path


def test_a_step_that_raises_is_one_line_naming_the_class_and_writes_no_results(user_dir, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc([{"name": f"{MODULE}:Boom"}]))), "--out", str(out), "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"error: algorithm '{MODULE}:Boom': step(round 2) raised ZeroDivisionError: division by zero"
    )
    assert "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "scenario.yaml"]  # round 1's checkpoint, no results
    assert [p.name for p in (out / "checkpoints").iterdir()] == [f"seed0__{MODULE}_Boom.partial.safetensors"]


def test_a_state_a_checkpoint_cannot_hold_is_refused_before_anything_is_written(user_dir, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc([{"name": f"{MODULE}:Unstorable"}]))), "--out", str(out), "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {tmp_path / 's.yaml'}: algorithm '{MODULE}:Unstorable': checkpoint: cannot store Random at "
        "state.algorithm.draws (not a plain value, tensor, array or allowed dataclass); an algorithm's state_dict() may "
        "hold tensors, NumPy arrays and scalars of numbers or booleans, None, bool, int, float, str, and lists, tuples, "
        "sets and dicts of these"
    )
    assert not out.exists()


def test_the_plugin_example_runs_through_the_command_line(tmp_path):
    out = tmp_path / "run"
    plugin = "examples.fedprox_plugin:FedProxPlugin"
    path = _write(tmp_path, doc([{"name": "fedavg"}, {"name": plugin, "params": {"mu": 0.1}, "label": "fedprox-plugin"}], rounds=2))
    result = runner.invoke(app, ["simulate", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    written = pd.read_csv(out / "trace.csv")
    assert set(written["algorithm"]) == {"fedavg", plugin} and len(written) == 2 * 3


def test_the_baselines_are_listed():
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    listed = {line.split("│")[1].strip() for line in result.output.splitlines() if line.count("│") == 3}
    assert {"apfl", "ditto", "fedprox", "fedrep", "pfedme", "scaffold"} <= listed
