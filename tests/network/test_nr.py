"""The ``nr`` link abstraction: numpy lookups equal Sionna SYS's own calls, HARQ by hand, outage in closed form."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.network import link, nr

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")

GRID_DB = [-4.0, -2.8, -1.0, 0.0, 2.0, 5.02, 7.98, 10.0, 12.5, 15.0, 19.6, 22.0, 27.0]
"""SINRs on Sionna's 0.1 dB grid, or within 0.02 dB of it (never at a half step, where float32 may round
either way)."""

SIONNA_REFERENCE = r"""
import json, sys, torch
import sionna.sys as ss
from sionna.phy.nr.utils import decode_mcs_index
cases = json.loads(sys.argv[1])
pa = ss.PHYAbstraction(device="cpu")
illa = ss.InnerLoopLinkAdaptation(pa, bler_target=0.1, device="cpu")
out = []
for case in cases:
    sinr = torch.tensor([10 ** (db / 10) for db in case["db"]], dtype=torch.float32)
    re = torch.full_like(sinr, case["re"], dtype=torch.int32)
    mcs = illa(sinr_eff=sinr, num_allocated_re=re, mcs_table_index=case["table"], mcs_category=case["cat"])
    tbler = []
    for m in case["mcs"]:
        _, _, _, t, _ = pa(torch.full_like(re, m), sinr_eff=sinr, num_allocated_re=re,
                           mcs_table_index=case["table"], mcs_category=case["cat"])
        tbler.append(t.tolist())
    qm, r = decode_mcs_index(torch.arange(29), table_index=case["table"], is_pusch=case["cat"] == 0,
                             check_index_validity=False)
    out.append({"mcs": mcs.tolist(), "tbler": tbler, "se": (qm * r).tolist(), "qm": qm.tolist()})
