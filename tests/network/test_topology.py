"""The multi-cell layout (``physical.topology``): geometry and metrics against Sionna SYS, patterns and
interference by hand, drops, bad input, and the network model under it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile
from wirelessfl.network import topology as topo
from wirelessfl.seam import CommPlan, Stream

SIONNA_GEOMETRY = """
import json, sys
import torch
from sionna.sys import geometry_sinr_db
from sionna.sys.topology import _tr38901_site_positions, _tr38901_wrap_vectors
case = json.loads(sys.stdin.read())
out = {}
for rings in (1, 2):
    out[f"sites{rings}"] = _tr38901_site_positions(rings, 500.0, torch.float64, "cpu").tolist()
    out[f"wrap{rings}"] = _tr38901_wrap_vectors(rings, 500.0, torch.float64, "cpu").tolist()
cl = torch.tensor(case["cl"], dtype=torch.float64)
out["sinr"] = geometry_sinr_db(cl, case["power"], case["bandwidth"], case["nf"], precision="double").tolist()
print(json.dumps(out))
"""


SIONNA_SAID = Path(__file__).with_name("sionna_topology.json")
"""Sionna's answers on :func:`_case` (``python tests/network/test_topology.py`` records them again)."""


def _case() -> dict:
    """20 users' coupling losses to 19 sites x 3 sectors (seed 3, 500 m ISD, UMa, calibration budget) and the
    budget's power, bandwidth and UT noise figure: Sionna's coupling loss holds every gain, so the element's 8 dBi
    and the UT's 0 dBi come off."""
    channel = PhysicalChannel.from_dict({"link_budget": "tr38901-calibration", "path_loss_model": "UMa", "min_distance_m": 35,
                                         "bandwidth_hz": 20e6, "topology": {"rings": 2, "users": "all"}})
    drop = topo.drop_federation(channel, channel.topology, 20, np.random.default_rng(3))
    cl = drop.all_coupling_loss_db - channel.bs_antenna_gain_dbi - channel.ue_antenna_gain_dbi
    return {"cl": cl.tolist(), "power": channel.bs_power_dbm, "bandwidth": channel.bandwidth_hz, "nf": channel.noise_figure_ue_db}


