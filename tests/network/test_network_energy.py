"""Device energy on the network side: parameters, one round's activities, batteries, the timeline's segments."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.energy import Battery, EnergyProfile, round_activity, segments
from wirelessfl.seam import CommPlan, RoundTiming, Stream

PARAMS = {"kappa": 1e-28, "cycles_per_sample": 1e4, "cpu_hz": 1e9, "p_tx_w": 2.0, "p_rx_w": 1.0, "p_idle_w": 0.25}
JOULES_PER_SAMPLE = 1e-28 * 1e4 * 1e9**2


def wired(**fields) -> SystemProfile:
    return SystemProfile(**{"name": "w", "rho": 1.0, "t_min": 1.0, **fields})


def test_a_phased_round_costs_what_the_formula_says():
    """3 clients, one broadcast (1 T_dl), compute 1, serial uploads of 1: round 5; client i uploads in [2 + i, 3 + i]."""
    network = NetworkModel(wired(), 3, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast(range(3)), np.random.default_rng(1))
    device = EnergyProfile(**PARAMS, seconds_per_unit=0.5).per_device(3)
    activity = round_activity(timing, {0: 100.0, 1: 200.0, 2: 0.0}, device)
    assert timing.t_end == 5.0
    np.testing.assert_array_equal(activity.receive, [1, 1, 1])
    np.testing.assert_array_equal(activity.wait, [0, 1, 2])
    np.testing.assert_array_equal(activity.idle, [2, 1, 0])
    expected = [
        JOULES_PER_SAMPLE * samples + 0.5 * (1.0 * 1 + 2.0 * 1 + 0.25 * (5 - 3))
        for samples in (100.0, 200.0, 0.0)
    ]
    np.testing.assert_allclose(activity.energy_j, expected, rtol=1e-12)


def test_a_client_sent_m_streams_pays_m_receptions_and_others_wait_idle():
    network = NetworkModel(wired(schedule="pipelined"), 3, np.random.default_rng(0))
    plan = CommPlan(
        streams=tuple(Stream(1.0, {0}, f"to-0-{k}") for k in range(3)) + (Stream(1.0, {1, 2}, "shared"),),
        uplink={0: 1.0, 1: 1.0, 2: 0.0},
        work={0: 1.0, 1: 1.0, 2: 1.0},
    )
    timing = network.time_round(plan, np.random.default_rng(1))
    assert timing.receptions[0] == ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0))
    assert timing.receptions[1] == ((3.0, 4.0),)
    activity = round_activity(timing, {}, EnergyProfile(**PARAMS).per_device(3))
    np.testing.assert_array_equal(activity.streams, [3, 1, 1])
    np.testing.assert_array_equal(activity.receive, [3, 1, 1])
    np.testing.assert_array_equal(activity.upload, [1, 1, 0])
    total = activity.receive + activity.compute + activity.wait + activity.upload + activity.idle
    np.testing.assert_allclose(total, timing.t_end)


def test_only_participants_are_charged_and_per_group_values_apply():
    network = NetworkModel(wired(), 4, np.random.default_rng(0))
    plan = CommPlan.broadcast([1, 3])
    timing = network.time_round(plan, np.random.default_rng(1))
    energy = EnergyProfile(**{**PARAMS, "p_rx_w": [1.0, 3.0]})
    activity = round_activity(timing, {}, energy.per_device(4))
    assert activity.clients.tolist() == [1, 3]
    assert activity.rx_j.tolist() == [1.0, 3.0]  # client 1 is in group 0, client 3 in group 1


def test_a_deadline_cuts_computation_and_its_energy_at_the_round_end():
    network = NetworkModel(wired(t_min=(1.0, 4.0), deadline=3.0), 2, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast([0, 1]), np.random.default_rng(1))
    activity = round_activity(timing, {0: 10.0, 1: 10.0}, EnergyProfile(**PARAMS).per_device(2))
    assert timing.t_end == 3.0 and timing.arrived == {0}
    assert activity.compute.tolist() == [1.0, 2.0]  # client 1 computes from 1 until the deadline at 3, half of its 4
    np.testing.assert_allclose(activity.compute_j, [10 * JOULES_PER_SAMPLE, 10 * JOULES_PER_SAMPLE * 2 / 4])


def test_a_battery_stops_a_device_exactly_when_its_budget_is_spent():
    """Client 0's round: rx [0,1] 1 W, compute [1,2] (0 J), upload [2,3] 2 W, idle [3,4] 0.25 W = 3.25 J a round."""
    network = NetworkModel(wired(), 2, np.random.default_rng(0))
    device = EnergyProfile(**PARAMS, budget_j=[5.0, 100.0]).per_device(2)
    battery = Battery(device)
    plan = CommPlan.broadcast([0, 1])
    timing = network.time_round(plan, np.random.default_rng(1))
    assert timing.t_end == 4.0
    first, arrived = battery.settle(1, timing, round_activity(timing, {}, device))
    assert first.energy_j[0] == 3.25 and arrived == {0, 1} and battery.depleted.tolist() == []
    second, arrived = battery.settle(2, timing, round_activity(timing, {}, device))
    # 1.75 J left: 1 J receiving, compute free, 0.75 J of the upload (2 W) -> dies at 2.375, before its upload lands
    assert second.energy_j[0] == pytest.approx(1.75) and second.tx_j[0] == pytest.approx(0.75)
    assert arrived == {1}
    assert battery.spent[0] == 5.0 and battery.depleted.tolist() == [0] and battery.depleted_round.tolist() == [2, 0]