print(json.dumps(out))
"""

CASES = [
    {"cat": 1, "table": 1, "prbs": 51, "mcs": [3, 5, 12, 15, 20, 28]},
    {"cat": 0, "table": 1, "prbs": 51, "mcs": [3, 9, 15, 27]},
    {"cat": 1, "table": 1, "prbs": 5, "mcs": [4, 10, 18]},
    {"cat": 1, "table": 2, "prbs": 106, "mcs": [2, 10, 20, 26]},
]


SIONNA_SAID = Path(__file__).with_name("sionna_reference.json")
"""What ``SIONNA_REFERENCE`` printed for ``CASES`` (sionna-no-rt 2.x): the default run compares with this record,
since importing Sionna in a child costs about 30 s of CPU; ``-m slow`` checks the record against Sionna itself."""


def _sionna_now() -> list[dict]:
    """Sionna's ILLA MCS, PHYAbstraction TBLER and TS 38.214 spectral efficiency, computed in a child process
    (importing Sionna reseeds torch's generator)."""
    cases = [{**c, "re": c["prbs"] * 156, "db": GRID_DB} for c in CASES]
    done = subprocess.run([sys.executable, "-c", SIONNA_REFERENCE, json.dumps(cases)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def sionna_says() -> list[dict]:
    return json.loads(SIONNA_SAID.read_text())


@pytest.mark.slow
def test_the_recorded_answers_are_sionnas_own_calls(sionna_says):
    now = _sionna_now()
    assert len(now) == len(sionna_says) == len(CASES)
    for said, recorded in zip(now, sionna_says):
        assert said["mcs"] == recorded["mcs"] and said["qm"] == recorded["qm"]
        np.testing.assert_allclose(np.array(said["tbler"], float), np.array(recorded["tbler"], float), rtol=0, atol=1e-7)
        np.testing.assert_allclose(np.array(said["se"], float), np.array(recorded["se"], float), rtol=0, atol=1e-7)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_mcs_tbler_and_spectral_efficiency_equal_sionnas_own_calls(sionna_says, index):
    case, said = CASES[index], sionna_says[index]
    tables = nr.load_tables(case["table"], 156)
    tbler = nr.tbler_table(tables, case["cat"], case["prbs"])
    snr = np.array([10 ** (db / 10) for db in GRID_DB])
    s = nr.snr_index(tables, snr)
    ours = nr.select_mcs(tbler, 0.1)[s]
    theirs = np.array(said["mcs"])
    in_service = ours >= 0
    # Where some MCS meets the target both pick the same; below that Sionna falls back to its lowest MCS.
    np.testing.assert_array_equal(ours[in_service], theirs[in_service])
    assert not in_service[0] and in_service[-1]  # -4 dB is below every MCS, 27 dB above the lowest
    lowest = int(np.flatnonzero(np.isfinite(tbler[:, -1]))[0])
    assert (theirs[~in_service] == lowest).all()
    for m, row in zip(case["mcs"], said["tbler"]):
        np.testing.assert_allclose(tbler[m, s], row, rtol=0, atol=1e-6)
    qm = tables.qm[case["cat"]]
    valid = qm > 0
    se = (qm * tables.rate[case["cat"]])[valid]
    np.testing.assert_allclose(se, np.array(said["se"][: qm.size])[valid], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(qm, said["qm"][: qm.size])



def test_the_tables_and_links_are_frozen():
    """``load_tables`` hands every caller the same ``NrTables`` (``lru_cache``), and the links are cached too
    (``physical``): none of them can be changed in place."""
    dl = nr.make_link("dl", 20e6)
    for shared in (dl.tables, dl, nr.eesm_link(dl), nr.olla_link(dl)):
        field = dataclasses.fields(shared)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(shared, field, getattr(shared, field))


def test_an_sinr_off_either_end_of_the_grid_reads_the_edge_point_one_or_many():
    """Sionna's clamp: below -5 dB (0 and -inf dB included) the first point, above the last the last, for a scalar
    SINR as for an array of them."""
    dl = nr.make_link("dl", 20e6)
    last = dl.tables.bler.shape[3] - 1
    for snr, index in ((0.0, 0), (1e-3, 0), (10 ** -0.5, 0), (10 ** 3.5, last), (1e9, last)):
        assert int(nr.snr_index(dl.tables, snr)) == index
        assert nr.snr_index(dl.tables, np.array([snr])).tolist() == [index]
    assert int(nr.snr_index(dl.tables, 10 ** -0.45)) == 5  # -4.5 dB is the sixth point: the clamps hold nothing else
    assert float(dl(1e9)) == dl.goodput_bits[last] / (dl.slot_s * 20e6) > 0


@pytest.mark.parametrize("target", [0, 1, 1.5])
def test_a_bler_target_outside_0_1_is_one_line(target):
    with pytest.raises(ValueError) as caught:
        nr.make_link("dl", 20e6, bler_target=target)
    assert str(caught.value) == f"bler_target must be in (0, 1), got {target!r}"


def test_an_mcs_whose_tbler_equals_the_target_meets_it():
    """``TBLER <= target``, by hand (exact in float32) and on Sionna's tables: with the target set to one of its
    TBLERs, that MCS serves that SINR, in the flat link and in EESM's."""
    tbler = np.array([[0.0, 0.25], [0.25, 0.5]], dtype=np.float32)
    assert nr.select_mcs(tbler, 0.25).tolist() == [1, 0]
    assert nr.select_mcs(tbler, 0.2).tolist() == [0, -1]
    tables = nr.load_tables(1)
    s = int(nr.snr_index(tables, 10 ** 0.5))
    target = float(nr.tbler_table(tables, nr.PDSCH, 51)[12, s])
    assert 0.01 < target < 0.2
    dl = nr.make_link("dl", 20e6, bler_target=target)
    assert int(dl.mcs[s]) >= 12 and nr.eesm_link(dl).usable[12, s]


def test_a_link_waits_for_no_round_trip_unless_given_one():
    dl = nr.make_link("dl", 20e6)
    assert dl.harq_rtt_s == 0.0 and float(dl.tail_s(10.0)) == 0.0 and dl.transmissions[int(nr.snr_index(dl.tables, 10.0))] > 1


def test_an_mcs_a_table_marks_not_valid_is_never_sent_and_pi_2_bpsk_is_valid():
    """qm 0 (an MCS the table has not) has no TBLER, so no link selects it; qm 1 (pi/2-BPSK) is an MCS like any."""
    tables = nr.load_tables(1)
    for qm, unusable in ((0, True), (1, False)):
        marked = tables.qm.copy()
        marked[nr.PDSCH, 12] = qm
        tbler = nr.tbler_table(dataclasses.replace(tables, qm=marked), nr.PDSCH, 51)
        assert np.isinf(tbler[12]).all() == unusable and (12 in nr.select_mcs(tbler, 0.1)) != unusable


def test_a_hand_computed_harq_round():
    """51 PRBs of PDSCH table 1 at 5 dB: MCS 12 (16QAM, R = 434/1024), TBS 13576 bits in 2 code blocks.
    The first copy fails with p1 = TBLER(12, 5 dB); the Chase-combined second copy decodes at 8.01 dB,
    where TBLER(12) is 0; so E[transmissions] = 1 + p1, nothing is lost, and the goodput per 0.5 ms slot
    is 13576 / (1 + p1). A 10 Mbit transfer at a fixed SINR (no fading) takes that many slots, plus the
    last TB's expected round trips."""
    dl = nr.make_link("dl", 20e6, scs_khz=30, harq_retransmissions=3, harq_rtt_s=2e-3)
    tables = dl.tables
    s = int(nr.snr_index(tables, 10 ** 0.5))
    assert dl.prbs == 51 and int(dl.mcs[s]) == 12
    assert (int(tables.qm[1, 12]), round(float(tables.rate[1, 12]) * 1024)) == (4, 434)
    assert (int(tables.tbs[1, 12, 50]), int(tables.ncb[1, 12, 50])) == (13576, 2)
    cbs_index = int(np.rint((tables.cbs[1, 12, 50] - 24) / 100))
    p1 = 1.0 - (1.0 - float(tables.bler[1, 12, cbs_index, s])) ** 2
    assert 0.02 < p1 < 0.03
    assert float(tables.bler[1, 12, cbs_index, s + 30]) == 0.0  # +3.0 dB: the combined copy always decodes
    assert dl.transmissions[s] == pytest.approx(1 + p1, rel=1e-6)
    assert dl.lost[s] == 0.0
    assert dl.goodput_bits[s] == pytest.approx(13576 / (1 + p1), rel=1e-6)
    bits = 10e6
    rng = np.random.default_rng(0)
    sent = link.transfer_time(bits, 20e6, 10 ** 0.5, rng, 0.02, fading="none", link=dl)
    slot = 0.5e-3
    assert float(sent.time_s) == pytest.approx(bits / (13576 / (1 + p1)) * slot, rel=1e-5)
    assert float(dl.tail_s(10 ** 0.5)) == pytest.approx(2e-3 * p1, rel=1e-5)  # p1 in float32, as Sionna


def test_a_tb_lost_after_its_last_retransmission():
    """With no retransmissions a TB is lost with p1; with one, with p1·p2 (copy 2 at twice the SINR)."""
    for retx in (0, 1):
        dl = nr.make_link("dl", 20e6, harq_retransmissions=retx)
        tables = dl.tables
        tbler = nr.tbler_table(tables, nr.PDSCH, 51)
        s = int(nr.snr_index(tables, 10 ** 1.0))
        m = int(dl.mcs[s])
        p1, p2 = float(tbler[m, s]), float(tbler[m, s + 30])
        assert dl.lost[s] == pytest.approx(p1 if retx == 0 else p1 * p2, abs=1e-12)
        assert dl.transmissions[s] == pytest.approx(1.0 if retx == 0 else 1.0 + p1, abs=1e-12)


def test_outage_probability_under_rayleigh_matches_one_minus_exp():
    """A block is in outage when no MCS meets the target: SINR below θ, the grid point where service starts
    less half a step. Under Rayleigh fading P(out) = 1 - exp(-θ/γ̄)."""
    dl = nr.make_link("dl", 20e6)
    theta = 10 ** ((dl.threshold_db() - 0.05) / 10)
    gains = np.random.default_rng(7).standard_exponential(400_000)
    for mean_db in (0.0, 5.0, 10.0):
        mean = 10 ** (mean_db / 10)
        measured = float(np.mean(dl(mean * gains) == 0.0))
        expected = 1 - math.exp(-theta / mean)
        assert measured == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / gains.size) + 1e-4)


def test_a_long_nr_transfer_sees_the_ergodic_goodput():
    """Over many Rayleigh blocks the mean rate is E[B·SE(γ̄X)], here integrated over the exponential law on
    the lookup's own grid cells (renewal-reward), within 1%."""
    ul = nr.make_link("ul", 20e6)
    mean = 10 ** 0.8
    edges_db = np.concatenate(([-np.inf], ul.tables.snr_db[:-1] + 0.05, [np.inf]))
    cdf = 1 - np.exp(-(10 ** (edges_db / 10)) / mean)
    probability = np.diff(cdf)
    ergodic = 20e6 * float(np.sum(probability * ul.goodput_bits / (ul.slot_s * 20e6)))
    bits = ergodic * 2000 * 0.01
    times = link.transfer_time(np.full(20, bits), 20e6, mean, np.random.default_rng(3), 0.01, link=ul).time_s
    assert bits / float(np.mean(times)) == pytest.approx(ergodic, rel=0.01)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"bler_target": 1.0}, r"^physical.nr.bler_target must be in \(0, 1\) \(.*\), got 1$"),
        ({"bler_target": 0}, r"^physical.nr.bler_target must be in \(0, 1\)"),
        ({"mcs_table": 3}, r"^physical.nr.mcs_table must be 1 \(64QAM\) or 2 \(256QAM\), got 3$"),
        ({"subcarrier_spacing_khz": 120}, r"^physical.nr.subcarrier_spacing_khz must be one of 15, 30, 60 \(FR1\), got 120$"),
        ({"harq_retransmissions": -1}, r"^physical.nr.harq_retransmissions must be an integer in \[0, 8\]"),
        ({"harq_rtt_ms": 1e3}, r"^physical.nr.harq_rtt_ms must be in \[0, 100\]"),
        ({"data_re_per_prb": 156.5}, r"^physical.nr.data_re_per_prb must be a whole number"),
        ({"window": 3}, r"^unknown physical.nr keys \['window'\]; allowed keys: subcarrier_spacing_khz, "),
    ],
)
def test_bad_nr_settings_name_the_field(settings, message):
    from wirelessfl.network import PhysicalChannel

    with pytest.raises(ValueError, match=message):
        PhysicalChannel(link="nr", bandwidth_hz=20e6, nr=settings)


