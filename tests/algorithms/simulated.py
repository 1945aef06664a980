"""A small scenario run through the public ``wirelessfl.simulate``, and its curves compared column by column."""

from __future__ import annotations

import pandas as pd

import wirelessfl

#: Accuracy, loss and network columns; a special case of another method must match them all, exactly.
COLUMNS = [
    "avg_acc", "worst_acc", "p10_acc", "avg_val_acc", "mean_loss", "train_loss", "time", "round_time",
    "dl_payload", "ul_payload", "streams", "aggregated", "participants",
]
#: What training decides (a method that sends more than another still learns the same models).
LEARNING = ["avg_acc", "worst_acc", "p10_acc", "avg_val_acc", "mean_loss", "train_loss"]


def scenario(algorithms: list[dict], **overrides) -> dict:
    """Digits, 6 clients of unequal rotation groups, an MLP, Adam with kept state, half the clients per round."""
    base = {
        "name": "baselines",
        "rounds": 3,
        "seeds": [0],
        "data": {
            "dataset": "digits",
            "clients": 6,
            "samples": {"per_client": 40},
            "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
        },
        "model": {"name": "mlp", "options": {"hidden": [16]}},
        "training": {"batch_size": 8, "lr": 0.01, "optimizer": "adam", "keep_optimizer_state": True, "participation": 0.5},
        "algorithms": algorithms,
        "networks": [{"preset": "slow-ul-unreliable"}],
        "device": "cpu",
    }
    return {**base, **overrides}


def run(algorithms: list[dict], **overrides) -> pd.DataFrame:
    return wirelessfl.simulate(scenario(algorithms, **overrides)).trace


def curve(trace: pd.DataFrame, name: str, columns=COLUMNS) -> pd.DataFrame:
    """One curve's rows (by curve name) indexed by (seed, round)."""
    rows = trace[trace["curve"] == name]
    assert len(rows), f"no curve {name!r} in {sorted(trace['curve'].unique())}"
    return rows.set_index(["seed", "round"])[columns].sort_index()