def test_a_device_whose_budget_runs_out_after_its_upload_still_arrives():
    network = NetworkModel(wired(), 2, np.random.default_rng(0))
    device = EnergyProfile(**PARAMS, budget_j=[3.1, 100.0]).per_device(2)  # 3 J by the landing at 3, 0.1 J of idle left
    timing = network.time_round(CommPlan.broadcast([0, 1]), np.random.default_rng(1))
    battery = Battery(device)
    charged, arrived = battery.settle(1, timing, round_activity(timing, {}, device))
    assert arrived == {0, 1} and charged.energy_j[0] == pytest.approx(3.1) and battery.depleted.tolist() == [0]


def test_segments_cover_the_round_in_order():
    pieces = segments(((0.0, 1.0), (2.0, 3.0)), 3.0, 4.5, 6.0, 2.0, 10.0)
    assert [k for k, _, _ in pieces] == ["receive", "idle", "receive", "compute", "wait", "upload", "idle"]
    assert pieces[5] == ("upload", 6.0, 8.0)
    assert pieces[0][1] == 0.0 and pieces[-1][2] == 10.0
    assert all(a[2] == b[1] for a, b in zip(pieces, pieces[1:]))


def test_the_timing_keeps_its_activities_through_pickle_and_old_timings_have_none():
    network = NetworkModel(wired(), 2, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast([0, 1]), np.random.default_rng(1))
    assert pickle.loads(pickle.dumps(timing)) == timing and timing.has_activities
    old = RoundTiming({0: 1.0}, {0: 2.0}, {0: 3.0}, frozenset({0}), 3.0)
    assert not old.has_activities
    with pytest.raises(ValueError, match="no per-client activities"):
        round_activity(old, {}, EnergyProfile().per_device(1))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"p_tx_w": -1}, "energy.p_tx_w must be a finite number >= 0, got -1"),
        ({"kappa": 0}, "energy.kappa must be a finite number > 0, got 0"),
        ({"budget_j": [1.0, -2.0]}, "energy.budget_j[1] must be a finite number > 0, got -2"),
        ({"cpu_hz": [1e9, 2e9], "budget_j": [1.0, 2.0, 3.0]}, "energy: every list must have one value per device group, the same number; got cpu_hz 2, budget_j 3"),
        ({"p_rx_w": "high"}, "energy.p_rx_w must be a number, got 'high'"),
        ({"watts": 1}, "energy: unknown key(s) watts; allowed: kappa, cycles_per_sample, cpu_hz, p_tx_w, p_rx_w, p_idle_w, budget_j, seconds_per_unit"),
    ],
)
def test_bad_energy_settings_are_one_line_naming_the_field(settings, message):
    with pytest.raises(ValueError) as error:
        EnergyProfile.from_dict(settings)
    assert str(error.value) == message


