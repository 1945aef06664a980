"""Search spaces: declared beside each algorithm, overridden by a validated ``tune:`` block; per-algorithm training."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl
from wirelessfl.algorithms import ALGORITHMS
from wirelessfl.cli import app
from wirelessfl.config import ScenarioError, canonical, dump_scenario, parse_scenario, scenario_fingerprint
from wirelessfl.run.preflight import preflight
from wirelessfl.algorithms.search_space import Param, parse_param, tunables
from wirelessfl.tune.study import check_tunable, endpoint_scenario, targets

runner = CliRunner()

BASE = {
    "name": "space",
    "rounds": 2,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 6, "samples": {"per_client": 40}, "partition": [{"name": "iid"}]},
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 8, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}],
}


def test_every_algorithm_declares_a_space_of_its_own_tunables_that_its_constructor_accepts():
    """All ends of every default space build on a 6-client federation (the data, the model, every algorithm)."""
    for name, cls in ALGORITHMS.items():
        assert cls.search_space, name
        assert set(cls.search_space) <= set(tunables(cls)), name
        for key, param in cls.search_space.items():
            assert parse_param(param.to_dict(), key) == param
    doc = {**BASE, "algorithms": [{"name": name} for name in sorted(ALGORITHMS)]}
    scenario = parse_scenario(doc)
    preflight(endpoint_scenario(scenario))
    assert {t.algorithm for t in targets(scenario)} == set(ALGORITHMS)


def test_the_spaces_the_brief_names():
    assert {"training.lr", "training.local_epochs"} <= set(ALGORITHMS["fedavg"].search_space)
    assert set(ALGORITHMS["pflego"].search_space) == {"server_lr", "client_lr", "tau"}
    assert "components" in ALGORITHMS["fedem"].search_space
    assert {"gate_lr", "epsilon"} <= set(ALGORITHMS["fedmoe"].search_space)
    assert {"temperature", "warmup_rounds"} <= set(ALGORITHMS["ucfl"].search_space)
    assert {"models_per_client", "epsilon"} <= set(ALGORITHMS["fedfomo"].search_space)


def test_the_tune_block_adds_replaces_and_removes_and_fixed_params_are_not_searched():
    doc = {
        **BASE,
        "algorithms": [{"name": "ucfl", "params": {"temperature": 0.03}, "variants": {"streams": [2, 3]}}],
        "tune": {"algorithms": {"ucfl": {"training.local_epochs": None, "sigma_batches": {"choices": [5, 10]},
                                         "training.lr": {"low": 0.01, "high": 0.1}}}},
    }
    found = targets(parse_scenario(doc))
    assert [t.curve for t in found] == ["ucfl streams=2", "ucfl streams=3"]
    assert found[0].fixed == {"temperature": 0.03, "streams": 2}
    assert found[0].space == {
        "training.lr": Param(0.01, 0.1), "warmup_rounds": Param.range(0, 20), "sigma_batches": Param.of(5, 10),
    }
    doc["tune"]["algorithms"]["ucfl"]["temperature"] = {"low": 0.01, "high": 1.0, "log": True}
    assert targets(parse_scenario(doc))[0].space["temperature"] == Param.range(0.01, 1.0, log=True)


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        ({"algorithms": {"fedavg": {"temperature": {"low": 0.1, "high": 1}}}},
         "tune.algorithms: fedavg.temperature: not tunable for fedavg; allowed: training.local_epochs, training.batch_size"),
        ({"algorithms": {"fedavg": {"training.lr": {"low": 0.1, "high": 0.01}}}},
         "tune.algorithms: fedavg.training.lr: low must be below high, got low=0.1, high=0.01"),
        ({"algorithms": {"fedavg": {"training.lr": {"low": 0.0, "high": 0.1, "log": True}}}},
         "tune.algorithms: fedavg.training.lr: a log range needs low > 0, got low=0.0"),
        ({"algorithms": {"fedavg": {"training.lr": {"low": 0.01}}}},
         "tune.algorithms: fedavg.training.lr: needs low: and high: (or choices:)"),
        ({"algorithms": {"fedavg": {"training.lr": {"low": 0.01, "high": 0.1, "step": 2}}}},
         "tune.algorithms: fedavg.training.lr: unknown key(s) step; allowed: low, high, log, or choices alone"),
        ({"algorithms": {"fedavg": {"training.local_epochs": {"choices": []}}}},
         "tune.algorithms: fedavg.training.local_epochs.choices: must be a non-empty list, got []"),
        ({"algorithms": {"fedavgg": {}}}, "tune.algorithms: fedavgg: unknown algorithm; allowed: apfl, cfl, ditto"),
        ({"algorithms": {"ucfl": {}}}, "tune.algorithms.ucfl: not an algorithm of this scenario; present: fedavg"),
        ({"trials": 0}, "tune.trials: Input should be greater than or equal to 1"),
        ({"budget": 3}, "tune.budget: unknown key"),
    ],
)
def test_a_bad_tune_block_is_one_line_naming_the_field(tune, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, "tune": tune})
    assert str(err.value).startswith(f"scenario: {message}"), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("algorithm", "space", "data", "message"),
    [
        ("fedfomo", {"models_per_client": {"low": 1, "high": 9}}, {},
         "tune.algorithms.fedfomo: an end of the search space of 'fedfomo' is refused: "
         "algorithms[0].params.models_per_client: 9 is more than the other users a client can download from"),
        ("ifca", {"clusters": {"low": 1, "high": 9}}, {},
         "tune.algorithms.ifca: an end of the search space of 'ifca' is refused: "
         "algorithms[0].params.clusters: 9 is more than one cluster per user"),
        ("fedavg", {}, {"split": [0.8, 0.0, 0.2]}, "data.split: tuning scores trials on the validation split, which is empty"),
    ],
)
def test_a_space_the_scenario_refuses_is_one_line_exit_2_and_nothing_written(tmp_path, algorithm, space, data, message):
    doc = {**BASE, "data": {**BASE["data"], **data}, "algorithms": [{"name": algorithm}], "tune": {"algorithms": {algorithm: space}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    result = runner.invoke(app, ["tune", str(path), "--out", str(out), "--quiet"])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}: {message}"), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_tuning_needs_a_validation_split():
    with pytest.raises(ScenarioError, match=r"^data.split: tuning scores trials on the validation split, which is empty"):
        check_tunable(parse_scenario({**BASE, "data": {**BASE["data"], "split": [0.8, 0.0, 0.2]}}))


def test_a_curve_with_nothing_left_to_search_is_refused():
    doc = {**BASE, "algorithms": [{"name": "pflego", "params": {"server_lr": 0.1, "client_lr": 0.1, "tau": 5}}]}
    with pytest.raises(ScenarioError, match=r"^tune.algorithms.pflego: nothing to search for 'pflego'"):
        check_tunable(parse_scenario(doc))


# -- per-algorithm training fields (what tuned.yaml sets) -----------------------------------------


def test_an_algorithms_training_fields_are_its_own():
    doc = {**BASE, "algorithms": [{"name": "fedavg", "label": "fast", "training": {"lr": 0.2}}, {"name": "fedavg", "label": "slow"}]}
    both = wirelessfl.simulate(doc).trace
    alone = wirelessfl.simulate({**BASE, "training": {**BASE["training"], "lr": 0.2}}).trace
    cols = ["round", "avg_acc", "avg_val_acc", "mean_loss", "train_loss"]
    fast = both[both.curve == "fast"][cols].reset_index(drop=True)
    assert fast.equals(alone[cols].reset_index(drop=True))
    assert not fast.equals(both[both.curve == "slow"][cols].reset_index(drop=True))


@pytest.mark.parametrize(
    ("training", "message"),
    [
        ({"participation": 0.5}, "algorithms[0]: training: participation cannot be set per algorithm; allowed: local_epochs"),
        ({"lr": -1.0}, "algorithms[0].training.lr: Input should be greater than 0"),
        ({"nesterov": True, "momentum": 0.0}, "algorithms[0].training.nesterov: needs optimizer: sgd with momentum > 0"),
    ],
)
def test_bad_per_algorithm_training_is_one_line(training, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, "algorithms": [{"name": "fedavg", "training": training}]})
    assert str(err.value).startswith(f"scenario: {message}"), str(err.value)


def test_scenarios_without_the_new_blocks_write_them_null_and_fingerprint_as_before():
    """``tune: null`` and a null per-algorithm ``training:`` in the resolved file, neither in the fingerprinted
    form (old run folders keep their fingerprints)."""
    scenario = parse_scenario(BASE)
    written = yaml.safe_load(dump_scenario(scenario))
    assert written["tune"] is None and written["algorithms"][0]["training"] is None
    assert "tune" not in canonical(scenario) and "training" not in canonical(scenario)["algorithms"][0]
    assert scenario_fingerprint(scenario) == scenario_fingerprint(parse_scenario({**BASE, "tune": {"trials": 3}}))
