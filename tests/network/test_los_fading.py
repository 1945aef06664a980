"""Rician fading only for users whose TR 38.901 drop made them LOS; NLOS users fade Rayleigh.

A power gain |h|² of mean 1 under Rician fading with linear K has variance (1 + 2K) / (1 + K)²
(|h|² = |sqrt(K/(K+1)) + CN(0, 1/(K+1))|²: a scaled non-central chi-square with 2 degrees of freedom);
K = 0 is Exp(1): mean 1, variance 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.network import link
from wirelessfl.network import physical as phy
from wirelessfl.network.model import NetworkModel
from wirelessfl.network.profile import PhysicalChannel, SystemProfile
from wirelessfl.network.topology import Topology, drop_federation

K_DB = 9.0
K = 10.0 ** (K_DB / 10.0)
LOS_VAR = (1.0 + 2.0 * K) / (1.0 + K) ** 2  # 0.2266 at 9 dB


def _moments(gains: np.ndarray) -> tuple[float, float]:
    return float(gains.mean()), float(gains.var())


def test_per_user_k_draws_each_class_by_its_own_law():
    k = np.array([K, 0.0])
    gains = link.draw_fading(np.random.default_rng(1), (2, 400_000), "rician", k)
    los_mean, los_var = _moments(gains[0])
    nlos_mean, nlos_var = _moments(gains[1])
    # Standard errors: var/sqrt(n) ~ 4e-4 (LOS), 1.6e-3 (NLOS); sample variance of Exp(1) has sd sqrt(8/n) = 4.5e-3.
    assert los_mean == pytest.approx(1.0, abs=3e-3)
    assert los_var == pytest.approx(LOS_VAR, abs=5e-3)
    assert nlos_mean == pytest.approx(1.0, abs=8e-3)
    assert nlos_var == pytest.approx(1.0, abs=3e-2)
    # NLOS is exponential, not just of variance 1: P(g > 3) = e^-3 (LOS: far less, its tail is thin).
    assert float((gains[1] > 3.0).mean()) == pytest.approx(np.exp(-3.0), abs=2e-3)
    assert float((gains[0] > 3.0).mean()) < 1e-3


def test_one_k_for_every_user_draws_the_same_floats_as_a_scalar_k():
    scalar = link.draw_fading(np.random.default_rng(5), (3, 7), "rician", K)
    per_user = link.draw_fading(np.random.default_rng(5), (3, 7), "rician", np.full(3, K))
    assert np.array_equal(scalar, per_user)


def test_a_per_user_k_advances_the_generator_as_one_k():
    a, b = np.random.default_rng(2), np.random.default_rng(2)
    link.draw_fading(a, (4, 5), "rician", np.array([K, 0.0, K, 0.0]))
    link.draw_fading(b, (4, 5), "rician", K)
    assert a.random() == b.random()


def test_bad_per_user_k_factors_are_refused_with_their_reason():
    with pytest.raises(ValueError) as err:
        link.draw_fading(np.random.default_rng(0), 2, "rician", np.array([1.0, -1.0]))
    assert str(err.value) == "k_factor must be linear K-factors >= 0 and finite for rician fading, one per user"
    with pytest.raises(ValueError) as err:
        link.draw_fading(np.random.default_rng(0), 3, "rician", np.array([1.0, 0.0]))
    assert str(err.value) == "k_factor has 2 K-factors for 3 users"
    with pytest.raises(ValueError) as err:
        link.transfer_time(np.ones(3), 1e6, np.ones(3), np.random.default_rng(0), 0.01, "rician", np.zeros(2))
    assert str(err.value) == "k_factor has 2 K-factors for 3 users"


def test_block_moments_with_per_user_k_are_each_class_own():
    snr = np.array([10.0, 10.0, 3.0])
    k = np.array([K, 0.0, K])
    mean, var, empty = link.block_bits_moments(1e6, snr, 0.01, "rician", k)
    for user in range(3):
        alone = link.block_bits_moments(1e6, snr[user : user + 1], 0.01, "rician", float(k[user]))
        # The same sums, up to the order BLAS adds them in (a matrix product of another row count).
        assert [mean[user], var[user], empty[user]] == pytest.approx([alone[0][0], alone[1][0], alone[2][0]], rel=1e-12)
    # K = 0 is Rayleigh: the moments of the same SNR under rayleigh fading, to the grid's precision.
    rayleigh = link.block_bits_moments(1e6, snr[1:2], 0.01, "rayleigh")
    assert mean[1] == pytest.approx(rayleigh[0][0], rel=1e-6)


def test_k_factor_per_user_is_the_profiles_for_los_and_zero_for_nlos():
    channel = PhysicalChannel(fading="rician", k_factor_db=K_DB)
    assert phy.k_factor(channel) == pytest.approx(K)
    assert phy.k_factor(channel, np.array([True, False])).tolist() == [pytest.approx(K), 0.0]
    assert phy.k_factor(PhysicalChannel(fading="rayleigh"), np.array([True])) is None


def _uma(**extra) -> SystemProfile:
    physical = {"path_loss_model": "UMa", "carrier_ghz": 3.5, "cell_radius_m": 500.0, "fading": "rician", "k_factor_db": K_DB, **extra}
    return SystemProfile(name="uma", rho=1.0, t_min=0.5, physical=PhysicalChannel.from_dict(physical))


def test_a_uma_drop_keeps_each_users_los_state_and_fades_los_users_rician_only():
    profile = _uma()
    model = NetworkModel(profile, 400, np.random.default_rng(3))
    los = model.los
    assert los is not None and los.dtype == bool and 0 < los.sum() < los.size
    # The LOS states are those of the drop: the same draws redone by hand.
    redo = np.random.default_rng(3)
    distances = phy.drop_users(profile.physical, 400, redo)
    assert np.array_equal(los, phy.pathloss.draw_large_scale("UMa", distances, 3.5, redo).los)
    rng = np.random.default_rng(4)
    gains = np.stack([phy.draw_fading(profile.physical, 400, rng, los) for _ in range(1500)])
    los_mean, los_var = _moments(gains[:, los])
    nlos_mean, nlos_var = _moments(gains[:, ~los])
    assert los_mean == pytest.approx(1.0, abs=1e-2) and los_var == pytest.approx(LOS_VAR, abs=1.5e-2)
    assert nlos_mean == pytest.approx(1.0, abs=1e-2) and nlos_var == pytest.approx(1.0, abs=4e-2)


def test_log_distance_has_no_los_state_and_fades_everyone_with_the_profiles_k():
    channel = PhysicalChannel(fading="rician", k_factor_db=K_DB)
    model = NetworkModel(SystemProfile(name="cell", rho=1.0, t_min=0.5, physical=channel), 50, np.random.default_rng(0))
    assert model.los is None
    ours = phy.draw_fading(channel, 50, np.random.default_rng(6), model.los)
    scalar = link.draw_fading(np.random.default_rng(6), 50, "rician", K)
    assert np.array_equal(ours, scalar)


def test_a_multicell_drop_keeps_the_los_state_of_each_users_serving_site():
    channel = _uma().physical
    topology = Topology.from_dict({"layout": "hexgrid", "rings": 1, "isd_m": 500.0, "sectors": 3})
    cell = drop_federation(channel, topology, 300, np.random.default_rng(8))
    assert cell.los is not None and cell.los.shape == (300,) and 0 < cell.los.sum() < 300
    log = drop_federation(PhysicalChannel(fading="rician"), topology, 30, np.random.default_rng(8))
    assert log.los is None


def test_the_ergodic_rate_of_an_nlos_user_is_the_rayleigh_one():
    channel = PhysicalChannel(fading="rician", k_factor_db=K_DB)
    loss = np.array([120.0, 120.0])
    mixed = phy.ergodic_downlink_rates(channel, loss, np.array([True, False]))
    rician = phy.ergodic_downlink_rates(channel, loss[:1])
    rayleigh = phy.ergodic_downlink_rates(PhysicalChannel(fading="rayleigh"), loss[:1])
    assert mixed[0] == rician[0]
    assert mixed[1] == pytest.approx(rayleigh[0], rel=2e-2)  # same law, a different fixed draw
    assert mixed[1] < mixed[0]  # Jensen: a log of a more spread gain averages lower


def test_a_held_fading_transfer_uses_each_users_own_k():
    k = np.array([K, 0.0])
    gains = link.draw_fading(np.random.default_rng(9), 2, "rician", k)
    sent = link.transfer_time(np.array([1e6, 1e6]), 1e6, np.array([10.0, 10.0]), np.random.default_rng(9), float("inf"), "rician", k)
    assert sent.time_s.tolist() == (1e6 / (1e6 * np.log2(1.0 + 10.0 * gains))).tolist()
    stream = link.multicast_transfer(1e6, 1e6, np.array([10.0, 10.0]), np.random.default_rng(9), float("inf"), "rician", k)
    assert stream.rate_bps == 1e6 * np.log2(1.0 + 10.0 * gains.min())


def test_block_fading_uploads_of_nlos_users_spread_as_rayleigh():
    # One 10 ms block each (1 kbit at >= 1 Mbit/s): the time is bits / rate of the first block, so the law of
    # 1 / time is the law of log2(1 + SNR·g); its spread is that of g, far wider for NLOS (Exp(1)) users.
    profile = _uma(coherence_s=0.01)
    n = 4000
    los = np.arange(n) % 2 == 0
    loss = np.full(n, 60.0)
    _, uploads, _, _ = phy.block_durations(profile.physical, loss, loss, (), np.zeros(0), np.full(n, 1e3), np.arange(n),
                                        np.random.default_rng(0), (), los)
    rate = 1e3 / uploads
    bw = profile.physical.uplink_bandwidth_hz * profile.physical.time_share("ul")
    snr = phy.link_snr(profile.physical, "ul", loss[:1])[0]
    g = (2.0 ** (rate / bw) - 1.0) / snr
    assert np.allclose(g[los].mean(), 1.0, atol=0.03) and np.allclose(g[los].var(), LOS_VAR, atol=0.03)
    assert np.allclose(g[~los].mean(), 1.0, atol=0.06) and np.allclose(g[~los].var(), 1.0, atol=0.15)
