import math

import numpy as np
import pytest

from wirelessfl.network import PRESETS, NetworkModel, PhysicalChannel, SystemProfile, analytic_round_time
from wirelessfl.seam import CommPlan, Stream


def test_presets_are_the_papers_three_systems_phased_on_one_channel():
    slow, fast, wired = PRESETS["slow-ul-unreliable"], PRESETS["fast-ul-reliable"], PRESETS["wired"]
    assert (slow.rho, slow.t_min, slow.mu) == (4.0, 1.0, 1.0)
    assert (fast.rho, fast.t_min, fast.mu) == (2.0, 1.0, math.inf)
    assert (wired.rho, wired.t_min, wired.mu) == (1.0, 1.0, math.inf)
    for profile in PRESETS.values():
        assert profile.schedule == "phased" and profile.channels == 1 and profile.t_dl == 1.0
        assert "serialized uploads" in profile.description


def test_round_trip_through_plain_data():
    profile = SystemProfile(
        name="mixed",
        rho=3.0,
        t_min=(0.5, 1.0),
        mu=(2.0, math.inf),
        channels=2,
        schedule="pipelined",
        duplex="tdd",
        stream_order="largest_first",
        deadline=50.0,
        physical=PhysicalChannel(cell_radius_m=300.0, ul_bandwidth_hz=1e6),
        bits_per_parameter=16,
    )
    data = profile.to_dict()
    assert data["mu"] == [2.0, "inf"] and data["physical"]["cell_radius_m"] == 300.0
    assert SystemProfile.from_dict(data) == profile
    assert SystemProfile.from_dict(PRESETS["wired"].to_dict()) == PRESETS["wired"]


def test_preset_key_starts_from_the_preset_and_overrides_fields():
    profile = SystemProfile.from_dict({"preset": "wired", "schedule": "pipelined", "channels": 4})
    assert profile.name == "wired" and profile.rho == 1.0
    assert profile.schedule == "pipelined" and profile.channels == 4
    renamed = SystemProfile.from_dict({"preset": "slow-ul-unreliable", "name": "slow-3ch", "mu": "inf"})
    assert renamed.name == "slow-3ch" and renamed.mu == math.inf and renamed.rho == 4.0


def test_from_dict_names_unknown_keys_and_lists_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown profile keys \['rh0', 'speed'\]; allowed keys: preset, name, rho, t_dl"):
        SystemProfile.from_dict({"name": "x", "rh0": 1.0, "speed": 2})
    with pytest.raises(ValueError, match=r"unknown physical keys \['radius'\]; allowed keys: cell_radius_m"):
        SystemProfile.from_dict({"name": "x", "rho": 1.0, "physical": {"radius": 5}})
    with pytest.raises(ValueError, match=r"preset must be one of 'slow-ul-unreliable', 'fast-ul-reliable', 'wired', got 'lte'"):
        SystemProfile.from_dict({"preset": "lte"})
    with pytest.raises(ValueError, match=r"^profile needs 'rho' \(T_ul / T_dl\), or a 'preset' that sets it, or a 'physical' channel$"):
        SystemProfile.from_dict({"name": "x"})


