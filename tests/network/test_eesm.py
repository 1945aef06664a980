"""EESM over subbands (``physical.subband_mapping: eesm``, ``nr.EesmLink``): flat limit, a hand-computed block,
the search's premises, and the many-subband limit of a worst-user multicast."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, SystemProfile, link, nr
from wirelessfl.network.profile import PhysicalChannel
from wirelessfl.seam import CommPlan

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")


@pytest.fixture(scope="module")
def pdsch():
    return nr.eesm_link(nr.make_link("dl", 20e6, 30))


def test_the_beta_table_is_sionnas():
    """Sionna's default EESM table for MCS table 1 (sionna/sys/esm_params/eesm_beta_table.json), exported once."""
    beta = nr.load_tables(1).eesm_beta
    assert beta[:3].tolist() == [1.6, 1.61, 1.63] and beta[10] == 3.97 and beta[28] == 34.28


@pytest.mark.parametrize("direction", ["dl", "ul"])
def test_one_subband_is_flat_fading_exactly(direction):
    flat = nr.make_link(direction, 20e6, 30)
    snr = 10.0 ** (np.random.default_rng(0).uniform(-1.0, 3.5, 5000))
    assert np.array_equal(nr.eesm_link(flat).subbands_se(snr[:, None]), flat(snr))


def test_a_hand_computed_block(pdsch):
    """Subbands at SINR 1 and 10: MCS 12 (beta 4.71) has
    -4.71·ln((e^(-1/4.71) + e^(-10/4.71))/2) = 4.71·0.76747 = 3.6148 (5.58 dB, grid index 106) and meets 10%;
    MCS 13 (beta 5.16) has 5.16·0.72587 = 3.7455 (5.73 dB, index 107) and does not."""
    assert nr.eesm_sinr(np.array([1.0, 10.0]), 4.27) == pytest.approx(3.4700579230169546, rel=1e-12)
    assert nr.eesm_sinr(np.array([1.0, 10.0]), 4.71) == pytest.approx(3.6148, abs=1e-4)
    assert nr.eesm_sinr(np.array([1.0, 10.0]), 5.16) == pytest.approx(3.7455, abs=1e-4)
    mcs, index = pdsch.mcs_and_index(np.array([[1.0, 10.0]]))
    assert (int(mcs[0]), int(index[0])) == (12, 106)
    assert pdsch.usable[12, 106] and not pdsch.usable[13, 107]
    slot_rate = pdsch.goodput_by_mcs[12, 106] / (pdsch.link.slot_s * 20e6)
    assert pdsch.subbands_se(np.array([[1.0, 10.0]]))[0] == slot_rate



def test_an_mcs_without_a_beta_is_never_sent_over_subbands_and_any_positive_beta_is_a_beta(pdsch):
    """Beta 0 is Sionna's "no beta for this MCS": EESM cannot map it, so it serves no SINR; a beta below 1 (none in
    Sionna's table, whose smallest is 1.6) is an ordinary beta, and the MCS serves where its TBLER meets the target."""
    flat = pdsch.link
    meets = nr.tbler_table(flat.tables, flat.category, flat.prbs)[12] <= flat.bler_target
    assert 0 < meets.mean() < 1
    for beta, usable in ((0.0, np.zeros_like(meets)), (0.5, meets)):
        betas = flat.tables.eesm_beta.copy()
        betas[12] = beta
        link = dataclasses.replace(flat, tables=dataclasses.replace(flat.tables, eesm_beta=betas))
        np.testing.assert_array_equal(nr.eesm_link(link).usable[12], usable)


def test_the_search_is_the_exhaustive_one(pdsch):
    """The search's premises (TBLER falls with SINR; beta grows with the MCS; the effective SINR grows with beta
    and lies between the weakest and the mean subband) hold, and it chooses what trying every MCS does."""
    for table in (1, 2):
        beta = nr.load_tables(table).eesm_beta
        assert np.all(np.diff(beta[beta > 0]) >= 0) and np.all(beta[: np.count_nonzero(beta)] > 0)
        for category in (nr.PUSCH, nr.PDSCH):
            tbler = nr.tbler_table(nr.load_tables(table), category, 51)
            finite = np.isfinite(tbler).all(axis=1)
            assert np.all(np.diff(tbler[finite], axis=1) <= 0)
    sinr = np.random.default_rng(1).standard_exponential((20_000, 6)) * 10.0 ** np.random.default_rng(2).uniform(-0.5, 2.5, (20_000, 1))
    beta = pdsch.link.tables.eesm_beta
    best = np.full(sinr.shape[0], -1)
    for m in np.flatnonzero(beta > 0).tolist():
        at = nr.snr_index(pdsch.link.tables, nr.eesm_sinr(sinr.astype(np.float32), np.full(sinr.shape[0], beta[m])))
        best = np.where(pdsch.usable[m, at], m, best)
        effective = nr.eesm_sinr(sinr, beta[m])
        assert np.all(effective >= sinr.min(axis=1) * (1 - 1e-12)) and np.all(effective <= sinr.mean(axis=1) * (1 + 1e-12))
        if m > 0 and beta[m - 1] > 0:
            assert np.all(effective >= nr.eesm_sinr(sinr, beta[m - 1]) * (1 - 1e-12))
    assert np.array_equal(pdsch.mcs_and_index(sinr)[0], best)