def test_energy_lists_must_fit_the_profiles_device_groups():
    with pytest.raises(ValueError, match=r"^energy.budget_j lists 3 values but t_min/mu give 2 device groups"):
        EnergyProfile(budget_j=[1.0, 2.0, 3.0]).check_groups(2)
    EnergyProfile(budget_j=[1.0, 2.0]).check_groups(2)
    EnergyProfile(budget_j=[1.0, 2.0, 3.0]).check_groups(1)
    assert np.isinf(EnergyProfile().per_device(3).budget_j).all()


def test_the_defaults_are_the_cited_values():
    """Yang et al. 2021 (kappa, cycles, f) and Huang et al. 2012's LTE model at their median rates."""
    energy = EnergyProfile()
    assert (energy.kappa, energy.cycles_per_sample, energy.cpu_hz) == (1e-28, 2e4, 2e9)
    assert energy.p_tx_w == pytest.approx(1.28804 + 0.43839 * 6, abs=1e-3)
    assert energy.p_rx_w == pytest.approx(1.28804 + 0.05197 * 13, abs=1e-3)
    assert (energy.p_idle_w, energy.budget_j, energy.seconds_per_unit) == (1.060, None, 1.0)
    with pytest.raises(ValueError, match=r"^energy.p_tx_w must be at most 1000 \("):
        EnergyProfile(p_tx_w=1500)
    with pytest.raises(ValueError, match=r"^energy.p_rx_w must be at most 1000 \("):
        EnergyProfile(p_rx_w=1500)


def test_half_a_model_is_received_for_half_the_time_and_a_computation_without_duration_is_paid_whole():
    network = NetworkModel(wired(t_min=0.0), 2, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast([0, 1], payload=0.5, uplink=0.25), np.random.default_rng(1))
    activity = round_activity(timing, {0: 10.0, 1: 0.0}, EnergyProfile(**PARAMS, seconds_per_unit=2.0).per_device(2))
    assert activity.receive.tolist() == [0.5, 0.5] and activity.compute.tolist() == [0.0, 0.0]
    np.testing.assert_allclose(activity.rx_j, [1.0, 1.0])  # 1 W x 0.5 x 2 s
    np.testing.assert_allclose(activity.tx_j, [1.0, 1.0])  # 2 W x 0.25 x 2 s
    np.testing.assert_allclose(activity.compute_j, [10 * JOULES_PER_SAMPLE, 0.0])


def test_a_battery_runs_out_at_the_right_moment_in_seconds_and_during_an_instant_computation():
    network = NetworkModel(wired(t_min=0.0), 1, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast([0]), np.random.default_rng(1))  # rx [0,1], upload [1,2]
    device = EnergyProfile(**PARAMS, budget_j=1.5, seconds_per_unit=0.5).per_device(1)
    battery = Battery(device)
    charged, arrived = battery.settle(1, timing, round_activity(timing, {}, device))
    # 0.5 J receiving (1 W x 1 x 0.5 s); 1 J left = 1 s of sending at 2 W = 2 units of a 1-unit upload: it lands
    assert arrived == {0} and charged.energy_j[0] == pytest.approx(1.5) and battery.depleted_round.tolist() == [1]
    device = EnergyProfile(**PARAMS, budget_j=0.75, seconds_per_unit=0.5).per_device(1)
    battery = Battery(device)
    charged, arrived = battery.settle(1, timing, round_activity(timing, {}, device))
    assert arrived == frozenset() and charged.tx_j[0] == pytest.approx(0.25)  # dies a quarter into its upload
    big = EnergyProfile(**{**PARAMS, "cycles_per_sample": 1e12}, budget_j=0.1).per_device(1)  # 1e-4 x 1e12 J: far above
    battery = Battery(big)
    charged, arrived = battery.settle(1, timing, round_activity(timing, {0: 1.0}, big))
    assert arrived == frozenset() and charged.compute_j[0] == pytest.approx(0.1) and charged.rx_j[0] == 0.0


