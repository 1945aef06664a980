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
from wirelessfl.seam import CommPlan, Stream, UplinkChannel
from wirelessfl.run.seeds import network_rng, static_rng
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
        "seed0__best_channel__cell", "seed0__importance__cell", "seed0__proportional_fair__cell",
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


def _fixed_rates(rates_by_round: dict[int, list[float]]):
    """A channel whose instantaneous rates are given per round (the SINRs and means do not matter to importance)."""
    def channel(round: int) -> UplinkChannel:
        rates = rates_by_round[round]
        return UplinkChannel(snr=rates, rate_bps=rates, mean_snr=rates, mean_rate_bps=rates)
    return channel


def test_importance_ranks_by_last_update_norm_times_rate_unheard_clients_first_by_hand():
    """Amiri et al.'s update-aware score ||Δ_i|| · R_i(r) on the last received norms; clients never heard first."""
    steady = [1.0, 2.0, 3.0, 4.0, 5.0]
    channel = _fixed_rates({1: steady, 2: steady, 3: steady, 4: steady, 5: [0.1, 1.0, 1.0, 10.0, 1.0]})
    scheduler = Scheduler(Scheduling("importance", 2), 5, sample=None, channel=channel)
    pool = np.arange(5)
    assert scheduler.select(1, pool, pool).tolist() == [3, 4]  # nobody heard yet: the two best rates
    scheduler.record(1, frozenset({3, 4}), {3: 1.0, 4: 0.1})
    assert scheduler.select(2, pool, pool).tolist() == [1, 2]  # the unheard 0, 1, 2 before any norm, by rate
    scheduler.record(2, frozenset({1}), {1: 2.0, 2: 9.0})  # client 2's upload was lost: its norm is not known
    assert scheduler.select(3, pool, pool).tolist() == [0, 2]
    scheduler.record(3, frozenset({0, 2}), {0: 5.0, 2: 0.5})
    # scores 5·1 = 5, 2·2 = 4, 0.5·3 = 1.5, 1·4 = 4, 0.1·5 = 0.5: client 0, then the tie 1 / 3 to the lower id
    assert scheduler.select(4, pool, pool).tolist() == [0, 1]
    # the instantaneous rate moves the ranking: 0.5, 2, 0.5, 10, 0.1
    assert scheduler.select(5, pool, pool).tolist() == [1, 3]
    assert scheduler.select(5, np.array([0, 2, 4]), pool).tolist() == [0, 2]  # among the available only
    state = scheduler.state_dict()
    np.testing.assert_array_equal(state["norms"], [5.0, 2.0, 0.5, 1.0, 0.1])
    again = Scheduler(Scheduling("importance", 2), 5, sample=None, channel=channel)
    again.load_state_dict(state)
    assert again.select(5, pool, pool).tolist() == [1, 3]


def test_importance_hears_every_client_first_through_simulate():
    """Six clients, k = 2, no losses: rounds 1-3 schedule the unheard clients by the round's rate, so every
    client uploads once in the first three rounds, and round 1's pair is the two best rates of that round."""
    doc = {**SCENARIO, "rounds": 4, "algorithms": [{"name": "fedavg", "training": {"scheduling": {"policy": "importance", "k": 2}}}]}
    scenario = parse_scenario(doc)
    result = simulate(scenario)
    rows = result.client_rounds
    chosen = {r: sorted(rows[rows["round"] == r]["client"].tolist()) for r in range(1, 5)}
    assert all(len(chosen[r]) == 2 for r in chosen)
    assert sorted(chosen[1] + chosen[2] + chosen[3]) == list(range(6))
    profile = scenario.profiles()[0]
    network = NetworkModel(profile, 6, static_rng(0, profile))  # the unit's own drop, and its round-1 channel
    rates = network.uplink_channel(network_rng(0, "cell", 1)).rate_bps
    assert chosen[1] == sorted(sorted(range(6), key=lambda c: rates[c], reverse=True)[:2])


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
    """Yang et al. (TCOM 2020): a scheduled update succeeds when its SINR exceeds θ (``physical.ul_sinr_threshold_db``).
    On one cell without interfering cells, SINR_i = γ̄_i h with h ~ Exp(1) (Rayleigh), so a scheduled client i
    succeeds with probability exp(-θ / γ̄_i). Random and round-robin scheduling (N/k whole groups) schedule each
    client in a fraction k/N of the rounds, so a client's update arrives in a round with probability
    U = (k/N) · (1/N) Σ_i exp(-θ / γ̄_i) averaged over the clients. Through the network's own rounds
    (``time_round``, 1,000 rounds, k = 10 of N = 20): who arrives is exactly who was scheduled with SINR ≥ θ,
    and the measured frequency is U within 4% (about 3 standard errors of 5,000 arrivals' frequency)."""
    n, k, rounds = 20, 10, 1000
    probe = _drop(n, seed=11)
    mean_snr = np.asarray(probe.uplink_channel(network_rng(0, "cell", 1)).mean_snr)
    theta = float(np.median(mean_snr))
    closed_form = k / n * float(np.mean(np.exp(-theta / mean_snr)))
    assert 0.1 < closed_form < 0.4
    profile = SystemProfile.from_dict({**CELL, "channels": n, "physical": {**CELL["physical"], "ul_sinr_threshold_db": 10 * math.log10(theta)}})
    network = NetworkModel(profile, n, np.random.default_rng(11))
    np.testing.assert_array_equal(network.uplink_channel(network_rng(0, "cell", 1)).mean_snr, mean_snr)  # the same drop
    pool = np.arange(n)
    draws = np.random.default_rng(9)
    for policy in ("random", "round_robin"):
        scheduler = Scheduler(Scheduling(policy, k), n, sample=lambda r, c, a: np.sort(draws.choice(a, c, replace=False)))
        arrivals = 0
        for r in range(1, rounds + 1):
            chosen = scheduler.select(r, pool, pool).tolist()
            plan = CommPlan((Stream(1.0, frozenset(chosen)),), {c: 1.0 for c in chosen}, {c: 1.0 for c in chosen}, model_params=1000)
            arrived = network.time_round(plan, network_rng(0, "cell", r)).arrived
            snr = network.uplink_channel(network_rng(0, "cell", r)).snr
            assert arrived == {c for c in chosen if snr[c] >= theta}
            arrivals += len(arrived)
        assert arrivals / (n * rounds) == pytest.approx(closed_form, rel=0.04)


