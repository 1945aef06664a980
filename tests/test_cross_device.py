"""scenarios/cross-device.yaml: it validates, and a shrunken copy runs end to end.

The shipped file (10,000 EMNIST phones, 1% a round) takes minutes; the run here
keeps its shape (FedAvg, FedPer and IFCA, 1% participation, sampled evaluation,
a physical UMa cell, device energy) with 500 clients and 4 rounds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import wirelessfl.algorithms  # noqa: F401  (registers the algorithms)
from wirelessfl.config import load_scenario

CROSS_DEVICE = Path(__file__).resolve().parents[1] / "scenarios" / "cross-device.yaml"
EMNIST_OPTIONS = {"split": "byclass", "pool": ["test"]}


def test_cross_device_scenario_validates():
    sc = load_scenario(CROSS_DEVICE)
    assert sc.data.clients == 10_000
    assert sc.training.participation == 0.01
    assert [a.name for a in sc.algorithms] == ["fedavg", "fedper", "ifca"]
    assert sc.evaluation.clients == 200 and sc.eval_every > 1
    assert [p.name for p in sc.profiles()] == ["uma-phones"]


def emnist_missing() -> str | None:
    from wirelessfl.learning.data.data_files import missing_dataset

    return missing_dataset("emnist", None, False, EMNIST_OPTIONS)


def test_cross_device_runs_end_to_end_shrunk():
    reason = emnist_missing()
    if reason is not None:
        pytest.skip(f"EMNIST byclass is not in the data root: {reason}")
    from wirelessfl.simulate import simulate

    settings = ["data.clients=500", "rounds=4", "eval_every=2", "evaluation.clients=20", "training.participation=0.02"]
    sc = load_scenario(CROSS_DEVICE, settings=settings)
    trace = simulate(sc, device="cpu").trace
    assert set(trace["algorithm"]) == {"fedavg", "fedper", "ifca"}
    assert (trace.loc[trace["round"] > 0, "participants"] == 10).all()
    sampled = trace[trace["round"] == 2]
    assert (sampled["evaluated_clients"] == 20).all()
    assert (sampled["avg_acc_lo"] <= sampled["avg_acc"]).all() and (sampled["avg_acc"] <= sampled["avg_acc_hi"]).all()
    last = trace[trace["round"] == 4]
    assert (last["evaluated_clients"] == 500).all()
    assert np.isfinite(last["avg_acc"]).all() and (last["cum_energy_j"] > 0).all()
