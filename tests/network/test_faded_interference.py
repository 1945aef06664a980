"""Faded interference (``topology.interference: faded``, ``network/interference.py``) against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from wirelessfl.network import NetworkModel, SystemProfile, link
from wirelessfl.network.interference import FadedInterference
from wirelessfl.network.profile import PhysicalChannel
from wirelessfl.network.topology import Topology, drop_federation
from wirelessfl.seam import CommPlan

CELL = {"link_budget": "tr38901-calibration", "path_loss_model": "UMa", "carrier_ghz": 3.5, "min_distance_m": 35,
        "bandwidth_hz": 20e6, "coherence_s": 0.01, "topology": {"rings": 1, "load": 0.5}}


def _faded(**extra) -> PhysicalChannel:
    return PhysicalChannel.from_dict({**CELL, "topology": {**CELL["topology"], "interference": "faded"}, **extra})


def test_one_rayleigh_interferer_gives_the_closed_form_outage():
    """Rayleigh desired (mean S) and one Rayleigh interferer (mean I), noise 1:
    P(S·g/(1 + I·h) < t) = 1 - exp(-t/S) / (1 + t·I/S)."""
    signal, interferer, draws = 10.0, 4.0, 400_000
    faded = FadedInterference.from_powers(np.full((draws, 1), interferer), load=1.0)
    assert np.all(faded.shape == 1.0) and np.all(faded.scale == interferer)
    rng = np.random.default_rng(3)
    sinr = faded.sinr(np.full(draws, signal), rng.standard_exponential((draws, 1)), rng)[:, 0]
    for t in (0.3, 1.0, 2.0, 5.0):
        closed = 1.0 - math.exp(-t / signal) / (1.0 + t * interferer / signal)
        error = math.sqrt(closed * (1.0 - closed) / draws)
        assert abs(np.mean(sinr < t) - closed) < 4.0 * error, t


def test_the_mean_interference_is_the_mean_rise_models():
    """Each user's mean interference equals the mean-rise model's 10^(rise/10) - 1 (both directions, load 0.5);
    drawn, it has that mean and the Bernoulli-times-Rayleigh sum's variance."""
    channel = _faded()
    drop = drop_federation(channel, channel.topology, 300, np.random.default_rng(0))
    assert np.allclose(drop.dl_interference.mean, 10.0 ** (drop.dl_rise_db / 10.0) - 1.0, rtol=1e-9)
    assert np.allclose(drop.ul_interference.mean, 10.0 ** (drop.ul_rise_db / 10.0) - 1.0, rtol=1e-9)
    powers = np.array([[3.0, 1.0, 0.5, 0.25]])
    faded = FadedInterference.from_powers(powers, load=0.5)
    assert faded.mean[0] == pytest.approx(0.5 * powers.sum(), rel=1e-12)
    draws = faded.subset(np.zeros(200_000, dtype=int)).draw(np.random.default_rng(5), (200_000, 1))[:, 0]
    rng = np.random.default_rng(6)
    direct = (rng.random((200_000, 4)) < 0.5) * rng.standard_exponential((200_000, 4)) @ powers[0]
    assert draws.mean() == pytest.approx(direct.mean(), rel=0.01)
    assert draws.var() == pytest.approx(0.5 * 1.5 * (powers**2).sum(), rel=0.03)
    assert direct.var() == pytest.approx(0.5 * 1.5 * (powers**2).sum(), rel=0.03)


def test_equal_interferers_at_full_load_are_a_gamma_sum_exactly():
    """k equal Rayleigh interferers always on: their sum is Gamma(k), which the draw is (KS)."""
    faded = FadedInterference.from_powers(np.full((50_000, 5), 2.0), load=1.0)
    assert np.all(faded.shape == 5.0)
    drawn = faded.draw(np.random.default_rng(1), (50_000, 1))[:, 0]
    assert stats.kstest(drawn, stats.gamma(5.0, scale=2.0).cdf).pvalue > 1e-3