def test_segments_without_retransmissions_and_split_join_round_trip():
    from wirelessfl.network.energy import join, rounds_activity, split

    assert [k for k, _, _ in segments(((0.0, 1.0),), 1.0, 2.0, 2.0, 1.0, 4.0)] == ["receive", "compute", "upload", "idle"]
    network = NetworkModel(wired(), 3, np.random.default_rng(0))
    timings = [network.time_round(CommPlan.broadcast(ids), np.random.default_rng(1)) for ids in ([0, 1], [2], [0, 1, 2])]
    device = EnergyProfile(**PARAMS).per_device(3)
    flat, counts = rounds_activity(timings, [{}, {}, {}], device)
    parts = split(flat, counts)
    assert counts.tolist() == [2, 1, 3] and [p.clients.tolist() for p in parts] == [[0, 1], [2], [0, 1, 2]]
    for part, timing in zip(parts, timings):
        np.testing.assert_array_equal(part.energy_j, round_activity(timing, {}, device).energy_j)
    np.testing.assert_array_equal(join(parts).energy_j, flat.energy_j)


@pytest.mark.parametrize("schedule", ["phased", "pipelined"])
def test_on_a_shared_uplink_an_upload_is_on_the_air_for_its_turns_only(schedule):
    """An upload starts when it may and lands later than alone, but transmits only its duration on the whole
    carrier: with every upload ready at once (phased), the carrier is busy from then until the last landing and
    the airtimes add up to exactly that span (processor sharing conserves work)."""
    from wirelessfl.network import PhysicalChannel

    channel = PhysicalChannel(fading="none", uplink="shared", shadowing=False)
    profile = SystemProfile(name="shared", physical=channel, t_min=(0.01, 0.02, 0.03), schedule=schedule)
    network = NetworkModel(profile, 3, np.random.default_rng(0))
    plan = CommPlan.broadcast(range(3), model_params=100_000)
    timing = network.time_round(plan, np.random.default_rng(1))
    may_start = {c: max(timing.t_computed.values()) if schedule == "phased" else timing.t_computed[c] for c in range(3)}
    for c in range(3):
        assert timing.t_upload_start[c] == may_start[c]
        assert 0 < timing.airtime[c] <= timing.t_uploaded[c] - may_start[c] + 1e-12
    last = max(timing.t_uploaded.values())
    if schedule == "phased":
        assert sum(timing.airtime.values()) == pytest.approx(last - may_start[0])
        assert min(timing.airtime[c] for c in range(3)) < min(timing.t_uploaded[c] - may_start[c] for c in range(3))
    else:
        assert sum(timing.airtime.values()) <= last - min(may_start.values()) + 1e-12
    activity = round_activity(timing, {}, EnergyProfile(**PARAMS).per_device(3))
    total = activity.receive + activity.compute + activity.wait + activity.upload + activity.idle
    np.testing.assert_allclose(total, timing.t_end)
    assert (activity.upload > 0).all()


def test_a_battery_pays_a_computation_at_its_power_before_dying_in_the_upload():
    """Round: rx [0,1], compute [1,2], upload [2,3] on one client; seconds_per_unit 0.5."""
    network = NetworkModel(wired(), 1, np.random.default_rng(0))
    timing = network.time_round(CommPlan.broadcast([0]), np.random.default_rng(1))
    samples = {0: 0.4 / JOULES_PER_SAMPLE}  # 0.4 J of computation over 0.5 s
    device = EnergyProfile(**PARAMS, budget_j=1.4, seconds_per_unit=0.5).per_device(1)
    battery = Battery(device)
    charged, arrived = battery.settle(1, timing, round_activity(timing, samples, device))
    # 0.5 J receiving + 0.4 J computing leave 0.5 J: half of the 1 J upload
    assert charged.compute_j[0] == pytest.approx(0.4) and charged.tx_j[0] == pytest.approx(0.5)
    assert arrived == frozenset()
