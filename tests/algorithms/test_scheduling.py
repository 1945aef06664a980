"""Client scheduling (wirelessfl/algorithms/scheduling.py, docs/levers.md): exactness at k = all, each policy
against a hand computation, and random / round-robin scheduling's update-success probability under Rayleigh
fading against Yang et al.'s closed form on a single-cell drop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.algorithms.scheduling import POLICIES, Scheduler, Scheduling, round_robin_group
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.seam import CommPlan, Stream
from wirelessfl.run.seeds import network_rng
from wirelessfl.simulate import simulate

from levers_cell import CELL, curve_frame, lever_scenario

SCENARIO = lever_scenario("scheduling")


def test_every_policy_with_k_all_gives_todays_trace_exactly():
    algorithms = [{"name": "fedavg", "label": "today"}] + [
        {"name": "fedavg", "label": policy, "training": {"scheduling": {"policy": policy, "k": 6}}} for policy in POLICIES
    ]
    result = simulate(parse_scenario({**SCENARIO, "algorithms": algorithms}))
    today = curve_frame(result.trace, "today")
    for policy in POLICIES:
        pd.testing.assert_frame_equal(curve_frame(result.trace, policy), today, check_exact=True)
    # the channel-aware curves trained per profile (their units name it), the others once: both reach today's trace
    assert sorted(key for key in result.runtime if key.endswith("__cell")) == [
        "seed0__best_channel__cell", "seed0__proportional_fair__cell",
    ]


def test_random_k_of_n_is_participation_k_over_n_exactly():
    wired = {**SCENARIO, "networks": [{"preset": "wired"}]}
    scheduled = simulate(parse_scenario({
        **wired, "algorithms": [{"name": "fedavg", "training": {"scheduling": {"policy": "random", "k": 2}}}],
    }))
    sampled = simulate(parse_scenario({
        **wired, "training": {**wired["training"], "participation": 2 / 6}, "algorithms": [{"name": "fedavg"}],
    }))
    pd.testing.assert_frame_equal(curve_frame(scheduled.trace, "fedavg"), curve_frame(sampled.trace, "fedavg"), check_exact=True)
    assert (scheduled.trace["participants"].iloc[1:] == 2).all()


def test_a_channel_aware_policy_schedules_k_and_trains_per_profile():
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg", "training": {"scheduling": {"policy": "best_channel", "k": 2}}}]}
    result = simulate(parse_scenario(doc))
    rounds = result.trace[result.trace["round"] > 0]
    assert (rounds["participants"] == 2).all() and (rounds["aggregated"] == 2).all()
    assert not result.replayed


@pytest.mark.parametrize(("n", "k"), [(6, 2), (7, 3), (5, 5), (4, 1)])
def test_round_robin_visits_every_client_once_per_ceil_n_over_k_rounds(n, k):
    pool = np.arange(n)
    scheduler = Scheduler(Scheduling("round_robin", k), n, sample=None)
    cycle = math.ceil(n / k)
    for start in (1, 1 + cycle, 1 + 5 * cycle):
        visits = np.concatenate([scheduler.select(r, pool, pool) for r in range(start, start + cycle)])
        assert sorted(visits.tolist()) == list(range(n))
        assert all(len(scheduler.select(r, pool, pool)) <= k for r in range(start, start + cycle))
    assert round_robin_group(pool, k, 1).tolist() == list(range(min(k, n)))


def _drop(num_clients: int, seed: int = 3) -> NetworkModel:
    profile = SystemProfile.from_dict(CELL)
    return NetworkModel(profile, num_clients, np.random.default_rng(seed))


def test_best_channel_picks_the_k_largest_snrs_by_hand():
    network = _drop(10)
    pool = np.arange(10)
    scheduler = Scheduler(Scheduling("best_channel", 4), 10, sample=None,
                          channel=lambda r: network.uplink_channel(network_rng(0, "cell", r)))
    for r in (1, 2, 7):
        snr = network.uplink_channel(network_rng(0, "cell", r)).snr
        by_hand = sorted(sorted(range(10), key=lambda c: snr[c], reverse=True)[:4])
        assert scheduler.select(r, pool, pool).tolist() == by_hand
        available = np.array([0, 2, 3, 5, 8, 9])
        by_hand = sorted(sorted(available.tolist(), key=lambda c: snr[c], reverse=True)[:4])
        assert scheduler.select(r, available, pool).tolist() == by_hand


def test_proportional_fair_picks_the_k_largest_rate_over_mean_rate():
    network = _drop(10)
    pool = np.arange(10)
    scheduler = Scheduler(Scheduling("proportional_fair", 3), 10, sample=None,
                          channel=lambda r: network.uplink_channel(network_rng(0, "cell", r)))
    state = network.uplink_channel(network_rng(0, "cell", 4))
    ratio = [state.rate_bps[c] / state.mean_rate_bps[c] for c in range(10)]
    assert scheduler.select(4, pool, pool).tolist() == sorted(sorted(range(10), key=lambda c: ratio[c], reverse=True)[:3])


def test_age_schedules_the_oldest_uploads_first():
    scheduler = Scheduler(Scheduling("age", 2), 5, sample=None)
    pool = np.arange(5)
    assert scheduler.select(1, pool, pool).tolist() == [0, 1]  # all equally old: the lower ids
    scheduler.record(1, frozenset({0}))  # client 1's upload was lost
    assert scheduler.select(2, pool, pool).tolist() == [1, 2]
    scheduler.record(2, frozenset({1, 2}))
    assert scheduler.select(3, pool, pool).tolist() == [3, 4]
    scheduler.record(3, frozenset({3, 4}))
    assert scheduler.select(4, pool, pool).tolist() == [0, 1]  # 0 uploaded in round 1, 1 in round 2


@pytest.mark.parametrize("duplex", ["fdd", "tdd"])
def test_the_uplink_channel_is_the_one_the_rounds_upload_sees(duplex):
    """Held fading: the measured rate is the rate of the round's upload (airtime = bits / rate)."""
    profile = SystemProfile.from_dict({**CELL, "duplex": duplex, "schedule": "pipelined"} if duplex == "tdd" else CELL)
    network = NetworkModel(profile, 6, np.random.default_rng(1))
    plan = CommPlan((Stream(1.0, frozenset(range(6))),), {c: 1.0 for c in range(6)}, {c: 1.0 for c in range(6)}, model_params=1000)
    bits = network.bits(plan)[1] / 6
    for r in (1, 2):
        state = network.uplink_channel(network_rng(5, "cell", r))
        timing = network.time_round(plan, network_rng(5, "cell", r))
        np.testing.assert_allclose([bits / timing.airtime[c] for c in range(6)], state.rate_bps, rtol=1e-12)


