"""Uplink PRB scheduling with open-loop power control (``physical.ul_scheduler: equal_prb``, ``network/prb.py``):
the power control against hand computation and Sionna SYS, PRB-split timing by hand, the closed form against
SimPy, the limits where it must equal the time share, and bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile, nr, prb
from wirelessfl.network.energy import EnergyProfile, round_activity
from wirelessfl.network.rounds import RoundInputs, phased_closed_form, pipelined_closed_form, simulate
from wirelessfl.seam import CommPlan

PATH_LOSS_DB = [92.0, 132.0, 70.0, 110.0, 125.5]
PRBS = [10, 10, 1, 51, 273]
SETTINGS = [(0.8, -80.0, 23.0), (1.0, -100.0, 26.0), (0.0, -60.0, 23.0), (0.4, -90.0, 20.0)]
SIONNA_DBM = [
    [3.6000000000000085, 23.0, -23.999999999999993, 23.0, 23.0],
    [2.0, 26.0, -30.0, 26.0, 26.0],
    [-50.0, -50.0, -60.0, -42.92429823902063, -35.63837352959244],
    [-43.19999999999999, -27.199999999999996, -62.0, -28.924298239020636, -15.438373529592432],
]
"""``sionna.sys.open_loop_uplink_power_control`` on these path losses, PRBs (as 12 subcarriers each) and
(alpha, P0, P_max), in dBm, double precision: recorded by ``SIONNA_POWER_CONTROL`` with sionna-no-rt 2.x
(``test_open_loop_power_equals_sionnas_function`` runs it again under ``-m slow``)."""

SIONNA_POWER_CONTROL = """
import json, sys
import torch
from sionna.sys import open_loop_uplink_power_control
case = json.loads(sys.stdin.read())
out = []
for alpha, p0, pmax in case["settings"]:
    pl = torch.tensor([10 ** (x / 10) for x in case["pl_db"]], dtype=torch.float64)
    sc = torch.tensor([12 * k for k in case["prbs"]], dtype=torch.int64)
    p = open_loop_uplink_power_control(pl, sc, alpha=alpha, p0_dbm=p0, ut_max_power_dbm=pmax, precision="double")
    out.append((10 * torch.log10(p) + 30).tolist())
