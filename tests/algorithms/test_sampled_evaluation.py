"""Sampled evaluation (``evaluation: {clients: n, every: r}``): seeded clients, exact last round, the interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from wirelessfl.algorithms import get_algorithm
from wirelessfl.algorithms.base import derive_seed
from wirelessfl.algorithms.registry import BUILT_INS
from wirelessfl.config import ScenarioError, canonical, parse_scenario, scenario_fingerprint
from wirelessfl.learning.lockstep import TrainConfig
from wirelessfl.results.intervals import sample_mean_interval
from wirelessfl.results.sampled import sample_section
from wirelessfl.run.sampled_evaluation import evaluate_sample, evaluation_sample, sample_size
from wirelessfl.simulate import simulate

BASE = {
    "name": "sampled",
    "rounds": 3,
    "data": {"dataset": "digits", "clients": 12, "samples": {"per_client": 30}},
    "model": {"name": "mlp"},
    "training": {"batch_size": 10, "lr": 0.05, "participation": 0.5},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "device": "cpu",
}


@pytest.fixture(scope="module")
def runs():
    full = simulate(parse_scenario(BASE)).trace
    every = simulate(parse_scenario({**BASE, "evaluation": {"clients": "all"}})).trace
    sampled = simulate(parse_scenario({**BASE, "evaluation": {"clients": 4}})).trace
    return full, every, sampled


def test_all_clients_is_todays_trace_and_fingerprint(runs):
    full, every, _ = runs
    pd.testing.assert_frame_equal(full, every)
    assert "evaluation" not in canonical(parse_scenario({**BASE, "evaluation": {"clients": "all"}}))
    assert scenario_fingerprint(parse_scenario(BASE)) == scenario_fingerprint(parse_scenario({**BASE, "evaluation": {}}))


def test_every_is_eval_every():
    one = parse_scenario({**BASE, "evaluation": {"every": 2}})
    other = parse_scenario({**BASE, "eval_every": 2})
    assert one.eval_every == 2 and scenario_fingerprint(one) == scenario_fingerprint(other)


def test_a_sample_changes_no_training_and_the_last_round_is_exact(runs):
    full, _, sampled = runs
    assert set(sampled.columns) - set(full.columns) == {"avg_acc_lo", "avg_acc_hi", "evaluated_clients"}
    same = ["round", "time", "train_loss", "participants", "aggregated", "dl_payload", "ul_payload"]
    pd.testing.assert_frame_equal(sampled[same], full[same])
    assert sampled["evaluated_clients"].tolist() == [4, 4, 4, 12] * 2
    last = sampled["round"] == 3
    pd.testing.assert_frame_equal(sampled.loc[last, full.columns], full.loc[last])
    assert (sampled.loc[last, "avg_acc_lo"] == sampled.loc[last, "avg_acc"]).all()  # n = N: zero width
    assert (sampled.loc[last, "avg_acc_hi"] == sampled.loc[last, "avg_acc"]).all()
    early = sampled[~last]
    assert ((early.avg_acc_lo <= early.avg_acc) & (early.avg_acc <= early.avg_acc_hi) & (early.avg_acc_hi > early.avg_acc_lo)).all()


def test_the_summary_shows_the_last_sampled_round_beside_the_exact_last(runs):
    _, _, sampled = runs
    lines = "\n".join(sample_section(sampled)).splitlines()
    assert lines[0] == "## Sampled evaluation (`evaluation.clients`)"
    fedavg = next(line for line in lines if line.startswith("| fedavg "))
    row = sampled[(sampled.curve == "fedavg") & (sampled["round"] == 2)].iloc[0]
    assert f"| 2 | 4 of 12 | {100 * row.avg_acc:.1f} | {100 * row.avg_acc_lo:.1f} to {100 * row.avg_acc_hi:.1f} |" in fedavg
    assert sample_section(runs[0]) == []


@pytest.fixture(scope="module")
def ctx(federation):
    return federation([18] * 10, ({"name": "iid"},), 30, TrainConfig(epochs=1, batch_size=8, lr=0.05), seed=derive_seed(3, "learning"))


def test_the_sample_is_seeded_the_same_for_every_curve_and_equals_the_full_evaluation(ctx):
    round = 2
    expected = np.sort(np.random.default_rng(derive_seed(ctx.seed, round, "evaluation")).choice(10, size=4, replace=False))
    assert np.array_equal(evaluation_sample(ctx.seed, round, np.arange(10), 4), expected)
    for name in ("fedavg", "local", "ditto"):
        algo = get_algorithm(name)(ctx)
        algo.step(1, frozenset(range(10)))
        metrics, acc = evaluate_sample(algo, round, 4)
        assert np.flatnonzero(~np.isnan(acc)).tolist() == expected.tolist()  # the seeded clients, for every curve
        whole = algo.evaluate("test").accuracy.double().numpy()
        np.testing.assert_array_equal(acc[expected], whole[expected])
        assert metrics["avg_acc"] == pytest.approx(whole[expected].mean(), abs=1e-15)
        assert metrics["evaluated_clients"] == 4
    assert not np.array_equal(evaluation_sample(ctx.seed, 3, np.arange(10), 4), expected)  # a new sample each round


def test_held_out_clients_are_never_sampled_and_always_evaluated(ctx):
    from dataclasses import replace

    held = np.array([1, 6])
    algo = get_algorithm("fedavg")(replace(ctx, held_out=held))
    metrics, acc = evaluate_sample(algo, 1, 3)
    evaluated = set(np.flatnonzero(~np.isnan(acc)).tolist())
    assert {1, 6} <= evaluated and len(evaluated) == 5
    seen = np.setdiff1d(np.arange(10), held)
    assert sorted(evaluated - {1, 6}) == evaluation_sample(ctx.seed, 1, seen, 3).tolist()
    assert metrics["unseen_acc"] == pytest.approx(acc[held].mean(), abs=1e-15)


def test_sample_size_is_all_at_the_last_round():
    assert sample_size("all", 1, 5) is None
    assert sample_size(8, 1, 5) == 8 and sample_size(8, 5, 5) is None


def test_interval_by_hand():
    # 4 of N = 10 clients: 1, 0.5, 0, 0.5. Mean 0.5; s^2 = (0.25 + 0 + 0.25 + 0) / 3 = 1/6;
    # (1 - 4/10) * s^2 / 4 = 0.025, sqrt 0.158114; t(0.975, 3) = 3.182446: half-width 0.503189.
    low, high = sample_mean_interval([1.0, 0.5, 0.0, 0.5], 10)
    assert stats.t.ppf(0.975, 3) == pytest.approx(3.182446, abs=1e-6)
    assert (low, high) == pytest.approx((0.5 - 0.503189, 0.5 + 0.503189), abs=1e-6)
    assert sample_mean_interval([0.2, 0.4, 0.9], 3) == (0.5, 0.5)  # the whole population: exact
    assert all(math.isnan(v) for v in sample_mean_interval([0.3], 10))


@pytest.mark.parametrize(
    "evaluation, extra, message",
    [
        ({"clients": 13}, {}, "scenario: evaluation.clients: 13 is more than the clients (data.clients = 12); at most 12, or all"),
        ({"clients": 11}, {"training": {"unseen_fraction": 0.25}},
         "scenario: evaluation.clients: 11 is more than the 9 training clients (data.clients = 12 less 3 held out by "
         "training.unseen_fraction); at most 9, or all"),
        ({"clients": 1}, {}, "scenario: evaluation.clients: must be a number of clients, at least 2 (an interval needs two), or all; got 1"),
        ({"clients": "half"}, {}, "scenario: evaluation.clients: must be a number of clients, at least 2 (an interval needs two), or all; got 'half'"),
        ({"every": 0}, {}, "scenario: evaluation.every: must be a whole number of rounds, at least 1; got 0"),
        ({"every": 2}, {"eval_every": 2}, "scenario: evaluation.every: eval_every also sets the rounds between evaluations; give one of them"),
    ],
)
def test_bad_evaluation_is_one_line(evaluation, extra, message):
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({**BASE, **extra, "evaluation": evaluation})
    assert str(refused.value) == message


def test_the_full_evaluation_of_a_sampled_run_goes_in_chunks_of_clients(ctx, monkeypatch):
    import wirelessfl.run.sampled_evaluation as sampled

    algo = get_algorithm("local")(ctx)
    algo.step(1, frozenset(range(10)))
    whole = algo.evaluate("test")
    calls = []
    evaluate = algo.evaluate
    monkeypatch.setattr(algo, "evaluate", lambda split, clients=None: calls.append(clients) or evaluate(split, clients))
    monkeypatch.setattr(sampled, "CHUNK_CLIENTS", 3)
    metrics, acc = evaluate_sample(algo, 1, None)
    assert [c.tolist() for c in calls[-4:]] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]  # the test split's 4 calls
    np.testing.assert_array_equal(acc, whole.accuracy.double().numpy())
    assert metrics["mean_loss"] == pytest.approx(whole.loss.double().mean().item(), rel=1e-12)
    assert metrics["evaluated_clients"] == 10 and metrics["avg_acc_lo"] == metrics["avg_acc"] == metrics["avg_acc_hi"]


#: Built-ins whose clients' models are made all at once (FedAvg-FT fine-tunes every client in one call).
ALL_AT_ONCE = {"fedavg_ft"}


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_params_of_is_the_rows_of_client_params_without_building_all_of_them(ctx, name, monkeypatch):
    from dataclasses import replace

    algo = get_algorithm(name)(replace(ctx, held_out=np.array([1, 6])))
    algo.step(1, frozenset(range(10)))
    clients = np.array([0, 1, 3, 6, 9])
    whole = algo.client_params()
    expected = whole[torch.as_tensor(clients, device=whole.device)]
    assert torch.equal(algo.params_of(clients), expected)  # the same numbers, bit for bit
    if name not in ALL_AT_ONCE:  # a sample or a chunk gathers its own rows, never the [m, P] of every client
        monkeypatch.setattr(algo, "client_params", lambda: pytest.fail(f"{name}.params_of built every client's row"))
        assert torch.equal(algo.params_of(clients), expected)


def test_clients_except_is_setdiff_of_every_id():
    from wirelessfl.algorithms.base import clients_except

    assert clients_except(6).tolist() == [0, 1, 2, 3, 4, 5]
    assert clients_except(6, np.array([4, 1]), np.array([1, 5])).tolist() == [0, 2, 3]
    assert clients_except(6, np.zeros(0, dtype=np.int64)).dtype == np.int64
    rng = np.random.default_rng(0)
    held, spent = rng.choice(1000, 30, replace=False), rng.choice(1000, 70, replace=False)
    assert np.array_equal(clients_except(1000, held, spent), np.setdiff1d(np.setdiff1d(np.arange(1000), held), spent))