def test_a_physical_profile_needs_no_rho_and_round_trips():
    cell = SystemProfile.from_dict({"name": "cell", "physical": {"cell_radius_m": 500}})
    assert cell.rho is None and cell.time_unit == "s"
    assert SystemProfile.from_dict(cell.to_dict()) == cell
    with pytest.raises(ValueError, match=r"^profile needs 'rho'"):
        SystemProfile(name="x")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"rho": -1.0}, r"^rho must be > 0, got -1.0$"),
        ({"rho": 0}, r"^rho must be > 0, got 0.0$"),
        ({"rho": "fast"}, r"^rho must be a number, got 'fast'$"),
        ({"t_dl": 0.0}, r"^t_dl must be > 0, got 0.0$"),
        ({"t_min": -0.5}, r"^t_min must be >= 0 and finite, got -0.5$"),
        ({"t_min": (1.0, -2.0)}, r"^t_min\[1\] must be >= 0 and finite, got -2.0$"),
        ({"mu": 0.0}, r"^mu must be > 0 \(inf allowed\), got 0.0$"),
        ({"mu": -3}, r"^mu must be > 0 \(inf allowed\), got -3.0$"),
        ({"t_min": (1.0, 2.0), "mu": (1.0, 2.0, 3.0)}, r"^t_min and mu lists must have the same number of groups, got 2 and 3$"),
        ({"channels": 0}, r"^channels must be an integer >= 1, got 0$"),
        ({"channels": 1.5}, r"^channels must be an integer >= 1, got 1.5$"),
        ({"schedule": "overlap"}, r"^schedule must be one of 'phased', 'pipelined', got 'overlap'$"),
        ({"duplex": "half"}, r"^duplex must be one of 'fdd', 'tdd', got 'half'$"),
        ({"stream_order": "random"}, r"^stream_order must be one of 'plan', 'largest_first', got 'random'$"),
        ({"deadline": 0.0}, r"^deadline must be > 0 and finite, or null for no deadline, got 0.0$"),
        ({"deadline": -5}, r"^deadline must be > 0 and finite, or null for no deadline, got -5.0$"),
        ({"backend": "ns3"}, r"^backend must be one of 'des', 'analytic', got 'ns3'$"),
        ({"backend": "analytic", "schedule": "pipelined"}, r"^backend 'analytic' needs schedule 'phased'"),
        ({"backend": "analytic", "deadline": 3.0}, r"^backend 'analytic' does not support a deadline"),
        ({"scale_compute_with_work": "yes"}, r"^scale_compute_with_work must be true or false, got 'yes'$"),
        ({"bits_per_parameter": 0}, r"^bits_per_parameter must be an integer >= 1, got 0$"),
    ],
)
def test_bad_profile_fields_raise_with_the_field_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        SystemProfile(**{"name": "bad", "rho": 1.0, **overrides})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"cell_radius_m": 5.0}, r"^physical.cell_radius_m must be > physical.min_distance_m \(10.0\), got 5.0$"),
        ({"min_distance_m": 0}, r"^physical.min_distance_m must be in \[0.1, 10000\] \(the closest a user stands to the antenna\), got 0$"),
        ({"bandwidth_hz": -1e6}, r"^physical.bandwidth_hz must be in \[1000, 1e\+10\] \(.*\), got -1e\+06$"),
        ({"fading": "nakagami"}, r"^physical.fading must be one of 'rayleigh', 'rician', 'none', got 'nakagami'$"),
        ({"bs_power_dbm": math.inf}, r"^physical.bs_power_dbm must be in \[-30, 80\] \(20-30 dBm small cells, 43-49 dBm macro cells\), got inf$"),
        ({"path_loss_exponent": 1e6}, r"^physical.path_loss_exponent must be in \[1.5, 8\] \(.*\), got 1e\+06$"),
        ({"ue_power_dbm": -1e300}, r"^physical.ue_power_dbm must be in \[-40, 40\] \(0-10 dBm IoT devices, 23-26 dBm phones\), got -1e\+300$"),
        ({"noise_density_dbm_hz": -300}, r"^physical.noise_density_dbm_hz must be in \[-200, -100\] \(.*\), got -300$"),
        ({"reference_loss_db": 1000}, r"^physical.reference_loss_db must be in \[0, 150\] \(.*\), got 1000$"),
        ({"cell_radius_m": 1e7}, r"^physical.cell_radius_m must be in \[1, 100000\] \(.*\), got 1e\+07$"),
        ({"ul_bandwidth_hz": 1e12}, r"^physical.ul_bandwidth_hz must be in \[1000, 1e\+10\] \(as bandwidth_hz\), got 1e\+12$"),
    ],
)
def test_bad_physical_fields_raise_with_the_field_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        PhysicalChannel(**overrides)


