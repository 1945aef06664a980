"""Closed forms by Monte Carlo, engine equivalence on shared draws, orderings per draw, seeds."""

import math

import numpy as np
import pytest

from wirelessfl.network import PRESETS, NetworkModel, SystemProfile, analytic_round_time
from wirelessfl.network.compute import draw_compute_times, expected_max_compute, harmonic_number
from wirelessfl.network.rounds import phased_closed_form, pipelined_closed_form, simulate
from wirelessfl.seam import CommPlan, Stream


def grouped_plan(num_clients: int, streams: int, rng=None, uplink=None) -> CommPlan:
    """``streams`` multicast groups; random group sizes and upload payloads when ``rng`` is given."""
    if rng is None:
        groups = np.array_split(np.arange(num_clients), streams)
    else:
        labels = np.concatenate([np.arange(streams), rng.integers(0, streams, num_clients - streams)])
        groups = [np.flatnonzero(labels == g) for g in range(streams)]
    payloads = uplink if uplink is not None else dict.fromkeys(range(num_clients), 1.0)
    return CommPlan(
        streams=tuple(Stream(1.0, g.tolist(), f"g{i}") for i, g in enumerate(groups)),
        uplink=payloads,
        work=dict.fromkeys(range(num_clients), 1.0),
    )


def overlapping_plan(num_clients: int, rng) -> CommPlan:
    """Streams to random overlapping groups (some clients in several, some in none),
    payloads 0.5 or 1 so that stream ends and compute ends tie exactly, random uploads."""
    streams = []
    for k in range(int(rng.integers(1, 6))):
        members = np.flatnonzero(rng.random(num_clients) < 0.4)
        members = members if len(members) else rng.integers(0, num_clients, 1)
        streams.append(Stream(float(rng.choice([0.5, 1.0])), members.tolist(), f"s{k}"))
    return CommPlan(
        streams=tuple(streams),
        uplink={c: float(rng.choice([0.0, 0.5, 1.0, 2.0])) for c in range(num_clients)},
        work=dict.fromkeys(range(num_clients), 1.0),
    )


def test_harmonic_numbers():
    assert harmonic_number(1) == 1.0
    assert harmonic_number(4) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4, abs=1e-15)


def test_mean_of_max_of_shifted_exponentials_is_t_min_plus_harmonic_over_mu():
    """E[max of m] = T_min + H_m/mu; 20,000 samples, std of the max ~0.6 -> SE ~0.004, tolerance 0.02."""
    m, t_min, mu = 10, 1.0, 2.0
    rng = np.random.default_rng(7)
    maxima = [draw_compute_times(np.full(m, t_min), np.full(m, mu), rng).max() for _ in range(20_000)]
    assert abs(np.mean(maxima) - (t_min + harmonic_number(m) / mu)) < 0.02


def test_expected_max_of_unequal_clients_by_quadrature_matches_monte_carlo():
    t_min = np.array([0.5, 0.5, 1.0, 1.0, 2.0])
    mu = np.array([1.0, 1.0, 4.0, math.inf, 0.5])
    rng = np.random.default_rng(3)
    maxima = [draw_compute_times(t_min, mu, rng).max() for _ in range(20_000)]
    # std of the max < 2.1 here -> SE < 0.015; tolerance 0.06.
    assert abs(np.mean(maxima) - expected_max_compute(t_min, mu)) < 0.06
    assert expected_max_compute(np.array([1.0, 3.0]), np.array([math.inf, math.inf])) == 3.0


@pytest.mark.parametrize(
    "overrides",
    [
        {"channels": 1},
        {"channels": 20},
        {"channels": 3},
        {"channels": 1, "t_min": (0.5, 1.0), "mu": (1.0, 4.0)},
    ],
    ids=["serialized", "parallel", "three-channels", "two-groups"],
)
def test_phased_des_mean_matches_the_analytic_round_time(overrides):
    """4,000 rounds of 20 clients; round-time std < 1.4 -> SE < 0.022; tolerance 0.1."""
    profile = SystemProfile.from_dict({"preset": "slow-ul-unreliable", **overrides})
    plan = grouped_plan(20, 4)
    model = NetworkModel(profile, 20, np.random.default_rng(0))
    rng = np.random.default_rng(11)
    mean = np.mean([model.time_round(plan, rng).t_end for _ in range(4000)])
    assert abs(mean - analytic_round_time(profile, plan, 20)) < 0.1