def test_a_long_transfer_sees_the_ergodic_rate_under_faded_interference():
    """4,000 blocks (past the drawn 256, so the renewal-theory rest over the fixed samples counts): the time is
    bits / E[B·log2(1 + S·g/(1 + I))], the expectation over a large independent sample."""
    faded = FadedInterference.from_powers(np.array([[2.0, 1.0]] * 300), load=0.7)
    snr, bandwidth, block = 20.0, 1e6, 1e-3
    rng = np.random.default_rng(9)
    g = rng.standard_exponential(400_000)
    i = faded.subset(np.zeros(400_000, dtype=int)).draw(rng, (400_000, 1))[:, 0]
    rate = bandwidth * np.mean(np.log2(1.0 + snr * g / (1.0 + i)))
    bits = rate * block * 4000
    sent = link.transfer_time(np.full(300, bits), bandwidth, np.full(300, snr), np.random.default_rng(2), block,
                              max_blocks=10**6, interference=faded)
    assert np.mean(sent.time_s) == pytest.approx(4000 * block, rel=0.01)


def test_a_users_transfer_does_not_depend_on_who_else_is_in_the_call():
    """One user alone in 1,500 calls against 1,500 copies in one call: the same law (means, KS)."""
    faded = FadedInterference.from_powers(np.array([[3.0, 0.5]]), load=1.0)
    alone = np.array([link.transfer_time(2e5, 1e6, 5.0, np.random.default_rng(s), 1e-3, interference=faded).time_s
                      for s in range(1500)]).ravel()
    many = link.transfer_time(np.full(1500, 2e5), 1e6, np.full(1500, 5.0), np.random.default_rng(0), 1e-3,
                              interference=faded.subset(np.zeros(1500, dtype=int))).time_s
    assert np.mean(many) == pytest.approx(np.mean(alone), rel=0.03)
    assert stats.ks_2samp(alone, many).pvalue > 1e-3


def test_a_faded_profile_runs_end_to_end_and_the_default_is_unchanged():
    """The same drop under ``mean`` (the default, written out or not) and ``faded``: the default's round is the
    same floats whether the field is given or not; faded rounds finish and differ."""
    plan = CommPlan.broadcast(range(30), model_params=20_000)

    def round_of(topology):
        physical = {**CELL, "topology": topology}
        profile = SystemProfile.from_dict({"name": "cell", "t_min": 0.05, "mu": 20.0, "physical": physical})
        return NetworkModel(profile, 30, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1))

    default = round_of({"rings": 1, "load": 0.5})
    written = round_of({"rings": 1, "load": 0.5, "interference": "mean"})
    faded = round_of({"rings": 1, "load": 0.5, "interference": "faded"})
    assert default.t_uploaded == written.t_uploaded and default.t_end == written.t_end
    assert math.isfinite(faded.t_end) and faded.t_uploaded != default.t_uploaded


def test_bad_interference_settings_are_one_line():
    with pytest.raises(ValueError) as error:
        Topology.from_dict({"interference": "rayleigh"})
    assert str(error.value) == (
        "physical.topology.interference must be one of 'mean', 'faded' (mean: the neighbours' mean power; "
        "faded: drawn per fading block), got 'rayleigh'"
    )
    with pytest.raises(ValueError) as error:
        _faded(coherence_s=None)
    assert str(error.value) == (
        "physical.topology.interference 'faded' needs block fading (set coherence_s or ue_speed_mps) and fading other than 'none'"
    )
    with pytest.raises(ValueError, match="needs block fading"):
        _faded(fading="none")


def test_the_defaults_leave_the_written_profile_as_it_was():
    """``to_dict`` leaves ``interference: mean`` and ``subband_mapping: mean`` out (a scenario's fingerprint, and so
    its checkpoints, stay as before they existed) and writes them when set; both round-trip."""
    plain = PhysicalChannel.from_dict(CELL)
    assert "interference" not in plain.to_dict()["topology"] and "subband_mapping" not in plain.to_dict()
    faded = _faded()
    assert faded.to_dict()["topology"]["interference"] == "faded"
    for channel in (plain, faded):
        assert PhysicalChannel.from_dict(channel.to_dict()) == channel