def test_success_probability_of_random_and_round_robin_matches_the_closed_form():
    """Yang et al. (TCOM 2020): a scheduled update succeeds when its SINR exceeds θ. On one cell without
    interfering cells, SINR_i = γ̄_i h with h ~ Exp(1) (Rayleigh), so a scheduled client i succeeds with
    probability exp(-θ / γ̄_i); random and round-robin scheduling schedule every client equally often, so the
    fraction of scheduled updates that succeed is (1/N) Σ_i exp(-θ / γ̄_i). Measured over 3,000 rounds of the
    network's own uplink channel draws (k = 5 of N = 20), within 2%."""
    n, k, rounds = 20, 5, 3000
    network = _drop(n, seed=11)
    mean_snr = np.asarray(network.uplink_channel(network_rng(0, "cell", 1)).mean_snr)
    theta = float(np.median(mean_snr))
    closed_form = float(np.mean(np.exp(-theta / mean_snr)))
    assert 0.2 < closed_form < 0.8
    pool = np.arange(n)
    draws = np.random.default_rng(9)
    for policy in ("random", "round_robin"):
        scheduler = Scheduler(Scheduling(policy, k), n, sample=lambda r, c, a: np.sort(draws.choice(a, c, replace=False)))
        success = scheduled = 0
        for r in range(1, rounds + 1):
            chosen = scheduler.select(r, pool, pool)
            snr = np.asarray(network.uplink_channel(network_rng(0, "cell", r)).snr)[chosen]
            success += int((snr > theta).sum())
            scheduled += len(chosen)
        assert scheduled == k * rounds
        assert success / scheduled == pytest.approx(closed_form, rel=0.02)


def test_k_larger_than_the_clients_is_one_line():
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}], "training": {"scheduling": {"policy": "random", "k": 7}}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: training.scheduling.k: 7 is more than the clients (data.clients = 6); at most 6"
    )


def test_a_channel_aware_policy_without_a_channel_is_one_line():
    doc = {
        **SCENARIO, "networks": [CELL, {"preset": "wired"}],
        "algorithms": [{"name": "fedavg", "training": {"scheduling": {"policy": "best_channel", "k": 2}}}],
    }
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: algorithms[0].training.scheduling.policy: best_channel reads the uplink channel, which networks[1] "
        "('wired') does not model (it needs physical: and backend: des); allowed there: random, round_robin, age"
    )


def test_an_unknown_policy_is_one_line_naming_the_allowed_ones():
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}], "training": {"scheduling": {"policy": "fastest", "k": 2}}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: training.scheduling.policy: Input should be 'random', 'round_robin', 'best_channel', "
        "'proportional_fair' or 'age' (got 'fastest')"
    )


def test_a_method_without_scheduling_refuses_it_in_one_line():
    doc = {**SCENARIO, "networks": [{"preset": "wired"}],
           "algorithms": [{"name": "fedper", "training": {"scheduling": {"policy": "random", "k": 2}}}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: algorithms[0]: fedper: training.scheduling does not apply to fedper; it applies to fedavg, fedavg_ft, oracle"
    )
