"""``physical.uplink: shared``: concurrent uploaders share one carrier equally (processor sharing)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile
from wirelessfl.network.rounds import RoundInputs, phased_closed_form, pipelined_closed_form, shared_landings, simulate
from wirelessfl.seam import CommPlan


def test_three_uploads_started_together_by_hand():
    """Needs 1, 2, 3 s of the carrier: all three at 1/3 until the first is done at 3 s, the other two at 1/2
    for 1 s more of service (5 s), the last alone for its final second (6 s)."""
    np.testing.assert_allclose(shared_landings(0.0, np.array([1.0, 2.0, 3.0])), [3.0, 5.0, 6.0])


def test_a_late_joiner_slows_the_first_by_hand():
    """A needs 2 s from t = 0, B 2 s from t = 1: A alone 0-1 (1 s left), both at 1/2 from 1 to 3 (A done),
    B alone from 3 with 1 s left: lands at 4."""
    np.testing.assert_allclose(shared_landings(np.array([0.0, 1.0]), np.array([2.0, 2.0])), [3.0, 4.0])


def test_ten_simultaneous_uploads_each_get_a_tenth():
    np.testing.assert_allclose(shared_landings(5.0, np.full(10, 0.3)), np.full(10, 5.0 + 10 * 0.3))


def test_an_upload_in_outage_is_not_scheduled_and_takes_nothing_from_the_others():
    np.testing.assert_array_equal(shared_landings(0.0, np.array([1.0, math.inf, 1.0])), [2.0, math.inf, 2.0])


def _random_round(rng: np.random.Generator) -> RoundInputs:
    m, k = int(rng.integers(1, 12)), int(rng.integers(0, 3))
    members = tuple(np.sort(rng.choice(m, size=int(rng.integers(1, m + 1)), replace=False)) for _ in range(k))
    return RoundInputs(
        clients=np.arange(m),
        stream_members=members,
        stream_labels=tuple(str(i) for i in range(k)),
        stream_durations=rng.exponential(size=k),
        compute=np.round(rng.exponential(size=m), 1),  # ties in compute ends
        upload=np.where(rng.random(m) < 0.2, 0.0, rng.exponential(size=m)),
    )


@pytest.mark.parametrize("schedule, duplex", [("phased", "fdd"), ("pipelined", "fdd"), ("pipelined", "tdd")])
def test_simpy_and_the_closed_form_agree_on_shared_rounds(schedule, duplex):
    rng = np.random.default_rng(11)
    for _ in range(150):
        inputs = _random_round(rng)
        deadline = None if rng.random() < 0.5 else float(rng.uniform(1, 4))
        events = simulate(inputs, schedule=schedule, duplex=duplex, channels=1, deadline=deadline, record=False, uplink="shared")
        if schedule == "phased":
            closed = phased_closed_form(inputs, channels=1, deadline=deadline, uplink="shared")
        else:
            closed = pipelined_closed_form(inputs, duplex=duplex, channels=1, deadline=deadline, uplink="shared")
        np.testing.assert_allclose(events.t_uploaded, closed.t_uploaded, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(events.t_computed, closed.t_computed)


def test_sharing_is_between_one_carrier_and_a_carrier_per_uploader():
    """Twenty equal uploads of s seconds each: one orthogonal channel lands them at s, 2s, ..., 20s (mean
    10.5 s); sharing lands all at 20 s; and the round ends at 20 s either way (work is conserved)."""
    inputs = RoundInputs(np.arange(20), (), (), np.zeros(0), np.zeros(20), np.full(20, 1.0))
    fifo = phased_closed_form(inputs, channels=1, deadline=None)
    shared = phased_closed_form(inputs, channels=1, deadline=None, uplink="shared")
    assert fifo.t_uploaded.max() == shared.t_uploaded.max() == 20.0
    assert fifo.t_uploaded.mean() == 10.5 and (shared.t_uploaded == 20.0).all()


def test_a_shared_uplink_needs_one_channel():
    physical = PhysicalChannel(uplink="shared")
    with pytest.raises(ValueError, match=r"^channels must be 1 with physical.uplink 'shared' \(one carrier shared by every uploader\), got 4$"):
        SystemProfile(name="cell", physical=physical, channels=4)
    with pytest.raises(ValueError, match=r"^physical.uplink must be one of 'orthogonal', 'shared', got 'ofdma'$"):
        PhysicalChannel(uplink="ofdma")


def test_a_physical_round_with_a_shared_uplink_through_the_model():
    """The event log and the closed form give the same round through ``NetworkModel``, and each upload of a
    shared round lands no earlier than it would alone on the carrier."""
    physical = PhysicalChannel(path_loss_model="UMa", cell_radius_m=300, min_distance_m=35, ue_speed_mps=1.4, uplink="shared")
    profile = SystemProfile(name="cell", physical=physical, t_min=0.01, schedule="pipelined")
    plan = CommPlan.broadcast(range(8), model_params=50_000)
    fast = NetworkModel(profile, 8, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1))
    logged = NetworkModel(profile, 8, np.random.default_rng(0), record_events=True).time_round(plan, np.random.default_rng(1))
    for c in range(8):
        assert fast.t_uploaded[c] == pytest.approx(logged.t_uploaded[c], rel=1e-9)
    alone = NetworkModel(SystemProfile(name="cell", physical=PhysicalChannel(
        path_loss_model="UMa", cell_radius_m=300, min_distance_m=35, ue_speed_mps=1.4), t_min=0.01, schedule="pipelined",
        channels=8), 8, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1))
    for c in range(8):
        assert fast.t_uploaded[c] >= alone.t_uploaded[c] - 1e-12
    assert max(fast.t_uploaded.values()) > max(alone.t_uploaded.values())