def test_an_nr_carrier_must_have_a_standard_width():
    from wirelessfl.network import PhysicalChannel

    with pytest.raises(ValueError, match=r"^physical.bandwidth_hz: an NR carrier at 30 kHz spacing is 5, 10, .*, 100 MHz wide \(TS 38.101-1\), got 12 MHz$"):
        PhysicalChannel(link="nr", bandwidth_hz=12e6)
    with pytest.raises(ValueError, match=r"^physical.nr applies to link 'nr' only, but link is 'shannon'$"):
        PhysicalChannel(nr={"mcs_table": 1})
    assert PhysicalChannel(link="nr", bandwidth_hz=100e6).nr.subcarrier_spacing_khz == 30
    assert nr.prbs_for(20e6, 30) == 51 and nr.prbs_for(20e6, 15) == 106 and nr.prbs_for(100e6, 30) == 273


def test_a_missing_sionna_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from wirelessfl.cli import app
    from wirelessfl.network import physical

    scenario = tmp_path / "nr.yaml"
    scenario.write_text(
        "name: nr\nrounds: 1\ndata: {dataset: digits, clients: 4}\nalgorithms: [{name: fedavg}]\n"
        "networks: [{name: cell, physical: {link: nr, bandwidth_hz: 20.0e+6}}]\n"
    )
    monkeypatch.setattr(nr, "find_sionna", lambda: None)
    nr.load_tables.cache_clear()
    physical.nr_link.cache_clear()
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].endswith(
        "network 'cell': physical.link 'nr' needs Sionna SYS: pip install 'sionna-no-rt>=2.2,<3' (it is not installed)"
    )
    assert not out.exists()