def _sionna_now(case: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", SIONNA_GEOMETRY], input=json.dumps(case), capture_output=True, text=True, check=True)
    return {**json.loads(done.stdout), "case": case}


@pytest.fixture(scope="module")
def sionna_says() -> dict:
    return json.loads(SIONNA_SAID.read_text())


@pytest.mark.slow
def test_the_recorded_answers_are_sionnas_own_calls(sionna_says):
    now = _sionna_now(sionna_says["case"])
    for key in ("sites1", "sites2", "wrap1", "wrap2", "sinr"):
        np.testing.assert_allclose(now[key], sionna_says[key], atol=1e-9, err_msg=key)


def _as_set(vectors) -> list[tuple[float, float]]:
    return sorted((round(float(x), 6), round(float(y), 6)) for x, y in np.asarray(vectors))


def test_sites_wraparound_and_geometry_sinr_equal_sionna_sys(sionna_says):
    """The spiral site order and the wraparound translations of Sionna's TR 38.901 multicell helpers, and its
    geometry SINR on the same coupling losses (19 sites x 3 sectors, 20 users at 500 m ISD, UMa, calibration
    budget: 44 dBm, 20 MHz, UT noise figure 9 dB), as Sionna answered (recorded; re-asked under ``-m slow``)."""
    case = _case()
    np.testing.assert_allclose(case["cl"], sionna_says["case"]["cl"], atol=1e-9)  # the drop is still the recorded one
    for rings in (1, 2):
        np.testing.assert_allclose(topo.site_positions(rings, 500.0), sionna_says[f"sites{rings}"], atol=1e-9)
        assert _as_set(topo.wrap_vectors(rings, 500.0)) == _as_set(sionna_says[f"wrap{rings}"])
    channel = PhysicalChannel.from_dict({"link_budget": "tr38901-calibration", "path_loss_model": "UMa", "min_distance_m": 35,
                                         "bandwidth_hz": 20e6, "topology": {"rings": 2, "users": "all"}})
    cl = np.asarray(case["cl"])
    ours = topo.geometry_sinr_db(cl, channel.bs_power_dbm, channel.noise_dbm_hz("dl") + 10 * math.log10(channel.bandwidth_hz))
    np.testing.assert_allclose(ours, sionna_says["sinr"], atol=1e-9)
    # and the model's own SINR is this geometry SINR: coupling loss plus the downlink rise
    drop = topo.drop_federation(channel, channel.topology, 20, np.random.default_rng(3))
    model_sinr = channel.radiated_dbm("dl") - (drop.coupling_loss_db + drop.dl_rise_db) - channel.noise_dbm_hz("dl") - 10 * math.log10(20e6)
    np.testing.assert_allclose(model_sinr, sionna_says["sinr"], atol=1e-9)


def test_the_element_pattern_by_hand():
    """TR 38.901 Table 7.3-1: 0 dB on boresight at the tilt, -3 dB at half the 65° beamwidth in each plane, the
    30 dB floor behind the antenna and for the two planes together."""
    assert topo.element_attenuation_db(0.0, 102.0, 12.0) == pytest.approx(0.0)
    assert topo.element_attenuation_db(32.5, 102.0, 12.0) == pytest.approx(-3.0)
    assert topo.element_attenuation_db(0.0, 102.0 + 32.5, 12.0) == pytest.approx(-3.0)
    assert topo.element_attenuation_db(180.0, 102.0, 12.0) == pytest.approx(-30.0)
    assert topo.element_attenuation_db(65.0, 102.0 + 65.0, 12.0) == pytest.approx(-24.0)  # -12 - 12
    assert topo.element_attenuation_db(90.0, 102.0 + 65.0, 12.0) == pytest.approx(-30.0)


def test_interference_of_two_sites_by_hand():
    """One ring without wraparound, omni sites, log-distance loss 38.5 + 35·log10(d), no budget: a user 100 m
    from the centre towards site 1 (500 m away) hears site 1 at 400 m and the other five sites farther; the
    downlink rise is 10·log10(1 + Σ load·P·g_b / N) over the user's noise, by hand."""
    channel = PhysicalChannel(shadowing=False, topology={"rings": 1, "sectors": 1, "wraparound": False, "load": 0.5})
    layout = topo.Layout.of(channel.topology)
    user = np.array([[100.0, 0.0]])
    distances = np.linalg.norm(user[:, None, :] - layout.sites[None], axis=-1)
    cl = layout.coupling_loss_db(user, lambda d, rng: 38.5 + 35.0 * np.log10(d), np.random.default_rng(0))
    np.testing.assert_allclose(cl, 38.5 + 35.0 * np.log10(distances))
    noise_dbm = -174.0 + 10 * math.log10(channel.bandwidth_hz)
    received_mw = 10 ** ((channel.bs_power_dbm - cl[0]) / 10)
    expected = 10 * math.log10(received_mw[0] / (10 ** (noise_dbm / 10) + 0.5 * received_mw[1:].sum()))
    assert topo.geometry_sinr_db(cl, channel.bs_power_dbm, noise_dbm, 0.5)[0] == pytest.approx(expected, abs=1e-12)
    assert distances[0, 1] == pytest.approx(400.0)


def test_a_lone_omni_site_or_idle_neighbours_add_no_interference():
    alone = PhysicalChannel(topology={"rings": 0, "sectors": 1})
    idle = PhysicalChannel(topology={"rings": 1, "sectors": 3, "load": 0.0})
    for channel in (alone, idle):
        drop = topo.drop_federation(channel, channel.topology, 300, np.random.default_rng(1))
        assert np.all(drop.dl_rise_db == 0.0) and np.all(drop.ul_rise_db == 0.0)
    busy = PhysicalChannel(topology={"rings": 1, "sectors": 3, "load": 1.0})
    half = PhysicalChannel(topology={"rings": 1, "sectors": 3, "load": 0.5})
    full = topo.drop_federation(busy, busy.topology, 300, np.random.default_rng(1))
    halved = topo.drop_federation(half, half.topology, 300, np.random.default_rng(1))
    assert np.all(full.dl_rise_db > halved.dl_rise_db) and np.all(full.ul_rise_db > halved.ul_rise_db)
    np.testing.assert_array_equal(full.serving, halved.serving)


def test_users_and_interfering_phones_are_dropped_where_they_belong():
    t = topo.Topology(rings=1, sectors=3, isd_m=500.0)
    layout = topo.Layout.of(t)
    rng = np.random.default_rng(5)
    users = layout.drop(rng, 2_000, np.zeros(2_000, dtype=int), 35.0)
    assert topo.in_hexagon(users, 500.0).all()
    assert np.linalg.norm(layout.offsets(users), axis=-1).min() >= 35.0
    # uniform over the hexagon: its area is (√3/2)·ISD², so a disc of 150 m about the site holds π·150²/area of it
    share = np.mean(np.linalg.norm(users, axis=1) <= 150.0)
    expected = (math.pi * (150**2 - 35**2)) / (math.sqrt(3) / 2 * 500**2 - math.pi * 35**2)
    assert share == pytest.approx(expected, abs=0.03)
    phones = layout.drop(rng, len(layout.sector_site), layout.sector_site, 35.0, layout.sector_boresight_deg)
    offsets = phones - layout.sites[layout.sector_site]
    angle = np.degrees(np.arctan2(offsets[:, 1], offsets[:, 0]))
    assert np.all(np.abs((angle - layout.sector_boresight_deg + 180) % 360 - 180) <= 60.0)
    everywhere = layout.drop(rng, 7_000, np.arange(7_000) % 7, 35.0)
    assert np.all(topo.in_hexagon(everywhere - layout.sites[np.arange(7_000) % 7], 500.0))


def test_bad_topologies_are_one_line_naming_the_field():
    cases = [
        ({"rings": 3}, r"^physical.topology.rings must be 0, 1 or 2 \(1, 7 or 19 sites\), got 3$"),
        ({"isd_m": 5}, r"^physical.topology.isd_m must be in \[10, 50000\] \(200 m is TR 38.901's UMi calibration, 500 m UMa's, 1,732 m or 5,000 m RMa's\), got 5$"),
        ({"load": 1.5}, r"^physical.topology.load must be in \[0, 1\] \(the share of the time a neighbour sector transmits: 0 idle neighbours, 1 full buffers\), got 1.5$"),
        ({"sectors": 2}, r"^physical.topology.sectors must be 1 \(omnidirectional\) or 3, got 2$"),
        ({"users": "edge"}, r"^physical.topology.users must be one of 'center', 'all', got 'edge'$"),
        ({"rings": 1, "size": 3}, r"^unknown physical.topology keys \['size'\]; allowed keys: layout, rings, isd_m, sectors, wraparound, load, users, downtilt_deg, interference, indoor_fraction, o2i, ut_height, bs_rows$"),
    ]
    for given, message in cases:
        with pytest.raises(ValueError, match=message):
            SystemProfile.from_dict({"name": "mc", "physical": {"topology": given}})


def test_a_multicell_profile_times_rounds_and_round_trips_through_its_dict():
    channel = PhysicalChannel.from_dict({"link_budget": "tr38901-calibration", "path_loss_model": "UMa", "min_distance_m": 35,
                                         "bandwidth_hz": 20e6, "ue_speed_mps": 1.4, "link": "truncated_shannon",
                                         "topology": {"rings": 1, "isd_m": 500}})
    profile = SystemProfile(name="mc", t_min=0.05, physical=channel)
    assert SystemProfile.from_dict(profile.to_dict()) == profile
    assert "7 sites x 3 sectors at 500 m ISD with wraparound, neighbours at load 1, users of the centre site" in channel.summary()
    model = NetworkModel(profile, 12, np.random.default_rng(2))
    plan = CommPlan(streams=(Stream(1.0, frozenset(range(12))),), uplink={c: 1.0 for c in range(12)},
                    work={c: 1.0 for c in range(12)}, model_params=60_000)
    timing = model.time_round(plan, np.random.default_rng(4))
    assert math.isfinite(timing.t_end) and set(timing.arrived) == set(range(12))
    # interference made every user's SINR lower than its SNR
    snr_alone = channel.radiated_dbm("dl") - model.cell.coupling_loss_db - channel.noise_dbm_hz("dl") - 10 * math.log10(20e6)
    assert np.all(model.nominal_downlink_snr_db() < snr_alone)


def test_open_loop_uplink_power_by_hand_and_its_bounds():
    """TS 38.213 §7.1.1 open loop: P = min(P_max, P0 + 10·log10(B / 180 kHz) + α·PL), PL the coupling loss less
    antenna gains plus other losses. P0 = -80 dBm, α = 0.8, 20 MHz, 8 dBi at the gNB: a coupling loss of 100 dB
    is a measured PL of 92 dB and 14.06 dBm; 140 dB would want 46 dBm and gets the phone's 23."""
    channel = PhysicalChannel(ue_power_dbm=23.0, bandwidth_hz=20e6, bs_antenna_gain_dbi=8.0, ul_p0_dbm=-80.0, ul_alpha=0.8)
    power = channel.uplink_power_dbm(np.array([100.0, 140.0]))
    assert power[0] == pytest.approx(-80.0 + 10 * math.log10(20e6 / 180e3) + 0.8 * 92.0)
    assert power[1] == 23.0
    assert np.all(PhysicalChannel().uplink_power_dbm(np.array([60.0, 160.0])) == 23.0)
    with pytest.raises(ValueError, match=r"^physical.ul_p0_dbm must be in \[-202, 24\] dBm \(TS 38.213's P_O_PUSCH range; null: every phone at full power\), got 30$"):
        PhysicalChannel(ul_p0_dbm=30)
    with pytest.raises(ValueError, match=r"^physical.ul_alpha must be one of 0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1 \(TS 38.213's alpha\), got 0.3$"):
        PhysicalChannel(ul_alpha=0.3)


def test_power_control_lowers_a_near_phones_uplink_snr_and_the_neighbours_interference():
    """In one cell a phone below full power loses exactly its back-off of uplink SNR (the downlink is
    untouched); in a layout the neighbours' phones back off too, so the uplink interference falls."""
    full = PhysicalChannel(shadowing=False, fading="none")
    controlled = PhysicalChannel(shadowing=False, fading="none", ul_p0_dbm=-90.0, ul_alpha=0.8)
    a = NetworkModel(SystemProfile(name="a", physical=full), 50, np.random.default_rng(0))
    b = NetworkModel(SystemProfile(name="b", physical=controlled), 50, np.random.default_rng(0))
    backoff = 23.0 - controlled.uplink_power_dbm(a.path_loss_db)
    assert backoff.max() > 10.0
    np.testing.assert_allclose(b.uplink_loss_db - a.uplink_loss_db, backoff)
    np.testing.assert_array_equal(b.path_loss_db, a.path_loss_db)
    layout_full = PhysicalChannel(topology={"rings": 1})
    layout_controlled = PhysicalChannel(topology={"rings": 1}, ul_p0_dbm=-90.0, ul_alpha=0.8)
    rise_full = topo.drop_federation(layout_full, layout_full.topology, 200, np.random.default_rng(1)).ul_rise_db
    rise_controlled = topo.drop_federation(layout_controlled, layout_controlled.topology, 200, np.random.default_rng(1)).ul_rise_db
    assert np.all(rise_controlled < rise_full)


if __name__ == "__main__":
    SIONNA_SAID.write_text(json.dumps(_sionna_now(_case())) + "\n")
