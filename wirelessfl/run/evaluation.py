"""What one round leaves behind (``RoundRecord``), which rounds are evaluated, and how a round is evaluated.

The records are what a checkpoint keeps and what every profile's rows are made
from, so they hold no time: timing is the network's, added when rows are written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wirelessfl.algorithms.base import clients_except
from wirelessfl.run.sampled_evaluation import evaluate_sample, sample_size
from wirelessfl.seam import CommPlan


@dataclass
class RoundRecord:
    """What the learning side produced in one round (independent of time)."""

    round: int
    plan: CommPlan | None
    metrics: dict[str, float]
    streams: int
    aggregated: int
    participants: int
    client_acc: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    diagnostics: dict[str, Any] = field(default_factory=dict)


def evaluated(round: int, rounds: int, eval_every: int, eval_last: int = 0) -> bool:
    """Whether ``round`` (1..rounds) is evaluated: every ``eval_every``-th, each of the last ``eval_last``, and the last."""
    return round % eval_every == 0 or round > rounds - eval_last or round == rounds


def evaluate_round(algorithm, round: int, test_split: bool = True, fit: bool = False) -> tuple[dict[str, float], np.ndarray]:
    """Accuracy columns over the training clients; held-out clients only in ``unseen_acc``.

    Without ``test_split`` (tuning) the test split is never evaluated: only ``avg_val_acc`` is a
    number, every test column is NaN. With ``fit`` (``eval_train``) each client's model is also
    evaluated on its own training split, the same way for every method: ``fit_acc`` and ``fit_loss``
    (means over the training clients) tell a method that under-fits from one that over-fits, which the
    algorithms' own ``train_loss`` (each method's own running measure) cannot.
    """
    val = algorithm.evaluate("val")
    held_out = algorithm.held_out_clients()
    val_acc = val.accuracy.double().cpu().numpy()
    seen = clients_except(len(val_acc), held_out)
    if not test_split:
        metrics = dict.fromkeys(("avg_acc", "worst_acc", "p10_acc", "mean_loss", "unseen_acc"), math.nan)
        metrics["avg_val_acc"] = float(val_acc[seen].mean())
        return metrics, np.full(len(val_acc), math.nan)
    test = algorithm.evaluate("test")
    acc = test.accuracy.detach().double().cpu().numpy()
    metrics = {
        "avg_acc": float(acc[seen].mean()),
        "worst_acc": float(acc[seen].min()),
        "p10_acc": float(np.percentile(acc[seen], 10)),
        "avg_val_acc": float(val_acc[seen].mean()),
        "mean_loss": float(test.loss.double().cpu().numpy()[seen].mean()),
        "unseen_acc": float(acc[held_out].mean()) if len(held_out) else math.nan,
    }
    if fit:
        train = algorithm.evaluate("train")
        metrics["fit_acc"] = float(train.accuracy.double().cpu().numpy()[seen].mean())
        metrics["fit_loss"] = float(train.loss.double().cpu().numpy()[seen].mean())
    return metrics, acc


def evaluate_for(scenario, algorithm, round: int, test_split: bool) -> tuple[dict[str, float], np.ndarray]:
    """:func:`evaluate_round`, or with ``evaluation.clients`` its seeded sample (``run.sampled_evaluation``)."""
    clients = scenario.evaluation.clients
    if clients == "all":
        return evaluate_round(algorithm, round, test_split, scenario.eval_train)
    count = sample_size(clients, round, scenario.rounds)
    return evaluate_sample(algorithm, round, count, test_split, scenario.eval_train)