def test_without_a_threshold_a_weak_upload_is_slow_not_lost_and_with_one_it_is_lost_and_off_the_air():
    plan = CommPlan((Stream(1.0, frozenset(range(6))),), {c: 1.0 for c in range(6)}, {c: 1.0 for c in range(6)}, model_params=1000)
    plain = NetworkModel(SystemProfile.from_dict(CELL), 6, np.random.default_rng(2))
    snr = np.asarray(plain.uplink_channel(network_rng(1, "cell", 1)).snr)
    theta_db = float(10 * np.log10(np.median(snr)))
    gated = NetworkModel(SystemProfile.from_dict({**CELL, "physical": {**CELL["physical"], "ul_sinr_threshold_db": theta_db}}), 6,
                         np.random.default_rng(2))
    before, after = plain.time_round(plan, network_rng(1, "cell", 1)), gated.time_round(plan, network_rng(1, "cell", 1))
    lost = {c for c in range(6) if 10 * np.log10(snr[c]) < theta_db}
    assert before.arrived == set(range(6)) and after.arrived == set(range(6)) - lost and len(lost) == 3
    for c in range(6):
        assert after.airtime[c] == (0.0 if c in lost else before.airtime[c])
        assert after.t_uploaded[c] == (math.inf if c in lost else before.t_uploaded[c])  # six channels: no queue
    assert gated.uplink_channel(network_rng(1, "cell", 1)).rate_bps == tuple(
        0.0 if c in lost else rate for c, rate in enumerate(plain.uplink_channel(network_rng(1, "cell", 1)).rate_bps)
    )


@pytest.mark.parametrize(("physical", "message"), [
    ({"ul_sinr_threshold_db": 5, "coherence_s": 0.01},
     "physical.ul_sinr_threshold_db needs fading held for the round (coherence_s and ue_speed_mps unset) and link shannon "
     "or truncated_shannon (nr has its own outage), got block fading"),
    ({"ul_sinr_threshold_db": float("inf")},
     "physical.ul_sinr_threshold_db must be a finite number of dB (leave it out for no threshold), got inf"),
])
def test_a_bad_sinr_threshold_is_one_line(physical, message):
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}], "networks": [{**CELL, "physical": {**CELL["physical"], **physical}}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == f"scenario: networks[0]: {message}"


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
        "'proportional_fair', 'age' or 'importance' (got 'fastest')"
    )


def test_a_method_without_scheduling_refuses_it_in_one_line():
    doc = {**SCENARIO, "networks": [{"preset": "wired"}],
           "algorithms": [{"name": "scaffold", "training": {"scheduling": {"policy": "random", "k": 2}}}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: algorithms[0]: scaffold: training.scheduling does not apply to scaffold; it applies to fedavg, fedavg_ft, fedper, fedprox, oracle, ucfl"
    )