def test_the_network_process_never_imports_sionna_or_torch_for_nr():
    code = (
        "import sys; from wirelessfl.network import nr; link = nr.make_link('dl', 20e6); link(1.0);"
        "print('torch' in sys.modules, any(m.startswith('sionna') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    "setting, message",
    [
        ("networks.0.physical.carrier_ghz=200", "networks[0]: physical.carrier_ghz must be in [0.5, 100] (TR 38.901's range; RMa stops at 30 GHz), got 200"),
        ("networks.0.physical.nr.bler_target=1.5", "networks[0]: physical.nr.bler_target must be in (0, 1) (a transport-block error rate; 0.1 is usual), got 1.5"),
        ("networks.1.physical.coverage_q=0", "networks[1]: physical.coverage_q must be in [0.01, 1] (the share of a stream's receivers its rate serves), got 0"),
        ("networks.0.physical.coherence_s=0", "networks[0]: physical.coherence_s must be in [1e-05, 3600] (from a 10 us mmWave block to a static hour), got 0"),
        ("networks.0.physical.path_loss_model=UMX", "networks[0]: physical.path_loss_model must be one of 'log_distance', 'UMa', 'UMi', 'RMa', got 'UMX'"),
    ],
)
def test_bad_cell_settings_of_the_nr_scenario_are_one_line_and_write_nothing(tmp_path, setting, message):
    from pathlib import Path

    from typer.testing import CliRunner

    from wirelessfl.cli import app

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "nr-cell.yaml"
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(out), "--set", setting])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {scenario}: {message}"
    assert not out.exists()


