"""The small physical cell the lever tests (scheduling, compression) run on, and a curve's columns to compare."""

from __future__ import annotations

import pandas as pd

CELL = {
    "name": "cell", "t_min": 0.2, "mu": 5.0, "channels": 6,
    "physical": {"cell_radius_m": 500, "min_distance_m": 20, "bs_power_dbm": 30, "ue_power_dbm": 23,
                 "bandwidth_hz": 1.0e6},
}
#: Accuracy, time, bits and energy: a lever that changes nothing must leave all of them equal, exactly.
COLUMNS = [
    "avg_acc", "worst_acc", "avg_val_acc", "mean_loss", "train_loss", "time", "round_time", "ul_payload", "ul_bits",
    "aggregated", "participants", "energy_j",
]


def lever_scenario(name: str) -> dict:
    """Digits, 6 clients of 30 samples, an MLP, 3 rounds in ``CELL``."""
    return {
        "name": name,
        "rounds": 3,
        "seeds": [0],
        "data": {"dataset": "digits", "clients": 6, "samples": {"per_client": 30}},
        "model": {"name": "mlp"},
        "training": {"batch_size": 8, "lr": 0.05},
        "networks": [CELL],
        "device": "cpu",
    }


def curve_frame(trace: pd.DataFrame, curve: str) -> pd.DataFrame:
    """One curve's ``COLUMNS`` by seed and round."""
    return trace[trace["curve"] == curve].set_index(["seed", "round"])[COLUMNS].sort_index()
