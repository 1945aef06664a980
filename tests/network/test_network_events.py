"""Exact event logs and times on tiny cases computed by hand."""

import math

import numpy as np
import pytest

from wirelessfl.network import PRESETS, NetworkModel, SystemProfile, analytic_round_time
from wirelessfl.seam import CommPlan, RoundTiming, Stream

# 3 clients, per-client deterministic compute 0.25 / 3 / 0.75, rho = 2, one uplink channel.
# Stream a (1 model) -> {0, 1}, stream b (half a model) -> {2}. Uploads 1, 0.5, 1 models.
PLAN = CommPlan(
    streams=(Stream(1.0, {0, 1}, "a"), Stream(0.5, {2}, "b")),
    uplink={0: 1.0, 1: 0.5, 2: 1.0},
    work={0: 1.0, 1: 1.0, 2: 1.0},
)


def tiny(**overrides) -> SystemProfile:
    return SystemProfile(**{"name": "tiny", "rho": 2.0, "t_min": (0.25, 3.0, 0.75), "mu": math.inf, **overrides})


def run(profile: SystemProfile, plan: CommPlan = PLAN, **options) -> RoundTiming:
    model = NetworkModel(profile, 3, np.random.default_rng(0), record_events=True, **options)
    return model.time_round(plan, np.random.default_rng(1))


def test_phased_round_event_log():
    # DL ends 1.0 and 1.5; everyone computes from 1.5: done at 1.75, 4.5, 2.25;
    # uplink phase at 4.5 in order of finishing 0, 2, 1: 4.5+2, +2, +1.
    timing = run(tiny())
    assert timing.events == (
        (1.0, "stream a delivered to [0, 1]"),
        (1.5, "stream b delivered to [2]"),
        (1.75, "client 0 computed"),
        (2.25, "client 2 computed"),
        (4.5, "client 1 computed"),
        (4.5, "uplink phase starts"),
        (6.5, "client 0 uploaded"),
        (8.5, "client 2 uploaded"),
        (9.5, "client 1 uploaded"),
    )
    assert dict(timing.t_received) == {0: 1.0, 1: 1.0, 2: 1.5}
    assert dict(timing.t_computed) == {0: 1.75, 1: 4.5, 2: 2.25}
    assert dict(timing.t_uploaded) == {0: 6.5, 1: 9.5, 2: 8.5}
    assert timing.arrived == {0, 1, 2} and timing.t_end == 9.5 and timing.time_unit == "T_dl"


def test_pipelined_fdd_event_log():
    # Client 0 computes from 1.0 (done 1.25) and uploads at once while stream b is on air.
    timing = run(tiny(schedule="pipelined"))
    assert timing.events == (
        (1.0, "stream a delivered to [0, 1]"),
        (1.25, "client 0 computed"),
        (1.5, "stream b delivered to [2]"),
        (2.25, "client 2 computed"),
        (3.25, "client 0 uploaded"),
        (4.0, "client 1 computed"),
        (5.25, "client 2 uploaded"),
        (6.25, "client 1 uploaded"),
    )
    assert timing.t_end == 6.25


def test_pipelined_tdd_waits_for_the_downlink_to_free_the_medium():
    # Same as FDD, but client 0 must wait for stream b (1.0..1.5): every upload shifts by 0.25.
    timing = run(tiny(schedule="pipelined", duplex="tdd"))
    assert dict(timing.t_uploaded) == {0: 3.5, 1: 6.5, 2: 5.5}
    assert timing.events[-1] == (6.5, "client 1 uploaded")
    assert timing.t_end == 6.5


def test_two_channels_serve_the_first_two_finishers_together():
    timing = run(tiny(channels=2))
    assert dict(timing.t_uploaded) == {0: 6.5, 1: 7.5, 2: 6.5}
    assert timing.t_end == 7.5


def test_deadline_cuts_late_uploads_and_drops_clients_that_cannot_compute_in_time():
    late_upload = run(tiny(deadline=8.6))
    assert late_upload.arrived == {0, 2} and late_upload.t_end == 8.6
    assert late_upload.t_uploaded[1] == 9.5
    # Client 1 would finish computing at 4.5 > 4.4: it drops out at once, the phase starts at 2.25.
    dropped = run(tiny(deadline=4.4))
    assert dict(dropped.t_uploaded) == {0: 4.25, 1: math.inf, 2: 6.25}
    assert dropped.arrived == {0} and dropped.t_end == 4.4
    assert (1.5, "client 1 drops out: cannot compute by the deadline") in dropped.events