def test_every_physical_default_and_range_is_plausible():
    from wirelessfl.network.profile import PHYSICAL_RANGES

    defaults = PhysicalChannel()
    for name, (low, high, _) in PHYSICAL_RANGES.items():
        value = getattr(defaults, name)
        assert value is None or low <= value <= high, name
        fits = {"cell_radius_m": {"min_distance_m": 0.5}, "min_distance_m": {"cell_radius_m": 1.0}}.get(name, {})
        edge = PhysicalChannel(**{name: low, **fits})
        assert getattr(edge, name) == low


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"rho": 1e7}, r"^rho must be at most 1e\+06, got 1e\+07$"),
        ({"t_min": [1, 1e10]}, r"^t_min\[1\] must be at most 1e\+09, got 1e\+10$"),
        ({"mu": 1e12}, r"^mu must be at most 1e\+09, got 1e\+12$"),
        ({"channels": 10**6}, r"^channels must be at most 100000, got 1e\+06$"),
        ({"deadline": 1e13}, r"^deadline must be at most 1e\+12, got 1e\+13$"),
        ({"bits_per_parameter": 128}, r"^bits_per_parameter must be at most 64, got 128$"),
    ],
)
def test_profile_fields_have_upper_limits(overrides, message):
    with pytest.raises(ValueError, match=message):
        SystemProfile(**{"name": "bad", "rho": 1.0, **overrides})


def test_network_rejects_unknown_clients_and_bad_sizes():
    model = NetworkModel(PRESETS["wired"], 5, np.random.default_rng(0))
    plan = CommPlan.broadcast([0, 1, 7])
    with pytest.raises(ValueError, match=r"^plan names client 7, but client ids are 0..4 \(num_clients=5\)$"):
        model.time_round(plan, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^num_clients must be an integer >= 1, got 0$"):
        NetworkModel(PRESETS["wired"], 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^t_min/mu give 3 compute groups but the network has only 2 clients$"):
        NetworkModel(SystemProfile(name="g", rho=1.0, t_min=(1.0, 2.0, 3.0)), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^rng must be a numpy.random.Generator, got int$"):
        NetworkModel(PRESETS["wired"], 2, 42)


def test_analytic_round_time_rejects_unknown_clients_and_bad_sizes():
    plan = CommPlan.broadcast([0, 3, 9])
    with pytest.raises(ValueError, match=r"^plan names clients \[3, 9\], but client ids are 0..2$"):
        analytic_round_time(PRESETS["wired"], plan, 3)
    with pytest.raises(ValueError, match=r"^num_clients must be an integer >= 1, got 0$"):
        analytic_round_time(PRESETS["wired"], plan, 0)


def test_empty_receiver_set_is_refused_at_the_seam():
    with pytest.raises(ValueError, match=r"^stream.receivers must name at least one client, got an empty set$"):
        Stream(1.0, frozenset())


def test_compute_groups_are_contiguous_blocks():
    profile = SystemProfile(name="g", rho=1.0, t_min=(1.0, 2.0), mu=(math.inf, 4.0))
    model = NetworkModel(profile, 5, np.random.default_rng(0))
    assert model.t_min.tolist() == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert model.mu.tolist() == [math.inf, math.inf, math.inf, 4.0, 4.0]
    assert profile.compute_groups == 2


def test_bits_count_a_multicast_once():
    model = NetworkModel(PRESETS["wired"], 4, np.random.default_rng(0))
    plan = CommPlan(
        streams=(Stream(1.0, {0, 1}), Stream(0.5, {2, 3})),
        uplink={0: 1.0, 1: 1.0, 2: 0.5, 3: 0.0},
        work={0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0},
        model_params=1000,
    )
    assert model.bits(plan) == (1.5 * 1000 * 32, 2.5 * 1000 * 32)


def test_analytic_backend_refuses_a_physical_channel():
    with pytest.raises(ValueError, match=r"^backend 'analytic' does not support a physical channel; use backend 'des'$"):
        SystemProfile(name="a", rho=1.0, backend="analytic", physical=PhysicalChannel())


def test_network_package_does_not_import_torch_or_the_learning_side():
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys, wirelessfl.network; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith('wirelessfl.learning')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2])
    assert out.stdout.strip() == "[]"
