"""Common random numbers: every curve of a seed starts from the same model and sees the same draws.

The special cases of FedAvg (FedEM with one component, IFCA with one cluster,
FedPer with no personal layer) must then give FedAvg's trace through the public
``simulate`` itself, not only when their objects are built with equal seeds.
Partial participation and kept Adam state make the participant draws and the
optimizer-state bookkeeping matter.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import wirelessfl

SCENARIO = {
    "name": "crn",
    "rounds": 4,
    "seeds": [0, 3],
    "data": {
        "dataset": "digits",
        "clients": 6,
        "samples": {"per_client": 40},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp"},
    "training": {"batch_size": 8, "lr": 0.01, "optimizer": "adam", "keep_optimizer_state": True, "participation": 0.5},
    "algorithms": [
        {"name": "fedavg"},
        {"name": "fedem", "params": {"components": 1}},
        {"name": "ifca", "params": {"clusters": 1}},
        {"name": "fedper", "params": {"personal_layers": 0}},
        {"name": "local"},
    ],
    "networks": [{"preset": "slow-ul-unreliable"}],
    "device": "cpu",
}
KEY = ["seed", "round"]
COLUMNS = [
    "avg_acc", "worst_acc", "p10_acc", "avg_val_acc", "mean_loss", "train_loss", "time", "round_time",
    "dl_payload", "ul_payload", "streams", "aggregated", "participants",
]


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return wirelessfl.simulate(SCENARIO).trace


def _curve(trace: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    return trace[trace["algorithm"] == algorithm].set_index(KEY)[COLUMNS].sort_index()


@pytest.mark.parametrize("algorithm", ["ifca", "fedper"])
def test_special_cases_give_fedavgs_trace_exactly(trace, algorithm):
    pd.testing.assert_frame_equal(_curve(trace, algorithm), _curve(trace, "fedavg"), check_exact=True)


def test_one_component_fedem_gives_fedavgs_trace(trace):
    """Exact but for the test loss: FedEM's is the mixture's NLL in float64, FedAvg's the engine's float32 cross-entropy."""
    fedem, fedavg = _curve(trace, "fedem"), _curve(trace, "fedavg")
    exact = [c for c in COLUMNS if c != "mean_loss"]
    pd.testing.assert_frame_equal(fedem[exact], fedavg[exact], check_exact=True)
    np.testing.assert_allclose(fedem["mean_loss"], fedavg["mean_loss"], rtol=1e-6, atol=0)


def test_every_curve_of_a_seed_starts_from_the_same_model_and_seeds_differ(trace):
    start = trace[trace["round"] == 0]
    for _, rows in start.groupby("seed"):
        assert rows["avg_acc"].nunique() == 1 and rows["avg_val_acc"].nunique() == 1
        assert np.ptp(rows["mean_loss"]) < 1e-6 * rows["mean_loss"].abs().max()
    fedavg = _curve(trace, "fedavg")
    assert not np.array_equal(fedavg.loc[0]["avg_acc"].to_numpy(), fedavg.loc[3]["avg_acc"].to_numpy())
    assert fedavg.loc[0]["train_loss"].iloc[1:].notna().all()