def test_compute_scaled_by_work_des_mean_matches_the_analytic_round_time():
    """Work 0.5 / 1 / 2 / 0 scales T_min + Exp(mu) into w·T_min + Exp(mu/w), which the analytic
    side integrates by quadrature. Round-time std ~2.4 over 4,000 rounds -> SE ~0.04; tolerance 0.2."""
    profile = SystemProfile.from_dict({"preset": "slow-ul-unreliable", "scale_compute_with_work": True})
    base = grouped_plan(20, 4)
    plan = CommPlan(streams=base.streams, uplink=base.uplink, work={c: (0.5, 1.0, 2.0, 0.0)[c % 4] for c in range(20)})
    model = NetworkModel(profile, 20, np.random.default_rng(0))
    rng = np.random.default_rng(11)
    mean = np.mean([model.time_round(plan, rng).t_end for _ in range(4000)])
    analytic = analytic_round_time(profile, plan, 20)
    assert abs(mean - analytic) < 0.2
    assert abs(analytic - analytic_round_time(PRESETS["slow-ul-unreliable"], plan, 20)) > 1.0


def test_paper_numbers_for_the_slow_unreliable_preset():
    # 100 users: k·T_dl + T_min + H_100/mu + 100·rho; k=100 costs +24% at rho=4.
    one, hundred = (analytic_round_time(PRESETS["slow-ul-unreliable"], grouped_plan(100, k), 100) for k in (1, 100))
    assert one == pytest.approx(1 + 1 + harmonic_number(100) + 400, abs=1e-12)
    assert hundred / one == pytest.approx(1.243, abs=1e-3)