def test_many_subbands_take_a_worst_user_multicast_to_the_eesm_limit_of_its_weakest_receiver(pdsch):
    """Rayleigh subbands at mean γ: with S subbands the mean of exp(-γ·g/β) tends to 1/(1 + γ/β), so every
    receiver's effective SINR tends to β·ln(1 + γ/β) and the stream to that deterministic rate at its weakest
    receiver's γ, instead of the flat worst-of-20 block that is in outage or at a low MCS most of the time."""
    weakest = 10.0 ** 0.5
    snr = np.concatenate([[weakest], np.full(19, 10.0)])
    beta = pdsch.link.tables.eesm_beta
    limit = 0.0
    for m in range(beta.size - 1, -1, -1):
        at = int(nr.snr_index(pdsch.link.tables, beta[m] * math.log1p(weakest / beta[m])))
        if beta[m] > 0 and pdsch.usable[m, at]:
            limit = pdsch.goodput_by_mcs[m, at] / pdsch.link.slot_s
            break

    def rate(subbands):
        sent = link.multicast_transfer(1e7, 20e6, snr, np.random.default_rng(4), 1e-3, link=pdsch, subbands=subbands)
        return sent.rate_bps

    assert rate(256) == pytest.approx(limit, rel=0.03)
    assert rate(16) < rate(256)
    assert rate(1) < 0.35 * limit


def test_an_eesm_profile_runs_end_to_end():
    physical = {"path_loss_model": "UMa", "bandwidth_hz": 20e6, "coherence_s": 0.005, "link": "nr", "subbands": 8}
    plan = CommPlan.broadcast(range(20), model_params=20_000)

    def round_of(mapping):
        profile = SystemProfile.from_dict({"name": "cell", "t_min": 0.05, "physical": {**physical, "subband_mapping": mapping}})
        return NetworkModel(profile, 20, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1))

    mean, eesm = round_of("mean"), round_of("eesm")
    assert math.isfinite(eesm.t_end) and eesm.t_uploaded != mean.t_uploaded
    assert all(e.rate_bps <= m.rate_bps * 1.05 for e, m in zip(eesm.deliveries, mean.deliveries))


def test_bad_mappings_are_one_line():
    with pytest.raises(ValueError) as error:
        PhysicalChannel.from_dict({"subband_mapping": "mmib"})
    assert str(error.value) == (
        "physical.subband_mapping must be one of 'mean', 'eesm' (mean: each subband at its own efficiency; "
        "eesm: one MCS per transport block), got 'mmib'"
    )
    with pytest.raises(ValueError) as error:
        PhysicalChannel.from_dict({"subband_mapping": "eesm"})
    assert str(error.value) == "physical.subband_mapping 'eesm' needs link 'nr' (its beta is per NR MCS), got link 'shannon'"


def test_sionnas_table_1_has_no_bler_data_for_mcs_0_to_2_so_no_link_sends_them(pdsch):
    """Sionna's BLER tables for MCS table 1 start at MCS 3: MCS 0-2 read inf at every SINR, so no link (either
    direction, any width or target) selects them and ``EesmLink`` never ends its search there. Two mutants of
    ``nr.py`` are equivalent for this reason alone (MCS 0's TBS zeroed in ``make_link``; MCS 0 read as MCS 1 in
    ``EesmLink.subbands_se``): this test says when a Sionna update makes them live."""
    tbler = nr.tbler_table(pdsch.link.tables, pdsch.link.category, pdsch.link.prbs)
    assert np.isinf(tbler[:3]).all() and np.isfinite(tbler[3]).any()
    for direction in ("dl", "ul"):
        for target in (0.001, 0.5):
            assert nr.make_link(direction, 5e6, 30, bler_target=target).mcs.max() >= 3
            assert not np.isin(nr.make_link(direction, 5e6, 30, bler_target=target).mcs, [0, 1, 2]).any()
    assert not pdsch.usable[:3].any() and not pdsch.goodput_by_mcs[:3].any()



def test_neither_mcs_table_has_bler_data_for_mcs_0_so_no_link_sends_it():
    """Table 2 (256QAM) as table 1: MCS 0 reads inf at every SINR and code-block size in both directions (table 2's
    data start at MCS 2 for PDSCH, 9 for PUSCH), so no link selects MCS 0 and the ``mcs >= 0`` mutants of ``nr.py``
    (MCS 0 read as not sent, or as MCS 1) are equivalent for every table wirelessfl supports."""
    for table in nr.MCS_TABLES:
        tables = nr.load_tables(table)
        assert np.isinf(tables.bler[:, 0]).all()
        for direction in ("dl", "ul"):
            assert (nr.make_link(direction, 5e6, 30, mcs_table=table, bler_target=0.5).mcs != 0).all()


def test_building_an_eesm_link_warns_of_nothing(pdsch):
    """The SINRs where an MCS does not serve get no HARQ statistics of some other MCS (MCS 0 has none: inf, NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = nr.eesm_link(pdsch.link)
    np.testing.assert_array_equal(again.goodput_by_mcs, pdsch.goodput_by_mcs)


def test_the_effective_sinr_is_clamped_at_sionnas_plus_and_minus_30_db():
    """Sionna's ``EESM`` clamps to [-30, 30] dB: subbands all at +-50 dB read 1000 and 0.001, float32 and float64."""
    for dtype in (np.float32, np.float64):
        high, low = np.full((1, 3), 1e5, dtype=dtype), np.full((1, 3), 1e-5, dtype=dtype)
        assert nr.eesm_sinr(high, 2.0)[0] == dtype(1000.0) and nr.eesm_sinr(low, 2.0)[0] == dtype(0.001)
