"""Curves that train alike train once: FedAvg+ beside FedAvg follows FedAvg's training.

FedAvg+ (``fedavg_ft``) trains its global model exactly as FedAvg and only
evaluates differently (``Algorithm.trains_as``). With common random numbers a
scenario holding both trains the global model once; the follower's trace must
equal the trace it gives when it trains alone, column for column, whatever the
order of the curves, across an interruption, and when its trainer finished in
an earlier run.
"""

from __future__ import annotations

import pandas as pd
import pytest

from wirelessfl.algorithms.base import shared_trainings
from wirelessfl.algorithms.fedavg_ft import FedAvgFineTuned
from wirelessfl.config import parse_scenario
from wirelessfl.simulate import simulate

FOLLOWERS = [
    {"name": "fedavg_ft", "params": {"finetune_epochs": 1}},
    {"name": "fedavg_ft", "label": "fedavg-ft-2", "params": {"finetune_epochs": 2, "finetune_lr": 0.02}},
]
SCENARIO = {
    "name": "shared",
    "rounds": 4,
    "eval_every": 2,
    "checkpoint_every": 1,
    "seeds": [0, 1],
    "data": {
        "dataset": "digits",
        "clients": 6,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp"},
    "training": {"batch_size": 8, "lr": 0.01, "optimizer": "adam", "keep_optimizer_state": True, "participation": 0.5},
    "algorithms": [FOLLOWERS[0], {"name": "fedavg"}, FOLLOWERS[1]],  # a follower listed before its trainer
    "networks": [{"preset": "slow-ul-unreliable"}, {"preset": "wired"}],
    "device": "cpu",
}


def _rows(trace: pd.DataFrame, curves: list[str]) -> pd.DataFrame:
    rows = trace[trace["curve"].isin(curves)]
    return rows.sort_values(["curve", "profile", "seed", "round"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def alone() -> pd.DataFrame:
    """Each FedAvg+ curve trained on its own, and FedAvg on its own."""
    solo = simulate(parse_scenario({**SCENARIO, "algorithms": FOLLOWERS})).trace
    fedavg = simulate(parse_scenario({**SCENARIO, "algorithms": [{"name": "fedavg"}]})).trace
    return pd.concat([solo, fedavg], ignore_index=True)


@pytest.fixture(scope="module")
def together():
    return simulate(parse_scenario(SCENARIO))


CURVES = ["fedavg", "fedavg_ft", "fedavg-ft-2"]


def test_followers_give_the_trace_they_give_alone(alone, together):
    assert set(together.trace["curve"]) == set(CURVES)
    pd.testing.assert_frame_equal(_rows(together.trace, CURVES), _rows(alone, CURVES), check_exact=True)
    # their runtime counts no training of their own (the trainer's does) and names whom they followed
    follower, trainer = together.runtime["seed1__fedavg-ft-2"], together.runtime["seed1__fedavg"]
    assert follower["follows"] == "seed1__fedavg" and follower["train_samples_per_round"] == 0.0
    assert "follows" not in trainer and trainer["train_samples_per_round"] > 0


def test_the_global_model_trains_once_per_seed(monkeypatch):
    steps = []
    original = FedAvgFineTuned.step
    monkeypatch.setattr(FedAvgFineTuned, "step", lambda self, *a: steps.append(a) or original(self, *a))
    result = simulate(parse_scenario(SCENARIO))
    assert steps == [] and result.trained_units == 2 * 3
    alone_result = simulate(parse_scenario({**SCENARIO, "algorithms": FOLLOWERS[:1]}))
    assert len(steps) == 2 * 4 and alone_result.trained_units == 2


def test_an_interrupted_run_resumes_its_followers_to_the_identical_trace(tmp_path, together):
    scenario = parse_scenario(SCENARIO)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir=tmp_path, stop_after_rounds=3)
    assert (tmp_path / "checkpoints" / "seed0__fedavg_ft.partial.safetensors").exists()
    resumed = simulate(scenario, run_dir=tmp_path)
    pd.testing.assert_frame_equal(_rows(resumed.trace, CURVES), _rows(together.trace, CURVES), check_exact=True)
    assert resumed.runtime["seed0__fedavg_ft"]["follows"] == "seed0__fedavg"
    assert simulate(scenario, run_dir=tmp_path).runtime["seed0__fedavg_ft"]["follows"] == "seed0__fedavg"  # from done


def test_a_follower_whose_trainer_finished_earlier_trains_alone_to_the_same_trace(tmp_path, together):
    scenario = parse_scenario(SCENARIO)
    simulate(scenario, run_dir=tmp_path)
    for path in (tmp_path / "checkpoints").glob("*fedavg_ft*"):
        path.unlink()
    again = simulate(scenario, run_dir=tmp_path)
    assert again.trained_units == 2 and "follows" not in again.runtime["seed0__fedavg_ft"]
    pd.testing.assert_frame_equal(_rows(again.trace, CURVES), _rows(together.trace, CURVES), check_exact=True)


def test_who_follows_whom():
    fedavg, tuned = ("fedavg", {}, {}), ("fedavg_ft", {"finetune_epochs": 3}, {})
    assert shared_trainings([tuned, fedavg, tuned]) == {0: 1, 2: 1}
    assert shared_trainings([tuned]) == {}
    assert shared_trainings([fedavg, ("fedavg_ft", {}, {"lr": 0.5})]) == {}  # its own training: trains alone
    assert shared_trainings([("fedper", {}, {}), tuned]) == {}