def test_a_deadline_that_everyone_meets_ends_the_round_at_the_last_upload():
    timing = run(tiny(deadline=100.0))
    assert timing.arrived == {0, 1, 2} and timing.t_end == 9.5


def test_largest_group_first_reorders_the_streams():
    plan = CommPlan(
        streams=(Stream(1.0, {0}, "solo"), Stream(1.0, {1, 2}, "pair")),
        uplink={0: 1.0, 1: 1.0, 2: 1.0},
        work={0: 1.0, 1: 1.0, 2: 1.0},
    )
    assert dict(run(tiny(), plan).t_received) == {0: 1.0, 1: 2.0, 2: 2.0}
    assert dict(run(tiny(stream_order="largest_first"), plan).t_received) == {0: 2.0, 1: 1.0, 2: 1.0}


def test_zero_upload_and_compute_scaled_by_work():
    plan = CommPlan(streams=(Stream(1.0, {0, 1}),), uplink={0: 0.0, 1: 1.0}, work={0: 2.0, 1: 0.5})
    profile = SystemProfile(name="w", rho=1.0, t_min=1.0, scale_compute_with_work=True)
    timing = NetworkModel(profile, 2, np.random.default_rng(0)).time_round(plan, np.random.default_rng(0))
    # Compute 2·1 and 0.5·1 from 1.0; the phase opens at 3.0; client 0 uploads nothing.
    assert dict(timing.t_computed) == {0: 3.0, 1: 1.5}
    assert dict(timing.t_uploaded) == {0: 3.0, 1: 4.0}
    assert timing.t_end == 4.0


def test_deterministic_phased_round_equals_the_closed_form():
    assert analytic_round_time(tiny(), PLAN, 3) == 1.5 + 3.0 + 2.0 * (1.0 + 0.5 + 1.0)
    analytic = NetworkModel(tiny(backend="analytic"), 3, np.random.default_rng(0))
    expected = analytic.time_round(PLAN, np.random.default_rng(0))
    assert expected.t_end == run(tiny()).t_end == 9.5
    assert dict(expected.t_uploaded) == {0: 6.5, 1: 7.5, 2: 9.5}  # uploads in client-id order: +2, +1, +2


@pytest.mark.parametrize("closed_form", [True, False], ids=["closed-form", "simpy"])
@pytest.mark.parametrize(
    "schedule, duplex, expected",
    [
        ("phased", "fdd", [102.0, 105.0, 201.0]),
        ("pipelined", "fdd", [102.0, 102.0, 102.0]),
        ("pipelined", "tdd", [102.0, 104.0, 200.0]),
    ],
)
def test_hundred_users_one_channel_rho_one(schedule, duplex, expected, closed_form):
    """The design's independent check: phased 102/105/201, pipelined FDD 102 for every k."""
    profile = SystemProfile.from_dict({"preset": "wired", "schedule": schedule, "duplex": duplex})
    model = NetworkModel(profile, 100, np.random.default_rng(0), closed_form=closed_form)
    times = []
    for k in (1, 4, 100):
        groups = np.array_split(np.arange(100), k)
        plan = CommPlan(
            streams=tuple(Stream(1.0, g.tolist()) for g in groups),
            uplink=dict.fromkeys(range(100), 1.0),
            work=dict.fromkeys(range(100), 1.0),
        )
        times.append(model.time_round(plan, np.random.default_rng(k)).t_end)
    assert times == expected


def test_clients_outside_every_stream_start_at_time_zero():
    plan = CommPlan(streams=(), uplink={0: 1.0}, work={0: 1.0})
    timing = NetworkModel(PRESETS["wired"], 1, np.random.default_rng(0)).time_round(plan, np.random.default_rng(0))
    assert dict(timing.t_received) == {0: 0.0} and timing.t_end == 2.0


def test_pipelined_deadline_drops_the_slow_client_when_its_streams_arrive():
    # Client 1 would compute 1.0..4.0 > 3.3; client 2 uploads 3.25..5.25, too late.
    timing = run(tiny(schedule="pipelined", deadline=3.3))
    assert dict(timing.t_uploaded) == {0: 3.25, 1: math.inf, 2: 5.25}
    assert timing.arrived == {0} and timing.t_end == 3.3
    assert (1.0, "client 1 drops out: cannot compute by the deadline") in timing.events