@pytest.mark.parametrize("channels", [1, 2, 5])
@pytest.mark.parametrize("deadline", [None, 60.0])
def test_phased_closed_form_equals_simpy_on_the_same_draws(channels, deadline):
    profile = SystemProfile(name="p", rho=2.0, t_min=(0.5, 1.0, 2.0), mu=(1.0, math.inf, 0.5), channels=channels)
    model = NetworkModel(profile, 30, np.random.default_rng(0))
    plan_rng, draw_rng = np.random.default_rng(5), np.random.default_rng(6)
    for _ in range(25):
        uplink = {c: float(plan_rng.choice([0.0, 0.5, 1.0, 2.0])) for c in range(30)}
        inputs = model.draw_round(grouped_plan(30, int(plan_rng.integers(1, 8)), plan_rng, uplink), draw_rng)
        fast = phased_closed_form(inputs, channels=channels, deadline=deadline)
        slow = simulate(inputs, schedule="phased", duplex="fdd", channels=channels, deadline=deadline, record=False)
        for name in ("t_received", "t_computed", "t_uploaded"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
        assert fast.dl_end == slow.dl_end


@pytest.mark.parametrize("duplex", ["fdd", "tdd"])
@pytest.mark.parametrize("channels", [1, 2, 5])
@pytest.mark.parametrize("deadline", [None, 4.0])
def test_pipelined_closed_form_equals_simpy_on_the_same_draws(duplex, channels, deadline):
    """Compute 1 (clients 0-9) and 2 (clients 10-19) on half- and full-model streams makes
    a client of an earlier stream finish with a lower-id client of a stream ending 1 later;
    the upload order must then follow SimPy's (stream, then id), not the id alone."""
    profile = SystemProfile(name="p", rho=1.0, t_min=(1.0, 2.0, 0.5), mu=(math.inf, math.inf, 2.0), channels=channels)
    model = NetworkModel(profile, 30, np.random.default_rng(0))
    plan_rng, draw_rng = np.random.default_rng(5), np.random.default_rng(6)
    for _ in range(40):
        inputs = model.draw_round(overlapping_plan(30, plan_rng), draw_rng)
        fast = pipelined_closed_form(inputs, duplex=duplex, channels=channels, deadline=deadline)
        slow = simulate(inputs, schedule="pipelined", duplex=duplex, channels=channels, deadline=deadline, record=False)
        for name in ("t_received", "t_computed", "t_uploaded"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
        assert fast.dl_end == slow.dl_end


@pytest.mark.parametrize("schedule, duplex", [("phased", "fdd"), ("pipelined", "fdd"), ("pipelined", "tdd")])
def test_closed_form_and_simpy_models_give_equal_round_timings(schedule, duplex):
    profile = SystemProfile.from_dict(
        {"preset": "slow-ul-unreliable", "schedule": schedule, "duplex": duplex, "deadline": 60.0}
    )
    fast = NetworkModel(profile, 40, np.random.default_rng(0))
    slow = NetworkModel(profile, 40, np.random.default_rng(0), closed_form=False)
    plan = grouped_plan(40, 5)
    for seed in range(10):
        assert fast.time_round(plan, np.random.default_rng(seed)) == slow.time_round(plan, np.random.default_rng(seed))


@pytest.mark.parametrize("channels", [1, 3])
def test_pipelined_never_slower_than_phased_and_tdd_never_faster_than_fdd_on_the_same_draws(channels):
    """150 random rounds with random grouping, unreliable nodes and equal uploads (with
    unequal uploads on several channels list-scheduling anomalies could break the first rule)."""
    models = {
        name: NetworkModel(
            SystemProfile(name=name, rho=rho, t_min=1.0, mu=1.0, schedule=schedule, duplex=duplex, channels=channels),
            30,
            np.random.default_rng(0),
        )
        for name, rho, schedule, duplex in [
            ("phased", 1.5, "phased", "fdd"),
            ("fdd", 1.5, "pipelined", "fdd"),
            ("tdd", 1.5, "pipelined", "tdd"),
        ]
    }
    plan_rng = np.random.default_rng(9)
    for seed in range(150):
        plan = grouped_plan(30, int(plan_rng.integers(1, 31)), plan_rng)
        end = {name: m.time_round(plan, np.random.default_rng(seed)).t_end for name, m in models.items()}
        assert end["fdd"] <= end["phased"]
        assert end["tdd"] >= end["fdd"]
        assert end["tdd"] <= end["phased"]


@pytest.mark.parametrize("schedule, duplex", [("phased", "fdd"), ("pipelined", "fdd"), ("pipelined", "tdd")])
def test_same_seed_same_round_timing(schedule, duplex):
    profile = SystemProfile.from_dict(
        {"preset": "slow-ul-unreliable", "schedule": schedule, "duplex": duplex, "channels": 2}
    )
    plan = grouped_plan(25, 3)
    first = NetworkModel(profile, 25, np.random.default_rng(1)).time_round(plan, np.random.default_rng(2))
    again = NetworkModel(profile, 25, np.random.default_rng(1)).time_round(plan, np.random.default_rng(2))
    other = NetworkModel(profile, 25, np.random.default_rng(1)).time_round(plan, np.random.default_rng(3))
    assert first == again
    assert first != other


@pytest.mark.parametrize(
    "overrides, draws",
    [
        ({"schedule": "pipelined", "duplex": "tdd"}, 1),
        ({"physical": {"fading": "rayleigh"}}, 3),
        ({"physical": {"fading": "rayleigh"}, "duplex": "tdd"}, 2),
        ({"physical": {"fading": "none"}}, 1),
    ],
)
def test_each_round_draws_only_from_the_passed_generator_in_the_documented_order(overrides, draws):
    """Compute exponentials, then DL gains, then UL gains under FDD: ``draws`` blocks of n
    standard exponentials from the round's generator, and nothing from numpy's global state."""
    profile = SystemProfile.from_dict({"preset": "slow-ul-unreliable", **overrides})
    model = NetworkModel(profile, 12, np.random.default_rng(0))
    _, global_keys, global_position, *_ = np.random.get_state()
    rng, replay = np.random.default_rng(8), np.random.default_rng(8)
    model.time_round(CommPlan.broadcast(range(12), model_params=1000), rng)
    replay.standard_exponential((draws, 12))
    assert rng.bit_generator.state == replay.bit_generator.state
    _, keys, position, *_ = np.random.get_state()
    assert position == global_position and np.array_equal(keys, global_keys)


def test_analytic_backend_returns_the_expectation_without_touching_the_generator():
    profile = SystemProfile.from_dict({"preset": "slow-ul-unreliable", "backend": "analytic"})
    model = NetworkModel(profile, 10, np.random.default_rng(0))
    rng = np.random.default_rng(4)
    state = rng.bit_generator.state
    timing = model.time_round(grouped_plan(10, 2), rng)
    assert rng.bit_generator.state == state
    assert timing.t_end == pytest.approx(2 + 1 + harmonic_number(10) + 40, abs=1e-12)
    assert timing.t_computed[0] == 2 + 1 + 1  # DL end + T_min + 1/mu
