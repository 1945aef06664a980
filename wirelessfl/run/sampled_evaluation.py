"""Sampled evaluation (``evaluation: {clients: n}``): n seeded clients per evaluated round, all at the last.

Evaluating every client's own model on its own splits each round costs in
proportion to the population, not to the round's participants: at 1,000 EMNIST
clients, 10 participants a round, a 3-round FedAvg run spent 112 s evaluating and 3 s training. A
sample of n clients estimates the mean client accuracy with a 95% interval
(``results.intervals.sample_mean_interval``, with the finite-population
correction); the last round is evaluated in full, so the final accuracies, the
clients table and every final-round number are exact.

The sample of round r is drawn from ``(learning seed, r, "evaluation")``: the
same clients for every curve of a seed (common random numbers: two curves of a
round are compared on the same clients) and a new sample every round (errors
independent from round to round, so a mean over the last rounds averages them
away, and no one unlucky draw shifts a whole curve). It is drawn from the
training clients; held-out clients (``unseen_acc``) are evaluated in full.
The full evaluation of a sampled run gathers the models of ``CHUNK_CLIENTS``
clients per engine call, not of all m (the clients are evaluated alike: the same
accuracies; losses equal to rounding), and keeps none of their data copies
(``engine.uncached``): no later round repeats that pass, and at 100,000 clients
the copies held about 0.7 GB.
"""

from __future__ import annotations

import contextlib
import inspect
import math

import numpy as np
import torch

from wirelessfl.algorithms.base import Algorithm, clients_except, numpy_generator
from wirelessfl.learning.lockstep import EvalResult
from wirelessfl.results.intervals import sample_mean_interval


#: Clients of one engine call when a sampled run evaluates everyone (its last round): the models of 1,024
#: clients at a time (250 MB of LeNet-5 rows), not of all m (2.5 GB at 10,000 clients).
CHUNK_CLIENTS = 1024


def evaluation_sample(seed: int, round: int, population: np.ndarray, count: int) -> np.ndarray:
    """``count`` of ``population`` (sorted client ids) drawn uniformly from ``(seed, round, "evaluation")``, sorted."""
    rng = numpy_generator(seed, round, "evaluation")
    return np.sort(population[rng.choice(len(population), size=count, replace=False)])


def sample_size(clients: int | str, round: int, rounds: int) -> int | None:
    """Clients to sample in ``round`` under ``evaluation.clients``; None: every client (``all``, and the last round)."""
    return None if clients == "all" or round == rounds else int(clients)


def evaluate_sample(
    algorithm: Algorithm, round: int, count: int | None, test_split: bool = True, fit: bool = False
) -> tuple[dict[str, float], np.ndarray]:
    """The trace's accuracy columns over ``count`` sampled training clients (None: all of them, evaluated as
    ``run.evaluation.evaluate_round`` does) plus ``results.io.SAMPLE_COLUMNS``; and every client's test accuracy (NaN for
    the clients not evaluated). Held-out clients are always evaluated (``unseen_acc``)."""
    m = algorithm.ctx.num_clients
    held_out = algorithm.held_out_clients()
    seen = clients_except(m, held_out)
    everyone = count is None or count >= len(seen)
    chosen = np.arange(m) if everyone else np.union1d(evaluation_sample(algorithm.ctx.seed, round, seen, count), held_out)
    sampled = np.isin(chosen, seen)

    def measured(split: str) -> tuple[np.ndarray, np.ndarray]:
        if not everyone or m <= CHUNK_CLIENTS:
            result = _evaluate(algorithm, split, None if everyone else chosen)
            return result.accuracy.detach().double().cpu().numpy(), result.loss.detach().double().cpu().numpy()
        with algorithm.ctx.engine.uncached() if count is None else contextlib.nullcontext():  # the last round's pass
            parts = [_evaluate(algorithm, split, chunk) for chunk in np.array_split(chosen, -(-m // CHUNK_CLIENTS))]
        return (np.concatenate([p.accuracy.detach().double().cpu().numpy() for p in parts]),
                np.concatenate([p.loss.detach().double().cpu().numpy() for p in parts]))

    val_acc, _ = measured("val")
    metrics = dict.fromkeys(("avg_acc", "worst_acc", "p10_acc", "mean_loss", "unseen_acc", "avg_acc_lo", "avg_acc_hi"), math.nan)
    metrics["avg_val_acc"] = float(val_acc[sampled].mean())
    metrics["evaluated_clients"] = float(sampled.sum())
    acc = np.full(m, math.nan)
    if not test_split:
        return metrics, acc
    test_acc, test_loss = measured("test")
    acc[chosen] = test_acc
    ours = test_acc[sampled]
    low, high = sample_mean_interval(ours, len(seen))
    metrics.update(
        avg_acc=float(ours.mean()), worst_acc=float(ours.min()), p10_acc=float(np.percentile(ours, 10)),
        mean_loss=float(test_loss[sampled].mean()), unseen_acc=float(acc[held_out].mean()) if len(held_out) else math.nan,
        avg_acc_lo=low, avg_acc_hi=high,
    )
    if fit:
        fit_acc, fit_loss = measured("train")
        metrics["fit_acc"] = float(fit_acc[sampled].mean())
        metrics["fit_loss"] = float(fit_loss[sampled].mean())
    return metrics, acc


def _evaluate(algorithm: Algorithm, split: str, clients: np.ndarray | None):
    """``algorithm.evaluate`` of ``clients`` (None: all). An algorithm whose ``evaluate`` takes no ``clients``
    (FedEM's mixture, fedmoe's gates, a user's) is evaluated in full and the sample's rows kept: the same
    numbers, without the saving."""
    if clients is None:
        return algorithm.evaluate(split)
    if "clients" in inspect.signature(algorithm.evaluate).parameters:
        return algorithm.evaluate(split, clients)
    full = algorithm.evaluate(split)
    rows = torch.as_tensor(clients, dtype=torch.long, device=full.accuracy.device)
    return EvalResult(full.accuracy[rows], full.loss[rows], full.count[rows])