print(json.dumps(out))
"""


def test_open_loop_power_by_hand_a_near_phone_below_its_maximum_and_a_far_one_capped():
    """P = min(P_max, P0 + α·PL + 10·log10(#PRB)). P0 −80 dBm, α 0.8, 10 PRBs: PL 92 dB gives −80 + 73.6 + 10 = 3.6 dBm
    (below 23); PL 132 dB would want 35.6 dBm and is capped at 23. With 1 PRB the near phone sends 10 dB less."""
    power = prb.open_loop_power_dbm(np.array([92.0, 132.0]), np.array([10, 10]), -80.0, 0.8, 23.0)
    assert power[0] == pytest.approx(3.6, abs=1e-12)
    assert power[1] == 23.0
    assert prb.open_loop_power_dbm(92.0, 1, -80.0, 0.8, 23.0) == pytest.approx(-6.4, abs=1e-12)


def test_open_loop_power_matches_sionnas_recorded_answers():
    for (alpha, p0, pmax), expected in zip(SETTINGS, SIONNA_DBM):
        np.testing.assert_allclose(prb.open_loop_power_dbm(np.array(PATH_LOSS_DB), np.array(PRBS), p0, alpha, pmax), expected, atol=1e-9)


@pytest.mark.slow
@pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed")
def test_open_loop_power_equals_sionnas_function():
    """The same inputs through Sionna SYS's own function, in a child process (importing Sionna reseeds torch)."""
    case = {"pl_db": PATH_LOSS_DB, "prbs": PRBS, "settings": SETTINGS}
    done = subprocess.run([sys.executable, "-c", SIONNA_POWER_CONTROL], input=json.dumps(case), capture_output=True, text=True, check=True)
    for (alpha, p0, pmax), theirs in zip(SETTINGS, json.loads(done.stdout)):
        np.testing.assert_allclose(prb.open_loop_power_dbm(np.array(PATH_LOSS_DB), np.array(PRBS), p0, alpha, pmax), theirs, atol=1e-9)


def _link(channel: PhysicalChannel, snr_full, loss) -> prb.PrbLink:
    return prb.prb_link(channel, np.asarray(snr_full, dtype=float), np.asarray(loss, dtype=float))


def test_a_capped_phone_gains_m_over_k_of_sinr_and_a_phone_below_its_maximum_keeps_its_sinr():
    """20 MHz (111 PRBs of 180 kHz), P0 −80 dBm, α 0.8: a phone at 92 dB sends 3.6 + 10·log10(20e6/180e3) dBm on the
    whole carrier and 1/111 of it on one PRB, so its SINR does not change; a phone at 140 dB is capped at 23 dBm with
    any share, so one PRB raises its SINR 111-fold."""
    channel = PhysicalChannel(bandwidth_hz=20e6, ul_p0_dbm=-80.0, ul_alpha=0.8)
    link = _link(channel, [10.0, 0.1], [92.0, 140.0])
    assert link.prbs == 111
    assert link.power_full_dbm[0] == pytest.approx(-80.0 + 0.8 * 92.0 + 10 * math.log10(20e6 / 180e3), abs=1e-12)
    np.testing.assert_allclose(link.power_dbm(111.0), link.power_full_dbm, atol=0)
    assert link.power_dbm(1.0)[0] == pytest.approx(link.power_full_dbm[0] - 10 * math.log10(111), abs=1e-9)
    assert link.power_dbm(1.0)[1] == 23.0
    np.testing.assert_allclose(link.sinr(1.0), [10.0, 0.1 * 111], rtol=1e-12)
    np.testing.assert_allclose(link.sinr(111.0), [10.0, 0.1], rtol=1e-15)


def test_share_table_by_hand():
    """Shannon, 4 PRBs: an uncapped phone's rate is k/M of its full-carrier rate; a capped phone at SINR γ on the
    whole carrier has SINR 4γ/k on k PRBs, so its rate ratio is k·log2(1 + 4γ/k) / (4·log2(1 + γ)) (γ = 1, and
    γ = 0.1, whose whole-carrier rate is below 1 bit/s per Hz of a PRB)."""
    channel = PhysicalChannel(bandwidth_hz=720e3, ul_p0_dbm=-100.0, ul_alpha=1.0)
    link = _link(channel, [3.0, 1.0, 0.1], [80.0, 160.0, 160.0])
    assert link.prbs == 4
    table = prb.share_table(link, "shannon")
    np.testing.assert_allclose(table[0], [0, 0.25, 0.5, 0.75, 1.0], rtol=1e-12)
    k = np.arange(1, 5)
    np.testing.assert_allclose(table[1, 1:], k * np.log2(1 + 4 / k) / 4.0, rtol=1e-12)
    np.testing.assert_allclose(table[2, 1:], k * np.log2(1 + 0.4 / k) / (4.0 * np.log2(1.1)), rtol=1e-12)


def test_power_control_measures_the_loss_less_the_antenna_gains_as_the_time_share_does():
    """With an 8 dBi gNB antenna a coupling loss of 100 dB is a measured 92 dB: P0 −80 dBm, α 0.8, 20 MHz gives
    −80 + 10·log10(20e6/180e3) + 73.6 dBm on the whole carrier, the time share's power, and 1/111 of it on one PRB."""
    channel = PhysicalChannel(bandwidth_hz=20e6, bs_antenna_gain_dbi=8.0, ul_p0_dbm=-80.0, ul_alpha=0.8)
    link = _link(channel, [1.0], [100.0])
    expected = -80.0 + 10 * math.log10(20e6 / 180e3) + 0.8 * 92.0
    assert link.power_full_dbm[0] == pytest.approx(expected, abs=1e-9)
    assert link.power_full_dbm[0] == pytest.approx(float(channel.uplink_power_dbm(np.array([100.0]))[0]), abs=1e-9)
    assert link.power_dbm(1.0)[0] == pytest.approx(expected - 10 * math.log10(111), abs=1e-9)


def test_the_ergodic_efficiency_is_the_fixed_draws_mean_and_the_rayleigh_closed_form():
    """On its grid the tabulated efficiency is the mean over the same 4,096 gains the ergodic rates use
    (``physical.FADING_SAMPLES`` drawn from seed 0), and within 3% of Rayleigh's log2(e)·e^{1/γ}·E1(1/γ)."""
    from scipy.special import exp1

    from wirelessfl.network import link as links

    at = prb.ergodic_se("shannon", "rayleigh", None)
    gains = links.draw_fading(np.random.default_rng(0), 4096, "rayleigh", None)
    for snr_db in (-10.0, 0.0, 10.0, 20.0):
        snr = 10 ** (snr_db / 10)
        assert at(snr) == pytest.approx(np.log2(1 + snr * gains).mean(), rel=1e-9)
        assert at(snr) == pytest.approx(np.log2(np.e) * np.exp(1 / snr) * exp1(1 / snr), rel=0.03)


def test_equal_prb_split_of_two_and_three_uploaders_by_hand():
    """M = 4 PRBs. A (uncapped: rates k/4) needs 1 s of the whole carrier, B (capped: 0.4, 0.7, 0.9, 1) needs 2 s.
    Together each holds 2 PRBs: A at 0.5 lands at 2 s; B, at 0.7, has 0.6 s left and lands alone at 2.6 s (the time
    share: 3 s). Add C (uncapped, 0.5 s): with three, each holds 4/3 PRBs (1 PRB 2/3 of the slots, 2 PRBs 1/3):
    A and C at 1/3, B at 0.5; C lands at 1.5 s, A at 1.5 + 0.5/0.5 = 2.5 s, B at 2.5 + (2 − 0.75 − 0.7)/1 = 3.05 s."""
    uncapped, capped = [0, 0.25, 0.5, 0.75, 1.0], [0, 0.4, 0.7, 0.9, 1.0]
    landed, airtime, prb_s = prb.prb_landings(0.0, np.array([1.0, 2.0]), np.array([uncapped, capped]))
    np.testing.assert_allclose(landed, [2.0, 2.6], rtol=1e-12)
    np.testing.assert_allclose(airtime, [2.0, 2.6], rtol=1e-12)
    np.testing.assert_allclose(prb_s, [4.0, 4.0 + 0.6 * 4], rtol=1e-12)
    landed, airtime, prb_s = prb.prb_landings(0.0, np.array([1.0, 2.0, 0.5]), np.array([uncapped, capped, uncapped]))
    np.testing.assert_allclose(landed, [2.5, 3.05, 1.5], rtol=1e-12)
    np.testing.assert_allclose(prb_s, [1.5 * 4 / 3 + 1.0 * 2, 1.5 * 4 / 3 + 1.0 * 2 + 0.55 * 4, 1.5 * 4 / 3], rtol=1e-12)


def test_more_uploaders_than_prbs_take_turns_on_one_prb_each():
    """M = 2, three uploaders: each holds one PRB 2/3 of the slots. A and C (0.5 of the rate on one PRB) advance at
    1/3, B (0.6) at 0.4: B (1 s) lands at 2.5 s, on the air 2.5·2/3 s; then A and C hold one PRB each (0.5): A (1 s)
    has 1/6 left and lands at 2.5 + 1/3 s; C (2 s) has 1 left, alone lands 1 s later."""
    table = np.array([[0, 0.5, 1.0], [0, 0.6, 1.0], [0, 0.5, 1.0]])
    landed, airtime, prb_s = prb.prb_landings(0.0, np.array([1.0, 1.0, 2.0]), table)
    np.testing.assert_allclose(landed, [2.5 + 1 / 3, 2.5, 2.5 + 1 / 3 + 1.0], rtol=1e-12)
    np.testing.assert_allclose(airtime, [5 / 3 + 1 / 3, 5 / 3, 5 / 3 + 1 / 3 + 1.0], rtol=1e-12)
    np.testing.assert_allclose(prb_s, [5 / 3 + 1 / 3, 5 / 3, 5 / 3 + 1 / 3 + 2.0], rtol=1e-12)


def test_an_upload_in_outage_is_not_scheduled():
    table = np.array([[0, 0.5, 1.0], [0, 0.5, 1.0]])
    landed, airtime, _ = prb.prb_landings(0.0, np.array([1.0, math.inf]), table)
    assert landed.tolist() == [1.0, math.inf]
    assert airtime.tolist() == [1.0, 0.0]


def _profile(scheduler: str, **physical) -> SystemProfile:
    cell = {"path_loss_model": "UMa", "carrier_ghz": 3.5, "bandwidth_hz": 20e6, "uplink": "shared", "ul_p0_dbm": -80, "ul_alpha": 0.8,
            **physical}
    if scheduler != "time_share":
        cell["ul_scheduler"] = scheduler
    return SystemProfile.from_dict({"name": scheduler, "t_min": 0.05, "mu": 20.0, "physical": cell})


CELLS = {
    "shannon, held": {},
    "shannon, blocks": {"ue_speed_mps": 1.4},
    "nr, blocks": {"link": "nr", "nr": {"subcarrier_spacing_khz": 30}, "ue_speed_mps": 1.4},
}


@pytest.mark.parametrize("scheduler", ["equal_prb", "proportional_fair"])
@pytest.mark.parametrize("cell", list(CELLS))
def test_one_uploader_lands_exactly_as_in_the_time_share(cell, scheduler):
    if "nr" in cell and nr.find_sionna() is None:
        pytest.skip("sionna-no-rt is not installed")
    plan = CommPlan(streams=(), uplink={7: 1.0}, work={7: 1.0}, model_params=61_706)
    times, networks = {}, {}
    for name in ("time_share", scheduler):
        networks[name] = NetworkModel(_profile(name, **CELLS[cell]), 20, np.random.default_rng(0))
        times[name] = networks[name].time_round(plan, np.random.default_rng(1))
    share, split = times["time_share"], times[scheduler]
    assert split.t_uploaded[7] == share.t_uploaded[7]
    assert split.airtime[7] == pytest.approx(share.airtime[7], rel=1e-12)
    assert split.ul_prbs[7] == pytest.approx(nr.prbs_for(20e6, 30) if "nr" in cell else 111, rel=1e-12)
    network = networks[scheduler]
    assert split.ul_power_dbm[7] == pytest.approx(float(network.profile.physical.uplink_power_dbm(network.path_loss_db[7])), abs=1e-9)
    assert not share.ul_prbs


def test_without_a_capped_phone_the_prb_split_is_the_time_share():
    """P0 −120 dBm, α 1 in a 150 m cell: no phone reaches 23 dBm, so every phone's SINR is the same with any share and
    its rate is k/M of the whole carrier's: (1 − f)·k/M + f·(k + 1)/M = 1/m, the time share, for 60 uploaders."""
    profile = {"cell_radius_m": 150, "ul_p0_dbm": -120, "ul_alpha": 1.0, "shadowing": False}
    plan = CommPlan.broadcast(range(60), model_params=61_706)
    share = NetworkModel(_profile("time_share", **profile), 60, np.random.default_rng(0)).time_round(plan, np.random.default_rng(2))
    network = NetworkModel(_profile("equal_prb", **profile), 60, np.random.default_rng(0))
    split = network.time_round(plan, np.random.default_rng(2))
    assert max(split.ul_power_dbm.values()) < 23.0
    ids = sorted(share.t_uploaded)
    np.testing.assert_allclose([split.t_uploaded[c] for c in ids], [share.t_uploaded[c] for c in ids], rtol=1e-9)


def test_capped_phones_land_sooner_than_in_the_time_share_and_pay_their_airtime():
    """Full power (no P0): every phone is at its cap, so a share of k PRBs has M/k times the SINR; 40 uploaders of a
    111-PRB carrier all land no later than in the time share. Energy: p_tx_w times the airtime the split gives (on
    the air the whole time it holds PRBs), which is longer than the time share's turns."""
    plan = CommPlan.broadcast(range(40), model_params=61_706)
    share = NetworkModel(_profile("time_share", ul_p0_dbm=None), 40, np.random.default_rng(0)).time_round(plan, np.random.default_rng(3))
    split = NetworkModel(_profile("equal_prb", ul_p0_dbm=None), 40, np.random.default_rng(0)).time_round(plan, np.random.default_rng(3))
    assert split.t_end < share.t_end
    assert all(split.ul_power_dbm[c] == 23.0 for c in split.ul_power_dbm)
    device = EnergyProfile().per_device(40)
    activity = round_activity(split, {c: 0.0 for c in range(40)}, device)
    airtime = np.array([split.airtime[c] for c in activity.clients.tolist()])
    np.testing.assert_allclose(activity.tx_j, device.p_tx_w[activity.clients] * np.minimum(airtime, split.t_end), rtol=1e-12)
    last = max(split.t_uploaded, key=split.t_uploaded.get)
    assert split.airtime[last] == pytest.approx(split.t_uploaded[last] - split.t_upload_start[last], rel=1e-9)


def _random_inputs(rng: np.random.Generator, m: int, prbs: int) -> RoundInputs:
    k = np.arange(prbs + 1) / prbs
    bend = rng.uniform(0.0, 1.0, size=(m, 1))
    table = k[None, :] ** bend  # concave in k, 0 at 0 and 1 at M: a phone's rate with k PRBs over its rate with M
    upload = rng.exponential(1.0, m) * (rng.uniform(size=m) > 0.1)
    upload[rng.uniform(size=m) < 0.05] = math.inf
    members = (np.arange(m // 2), np.arange(m // 2, m))
    return RoundInputs(clients=np.arange(m), stream_members=members, stream_labels=("a", "b"), stream_durations=rng.uniform(0.1, 1, 2),
                       compute=rng.exponential(1.0, m), upload=upload, ul_share=table)


@pytest.mark.parametrize("scheduler", ["equal_prb", "proportional_fair"])
def test_the_closed_form_equals_simpy_on_random_rounds(scheduler):
    """Phased and pipelined (FDD, TDD) rounds, with and without a deadline, with fewer and more uploaders than
    PRBs: the same landings and airtimes as SimPy's PRB carrier to 1e-9."""
    rng = np.random.default_rng(5)
    for trial in range(24):
        m, prbs = int(rng.integers(1, 12)), int(rng.integers(1, 6))
        inputs = replace(_random_inputs(rng, m, prbs), ul_scheduler=scheduler)
        deadline = float(rng.uniform(1, 6)) if trial % 3 == 0 else None
        for schedule, duplex in (("phased", "fdd"), ("pipelined", "fdd"), ("pipelined", "tdd")):
            if schedule == "phased":
                closed = phased_closed_form(inputs, channels=1, deadline=deadline, uplink="shared")
            else:
                closed = pipelined_closed_form(inputs, duplex=duplex, channels=1, deadline=deadline, uplink="shared")
            engine = simulate(inputs, schedule=schedule, duplex=duplex, channels=1, deadline=deadline, record=False, uplink="shared")
            np.testing.assert_allclose(closed.t_uploaded, engine.t_uploaded, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(closed.airtime, engine.airtime, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(closed.prb_seconds, engine.prb_seconds, rtol=1e-9, atol=1e-12)


def test_a_phones_share_table_does_not_depend_on_who_else_is_in_the_call():
    channel = PhysicalChannel(bandwidth_hz=20e6, ul_p0_dbm=-80.0, ul_alpha=0.8)
    rng = np.random.default_rng(0)
    snr, loss = 10 ** rng.uniform(-2, 3, 500), rng.uniform(70, 150, 500)
    together = prb.share_table(_link(channel, snr, loss), "shannon")
    alone = prb.share_table(_link(channel, snr[[123]], loss[[123]]), "shannon")
    np.testing.assert_array_equal(alone[0], together[123])


def test_bad_schedulers_are_one_line_naming_the_field():
    with pytest.raises(ValueError, match=r"^physical.ul_scheduler must be one of 'time_share', 'equal_prb', 'proportional_fair' \(time_share: each "
                                         r"uploader has the whole carrier in turn; equal_prb: each holds an equal share of its PRBs; proportional_fair: "
                                         r"PRBs by Sionna's PF metric\), got 'pf'$"):
        PhysicalChannel(uplink="shared", ul_scheduler="pf")
    with pytest.raises(ValueError, match=r"^physical.ul_scheduler 'equal_prb' needs physical.uplink 'shared' \(one carrier whose PRBs the "
                                         r"uploaders share\), got 'orthogonal'$"):
        PhysicalChannel(ul_scheduler="equal_prb")


def test_the_default_leaves_the_profile_dict_as_before_and_the_field_round_trips():
    assert "ul_scheduler" not in PhysicalChannel(uplink="shared").to_dict()
    channel = PhysicalChannel(uplink="shared", ul_scheduler="equal_prb")
    assert PhysicalChannel.from_dict(channel.to_dict()) == channel


def test_client_rounds_report_the_prbs_power_and_sinr_only_for_a_prb_split():
    """``client_rounds.parquet``'s table: the PRB split's three columns carry the timing's values (NaN for a client
    that sent nothing); a time-share profile's table has no such columns, so its bytes stay as they were."""
    from types import SimpleNamespace

    from wirelessfl.accounting import PRB_COLUMNS, Ledger, account

    plan = CommPlan(streams=(), uplink={0: 1.0, 1: 1.0, 2: 1.0}, work={0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, model_params=61_706)
    records = [SimpleNamespace(round=0, plan=plan), SimpleNamespace(round=1, plan=plan)]
    tables = {}
    for scheduler in ("time_share", "equal_prb"):
        network = NetworkModel(_profile(scheduler), 6, np.random.default_rng(0))
        timing = network.time_round(plan, np.random.default_rng(1))
        ledger = Ledger(EnergyProfile(), 6, np.full(6, 10.0), 1)
        tables[scheduler] = (account(records, [timing], ledger, network).client_rounds, timing)
    share, _ = tables["time_share"]
    assert not set(PRB_COLUMNS) & set(share)
    split, timing = tables["equal_prb"]
    clients = split["client"].tolist()
    assert clients == [0, 1, 2, 3]
    for name in PRB_COLUMNS:
        np.testing.assert_array_equal(split[name][:3], [getattr(timing, name)[c] for c in (0, 1, 2)])
        assert math.isnan(split[name][3])
    np.testing.assert_array_equal(split["airtime"][:3], [timing.airtime[c] for c in (0, 1, 2)])


SIONNA_PF = """
import json, sys
import torch
from sionna.sys import PFSchedulerSUMIMO
out = []
for table in json.loads(sys.stdin.read()):
    table = torch.tensor(table, dtype=torch.float64)
    users, prbs = table.shape[0], table.shape[1] - 1
    held = [1] * users
    for _ in range(prbs - users):
        have = torch.tensor([float(table[u, held[u]]) for u in range(users)], dtype=torch.float64)
        more = torch.tensor([float(table[u, held[u] + 1] - table[u, held[u]]) for u in range(users)], dtype=torch.float64)
        scheduler = PFSchedulerSUMIMO(users, 1, 1, batch_size=1, beta=0.5, precision="double")
        # its discounted past throughput becomes 0.5 * 1 + 0.5 * rate_last_slot = what the user already sends
        chosen = scheduler((2.0 * have - 1.0)[None, :], more[None, None, None, :])
        held[int(torch.nonzero(chosen[0, 0, 0, :, 0])[0, 0])] += 1
    out.append(held)
print(json.dumps(out))
"""
"""Sionna SYS's ``PFSchedulerSUMIMO`` handing out PRBs one at a time: each to the user whose PF metric, the rate
the PRB would add over the throughput it already has, is highest."""

PF_CASES = [
    (8, [20.0, 0.5, 3.0], [92.0, 140.0, 135.0], [4, 2, 2]),
    (12, [50.0, 0.2, 5.0, 1.0], [85.0, 145.0, 120.0, 138.0], [4, 2, 4, 2]),
]
"""(PRBs, whole-carrier SINRs, losses, the PRBs ``SIONNA_PF`` gives each phone): P0 −80 dBm, α 0.8, Shannon; recorded
with sionna-no-rt 2.x (``test_pf_shares_equal_sionnas_scheduler`` runs it again under ``-m slow``)."""


def _pf_tables() -> list[np.ndarray]:
    tables = []
    for prbs, snr, loss, _ in PF_CASES:
        channel = PhysicalChannel(bandwidth_hz=prbs * 180e3, ul_p0_dbm=-80.0, ul_alpha=0.8)
        tables.append(prb.share_table(_link(channel, snr, loss), "shannon"))
    return tables


def test_pf_shares_match_sionnas_scheduler_on_small_cases():
    """Three phones on 8 PRBs (one below its maximum, two capped) and four on 12: the proportional-fair split
    gives the PRBs Sionna's PF scheduler hands out one by one (recorded), not the equal split."""
    for table, (_, _, _, sionna) in zip(_pf_tables(), PF_CASES):
        np.testing.assert_array_equal(prb.pf_shares(table), sionna)
        assert not np.allclose(prb.pf_speed(table), prb.equal_speed(table, table.shape[0]))


@pytest.mark.slow
@pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed")
def test_pf_shares_equal_sionnas_scheduler():
    tables = _pf_tables()
    done = subprocess.run([sys.executable, "-c", SIONNA_PF], input=json.dumps([t.tolist() for t in tables]), capture_output=True,
                          text=True, check=True)
    for table, held in zip(tables, json.loads(done.stdout)):
        np.testing.assert_array_equal(prb.pf_shares(table), held)


def test_pf_by_hand_gives_the_capped_phone_fewer_prbs():
    """M = 4. A (uncapped, k/4) and B (capped: 0.6, 0.8, 0.9, 1). After one PRB each, the metrics of a second PRB are
    A (0.5 − 0.25)/0.25 = 1 and B (0.8 − 0.6)/0.6 = 1/3; then A's third, (0.75 − 0.5)/0.5 = 1/2, still beats B's: A
    holds 3 PRBs (speed 0.75), B 1 (0.6). Services 1 and 2 s: A lands at 4/3 s, B has 2 − 0.8 = 1.2 s left and lands
    at 2.5333 s (equal split: 2 and 2.4 s). PF's sum of log-rates, log 0.75 + log 0.6, beats the equal split's."""
    table = np.array([[0, 0.25, 0.5, 0.75, 1.0], [0, 0.6, 0.8, 0.9, 1.0]])
    np.testing.assert_array_equal(prb.pf_shares(table), [3, 1])
    landed, airtime, prb_s = prb.prb_landings(0.0, np.array([1.0, 2.0]), table, "proportional_fair")
    np.testing.assert_allclose(landed, [4 / 3, 4 / 3 + 1.2], rtol=1e-12)
    np.testing.assert_allclose(prb_s, [4.0, 4 / 3 + 1.2 * 4], rtol=1e-12)
    np.testing.assert_allclose(prb.prb_landings(0.0, np.array([1.0, 2.0]), table)[0], [2.0, 2.4], rtol=1e-12)
    assert math.log(0.75) + math.log(0.6) > math.log(0.5) + math.log(0.8)


def test_pf_splits_equally_when_no_phone_is_capped():
    """Rates k/M for everyone: every phone's metric for its next PRB is the same, so PF gives M/m each."""
    k = np.arange(8) / 7
    for m in (1, 2, 3, 5, 7):
        table = np.tile(k, (m, 1))
        np.testing.assert_allclose(prb.pf_shares(table), np.full(m, 7 / m), rtol=1e-12)
        np.testing.assert_allclose(prb.pf_speed(table), prb.equal_speed(table, m), rtol=1e-12)