def test_an_nr_round_over_blocks_reports_each_clients_modal_mcs_and_expected_retransmissions():
    from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile
    from wirelessfl.network import physical as phy
    from wirelessfl.seam import CommPlan

    physical = PhysicalChannel(path_loss_model="UMa", cell_radius_m=600, min_distance_m=35, link="nr", bandwidth_hz=20e6, ue_speed_mps=1.4)
    model = NetworkModel(SystemProfile(name="cell", physical=physical), 30, np.random.default_rng(1))
    timing = model.time_round(CommPlan.broadcast(range(30), model_params=10_000), np.random.default_rng(2))
    snr = phy.mean_snr(physical.ue_power_dbm, model.path_loss_db, physical.uplink_bandwidth_hz, physical.noise_density_dbm_hz)
    modes, per_bit = phy.uplink_block_use(physical, snr, model.los)
    assert [timing.mcs[c] for c in range(30)] == modes.tolist()
    assert [timing.retransmissions[c] for c in range(30)] == np.rint(10_000 * 32 * per_bit).astype(int).tolist()
    assert -1 in modes and max(modes) >= 10  # a 600 m cell has users whose blocks are mostly outage, and good ones
    assert max(timing.retransmissions.values()) > 0
    plain = NetworkModel(SystemProfile(name="cell", physical=PhysicalChannel()), 3, np.random.default_rng(1))
    none = plain.time_round(CommPlan.broadcast(range(3), model_params=10), np.random.default_rng(2))
    assert dict(none.mcs) == {} and dict(none.retransmissions) == {}
