"""Closed-form checks of the channel and link building blocks against the 3GPP tables and hand-computed rates.

wirelessfl/network/pathloss.py: 3GPP TR 38.901 Table 7.4.1-1 path loss, Table 7.4.2-1
LOS probability, shadow-fading standard deviations. wirelessfl/network/link.py:
Shannon and TR 36.942 truncated Shannon, block-fading transfers, multicast policies.

Every path loss below is worked by hand from the TR formulas at fc = 3.5 GHz
(log10(3.5) = 0.544068, so 20·log10(fc) = 10.881361 and 21.3·log10(fc) = 11.588649),
c = 3e8 m/s, default heights (UT 1.5 m; BS 25 m UMa, 10 m UMi, 35 m RMa; RMa h = 5 m,
W = 20 m). d3D = sqrt(d2D² + (h_BS - h_UT)²).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
import pytest
from scipy.special import exp1

from wirelessfl.network import link, pathloss

FC = 3.5
LOG2E = math.log2(math.e)


def ergodic_rayleigh_se(gamma: float) -> float:
    """E[log2(1 + γX)], X ~ Exp(1): log2(e)·e^{1/γ}·E1(1/γ)."""
    return LOG2E * math.exp(1.0 / gamma) * float(exp1(1.0 / gamma))


# --------------------------------------------------------------------------- TR 38.901 path loss


def test_uma_path_loss_five_distances():
    # d'_BP = 4·(25 - 1)·(1.5 - 1)·3.5e9 / 3e8 = 4·24·0.5·11.6667 = 560 m.
    assert pathloss.breakpoint_distance_m("UMa", FC) == pytest.approx(560.0, abs=1e-9)
    # log10(d'_BP² + (25 - 1.5)²) = log10(313600 + 552.25) = log10(314152.25) = 5.497140.
    cases = [
        # LOS, d2D = 100 <= 560: d3D = sqrt(10000 + 552.25) = 102.724145, log10 = 2.011673;
        # PL1 = 28 + 22·2.011673 + 10.881361 = 28 + 44.256796 + 10.881361 = 83.138157.
        (100.0, True, 83.138157),
        # LOS, d2D = 1000 > 560: d3D = 1000.276087, log10 = 3.000120;
        # PL2 = 28 + 40·3.000120 + 10.881361 - 9·5.497140 = 28 + 120.004797 + 10.881361 - 49.474262 = 109.411895.
        (1000.0, True, 109.411895),
        # NLOS, d2D = 50: d3D = 55.247172, log10 = 1.742310; LOS PL1 = 28 + 38.330822 + 10.881361 = 77.212182;
        # PL' = 13.54 + 39.08·1.742310 + 10.881361 - 0 = 13.54 + 68.089477 + 10.881361 = 92.510838; max = 92.510838.
        (50.0, False, 92.510838),
        # NLOS, d2D = 500: d3D = 500.551945, log10 = 2.699449; LOS PL1 = 98.269242;
        # PL' = 13.54 + 39.08·2.699449 + 10.881361 = 13.54 + 105.494473 + 10.881361 = 129.915834.
        (500.0, False, 129.915834),
        # NLOS, d2D = 3000: d3D = 3000.092040, log10 = 3.477135; LOS PL2 = 128.492482;
        # PL' = 13.54 + 39.08·3.477135 + 10.881361 = 13.54 + 135.886419 + 10.881361 = 160.307780.
        (3000.0, False, 160.307780),
    ]
    d = np.array([c[0] for c in cases])
    los = np.array([c[1] for c in cases])
    np.testing.assert_allclose(pathloss.path_loss_db("UMa", d, FC, los), [c[2] for c in cases], atol=2e-5)


def test_umi_path_loss_five_distances():
    # d'_BP = 4·(10 - 1)·(1.5 - 1)·3.5e9 / 3e8 = 4·9·0.5·11.6667 = 210 m;
    # log10(210² + 8.5²) = log10(44100 + 72.25) = log10(44172.25) = 4.645150.
    assert pathloss.breakpoint_distance_m("UMi", FC) == pytest.approx(210.0, abs=1e-9)
    cases = [
        # LOS, 100 <= 210: d3D = sqrt(10000 + 72.25) = 100.360600, log10 = 2.001563;
        # PL1 = 32.4 + 21·2.001563 + 10.881361 = 32.4 + 42.032828 + 10.881361 = 85.314189.
        (100.0, True, 85.314189),
        # LOS, 1000 > 210: d3D = 1000.036124, log10 = 3.000016;
        # PL2 = 32.4 + 40·3.000016 + 10.881361 - 9.5·4.645150 = 32.4 + 120.000627 + 10.881361 - 44.128920 = 119.153068.
        (1000.0, True, 119.153068),
        # NLOS, 50: d3D = 50.717354, log10 = 1.705157; LOS PL1 = 79.089649;
        # PL' = 35.3·1.705157 + 22.4 + 11.588649 - 0 = 60.192028 + 22.4 + 11.588649 = 94.180677.
        (50.0, False, 94.180677),
        # NLOS, 500: d3D = 500.072245, log10 = 2.699033; LOS PL2 = 107.113750;
        # PL' = 35.3·2.699033 + 22.4 + 11.588649 = 95.275856 + 33.988649 = 129.264505.
        (500.0, False, 129.264505),
        # NLOS, 3000: d3D = 3000.012042, log10 = 3.477123; LOS PL2 = 138.237360;
        # PL' = 35.3·3.477123 + 33.988649 = 122.742442 + 33.988649 = 156.731091.
        (3000.0, False, 156.731091),
    ]
    d = np.array([c[0] for c in cases])
    los = np.array([c[1] for c in cases])
    np.testing.assert_allclose(pathloss.path_loss_db("UMi", d, FC, los), [c[2] for c in cases], atol=2e-5)


def test_rma_path_loss_five_distances():
    # d_BP = 2π·35·1.5·3.5e9 / 3e8 = 2π·35·1.5·11.6667 = 3848.451001 m.
    assert pathloss.breakpoint_distance_m("RMa", FC) == pytest.approx(3848.451001, abs=1e-6)
    # h = 5: 0.03·5^1.72 = 0.477914 (< 10), 0.044·5^1.72 = 0.700940 (< 14.77), 0.002·log10(5) = 0.001398.
    # PL1(d) = 20·log10(40π·d·3.5/3) + 0.477914·log10(d) - 0.700940 + 0.001398·d.
    # NLOS': A = 161.04 - 7.1·log10(20) + 7.5·log10(5) - (24.37 - 3.7·(5/35)²)·log10(35) = 119.532617,
    #        B = 43.42 - 3.1·log10(35) = 38.633389,
    #        C = 20·log10(3.5) - (3.2·log10(11.75·1.5)² - 4.97) = 10.881361 - (-0.000919) = 10.882280,
    #        PL' = A + B·(log10(d3D) - 3) + C.
    cases = [
        # LOS, 100 <= d_BP: d3D = sqrt(10000 + 33.5²) = 105.462078;
        # PL1 = 20·log10(40π·105.462078·3.5/3) + 0.477914·2.023096 - 0.700940 + 0.001398·105.462078 = 84.198415.
        (100.0, True, 84.198415),
        # LOS, 1000 <= d_BP: d3D = 1000.560968; PL1 = 105.459646.
        (1000.0, True, 105.459646),
        # LOS, 6000 > d_BP: d3D = 6000.093520; PL1(d_BP) = 121.421274;
        # PL2 = 121.421274 + 40·log10(6000.093520 / 3848.451001) = 121.421274 + 7.714882 = 129.136156.
        (6000.0, True, 129.136156),
        # NLOS, 500: d3D = 501.120993, log10 = 2.699943; PL' = 119.532617 + 38.633389·(-0.300057) + 10.882280
        #            = 119.532617 - 11.592235 + 10.882280 = 118.822662 (> LOS 98.611922).
        (500.0, False, 118.822662),
        # NLOS, 3000: d3D = 3000.187036, log10 = 3.477148; PL' = 119.532617 + 38.633389·0.477148 + 10.882280
        #             = 119.532617 + 18.433856 + 10.882280 = 148.848754 (> LOS 118.021018).
        (3000.0, False, 148.848754),
    ]
    d = np.array([c[0] for c in cases])
    los = np.array([c[1] for c in cases])
    np.testing.assert_allclose(pathloss.path_loss_db("RMa", d, FC, los), [c[2] for c in cases], atol=2e-5)


def test_nlos_is_never_below_los():
    d = np.geomspace(10.0, 5000.0, 200)
    for scenario in pathloss.SCENARIOS:
        los = pathloss.path_loss_db(scenario, d, FC, True)
        nlos = pathloss.path_loss_db(scenario, d, FC, False)
        assert np.all(nlos >= los)
        assert np.all(np.diff(los) > 0) and np.all(np.diff(nlos) > 0)


def test_los_probability_table_7_4_2_1():
    d = np.array([5.0, 18.0, 50.0, 200.0])
    # UMi: 18/d + exp(-d/36)·(1 - 18/d): d = 50 -> 0.36 + 0.249352·0.64 = 0.519585;
    #      d = 200 -> 0.09 + 0.003866·0.91 = 0.093518.
    np.testing.assert_allclose(pathloss.los_probability("UMi", d), [1.0, 1.0, 0.519585, 0.093518], atol=1e-6)
    # UMa (h_UT = 1.5 <= 13, C' = 0): d = 50 -> 0.36 + exp(-50/63)·0.64 = 0.36 + 0.452200·0.64 = 0.649402;
    #      d = 200 -> 0.09 + 0.041799·0.91 = 0.128048.
    np.testing.assert_allclose(pathloss.los_probability("UMa", d), [1.0, 1.0, 0.649402, 0.128048], atol=1e-6)
    # RMa: 1 for d <= 10, else exp(-(d - 10)/1000): 18 -> 0.992032; 50 -> 0.960789; 200 -> 0.826959.
    np.testing.assert_allclose(pathloss.los_probability("RMa", d), [1.0, 0.992032, 0.960789, 0.826959], atol=1e-6)
    # UMa at h_UT = 18 m: C' = ((18 - 13)/10)^1.5 = 0.353553; d = 100:
    # [0.18 + exp(-100/63)·0.82]·[1 + 0.353553·1.25·1·exp(-100/150)] = 0.347948·1.225936 = 0.426558.
    assert pathloss.los_probability("UMa", 100.0, h_ut_m=18.0) == pytest.approx(0.426558, abs=1e-6)


def test_shadow_fading_std_and_large_scale_draw():
    d = np.array([100.0, 5000.0, 100.0])
    los = np.array([True, True, False])
    # RMa: 4 dB before d_BP (3848 m), 6 dB after, 8 dB NLOS; UMa 4/6; UMi 4/7.82.
    np.testing.assert_array_equal(pathloss.shadow_fading_std_db("RMa", d, FC, los), [4.0, 6.0, 8.0])
    np.testing.assert_array_equal(pathloss.shadow_fading_std_db("UMa", d, FC, los), [4.0, 4.0, 6.0])
    np.testing.assert_array_equal(pathloss.shadow_fading_std_db("UMi", d, FC, los), [4.0, 4.0, 7.82])
    # Forced NLOS users: the shadowing has the TR's standard deviation; the LOS draw follows Table 7.4.2-1.
    rng = np.random.default_rng(3)
    draw = pathloss.draw_large_scale("UMa", np.full(20_000, 300.0), FC, rng, los=False)
    assert np.std(draw.shadowing_db) == pytest.approx(6.0, rel=0.03)
    np.testing.assert_allclose(draw.loss_db - draw.shadowing_db, pathloss.path_loss_db("UMa", 300.0, FC, False))
    draw = pathloss.draw_large_scale("UMi", np.full(20_000, 50.0), FC, np.random.default_rng(4))
    assert np.mean(draw.los) == pytest.approx(0.519585, abs=0.015)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: pathloss.path_loss_db("RMa", 100.0, 35.0, True), "fc_ghz must be in [0.5, 30]"),
        (lambda: pathloss.path_loss_db("UMa", 100.0, 0.3, True), "fc_ghz must be in [0.5, 100]"),
        (lambda: pathloss.path_loss_db("UMa", [100.0, 5.0], FC, True), "d2d_m must be in [10, 5000] m"),
        (lambda: pathloss.path_loss_db("RMa", 8000.0, FC, False), "d2d_m must be in [10, 5000] m"),
        (lambda: pathloss.path_loss_db("UMi", 100.0, FC, True, h_ut_m=30.0), "h_ut_m must be in [1.5, 22.5]"),
        (lambda: pathloss.path_loss_db("UMa", 100.0, FC, True, h_bs_m=30.0), "h_bs_m must be in [25, 25]"),
        (lambda: pathloss.path_loss_db("RMa", 100.0, FC, True, w_m=60.0), "w_m must be in [5, 50]"),
        (lambda: pathloss.path_loss_db("InH", 100.0, FC, True), "scenario must be one of 'UMa', 'UMi', 'RMa'"),
        (lambda: pathloss.los_probability("UMa", 0.0), "d2d_m must be > 0"),
        (lambda: link.transfer_time(1e6, 1e6, 1.0, np.random.default_rng(0), 0.0), "coherence_s must be > 0"),
        (lambda: link.coverage_rate(np.ones(3), 0.0), "q must be in (0, 1]"),
        (lambda: link.transfer_time(1e6, 1e6, 1.0, np.random.default_rng(0), 1e-3, fading="rician"), "k_factor must be"),
        (lambda: link.transfer_time(1e6, 1e6, 1.0, np.random.default_rng(0), 1e-3, link="nr"), "link must be one of"),
    ],
)
def test_bad_input_is_one_line_naming_the_parameter(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)


# --------------------------------------------------------------------------- link abstractions


def test_truncated_shannon_five_sinrs():
    sinr_db = np.array([-15.0, -10.0, 0.0, 10.0, 30.0])
    snr = 10.0 ** (sinr_db / 10.0)
    expected_dl = [
        0.0,  # -15 dB < SINR_MIN = -10 dB
        0.6 * math.log2(1.1),  # at SINR_MIN: 0.6·0.137504 = 0.082502
        0.6 * math.log2(2.0),  # 0 dB: 0.6
        0.6 * math.log2(11.0),  # 10 dB: 0.6·3.459432 = 2.075659
        4.4,  # 30 dB: 0.6·log2(1001) = 5.98 -> capped at Thr_MAX 4.4
    ]
    np.testing.assert_allclose(link.truncated_shannon(snr), expected_dl, rtol=1e-12)
    np.testing.assert_allclose(link.spectral_efficiency(snr, "truncated_shannon_dl"), expected_dl, rtol=1e-12)
    # Uplink, TR 36.942 Table A.2: α = 0.4, SINR_MIN = -10 dB, Thr_MAX = 2.0.
    expected_ul = [0.0, 0.4 * math.log2(1.1), 0.4, 0.4 * math.log2(11.0), 2.0]
    np.testing.assert_allclose(link.TR36942_UPLINK(snr), expected_ul, rtol=1e-12)
    np.testing.assert_allclose(link.shannon(snr), np.log2(1.0 + snr), rtol=1e-15)


def test_ergodic_rayleigh_rate_over_many_blocks():
    # 200 users at γ = 10 (10 dB), 1 MHz, 1 ms blocks; each transfer spans ~2,000 blocks,
    # so bits / time -> E[B·log2(1 + γX)] = B·log2(e)·e^{0.1}·E1(0.1) = 2.9061 Mbit/s.
    gamma, bandwidth, tc = 10.0, 1e6, 1e-3
    ergodic = bandwidth * ergodic_rayleigh_se(gamma)
    assert ergodic == pytest.approx(2.906e6, rel=1e-3)
    bits = 2_000 * ergodic * tc
    result = link.transfer_time(np.full(200, bits), bandwidth, gamma, np.random.default_rng(11), tc, exact_blocks=10**6)
    assert not result.outage.any()
    assert result.blocks.min() > 1_800
    rate = 200 * bits / result.time_s.sum()
    assert rate == pytest.approx(ergodic, rel=0.01)


def test_the_rest_of_a_long_transfer_estimated_from_its_first_blocks_keeps_the_ergodic_mean():
    """Past ``exact_blocks`` a transfer's rest is one renewal-theory draw from the fading law's bits per block:
    over 400 transfers of ~2,000 blocks, 256 of them drawn, the mean rate is the ergodic one within 1%, and the
    estimate spreads the times about as much as drawing every block does."""
    gamma, bandwidth, tc = 10.0, 1e6, 1e-3
    ergodic = bandwidth * ergodic_rayleigh_se(gamma)
    bits = 2_000 * ergodic * tc
    estimated = link.transfer_time(np.full(400, bits), bandwidth, gamma, np.random.default_rng(4), tc, exact_blocks=256)
    drawn = link.transfer_time(np.full(400, bits), bandwidth, gamma, np.random.default_rng(4), tc, exact_blocks=10**6)
    assert 400 * bits / estimated.time_s.sum() == pytest.approx(ergodic, rel=0.01)
    assert estimated.blocks.min() > 1_800 and not estimated.outage.any()
    assert 0.5 < estimated.time_s.std() / drawn.time_s.std() < 12.0


def test_a_transfer_that_delivers_nothing_in_its_drawn_blocks_is_in_outage():
    """Truncated Shannon delivers 0 below -10 dB: at a mean SNR of -40 dB a block carries bits with
    probability e^-1000, so after 256 empty blocks the transfer is an outage without 10,000 more draws."""
    result = link.transfer_time(1e6, 1e6, 1e-4, np.random.default_rng(0), 1e-3, link="truncated_shannon", exact_blocks=256)
    assert bool(result.outage) and math.isinf(float(result.time_s))


def test_multicast_worst_user_is_ergodic_rate_at_gamma_over_n():
    # min of n Exp(mean γ) is Exp(mean γ/n): the weakest receiver's ergodic rate is the
    # formula at γ/n (argument n/γ of E1). n = 8, γ = 10 -> γ/n = 1.25, 0.9971 bit/s/Hz.
    gamma, n, bandwidth, tc = 10.0, 8, 1e6, 1e-3
    expected = bandwidth * ergodic_rayleigh_se(gamma / n)
    bits = 100_000 * expected * tc
    result = link.multicast_transfer(
        bits, bandwidth, np.full(n, gamma), np.random.default_rng(5), tc, max_blocks=10**6, exact_blocks=10**6
    )
    assert not result.outage
    assert result.blocks > 90_000
    assert result.rate_bps == pytest.approx(expected, rel=0.01)
    np.testing.assert_array_equal(result.repair_bits, 0.0)
    # And far below the unicast ergodic rate at γ: the multicast penalty of fading.
    assert result.rate_bps < 0.4 * bandwidth * ergodic_rayleigh_se(gamma)


def test_outage_probability_matches_exponential_cdf():
    # Truncated Shannon: a block is in outage when γ·X < θ = 10^{-1}; P = 1 - e^{-θ/γ}.
    theta = 0.1
    for gamma in (1.0, 0.5):
        p = 1.0 - math.exp(-theta / gamma)  # 0.095163 at γ = 1, 0.181269 at γ = 0.5
        # One draw per transfer (coherence inf): the transfer is in outage.
        one = link.transfer_time(1e5, 1e6, np.full(200_000, gamma), np.random.default_rng(7), math.inf, link="truncated_shannon")
        assert one.outage.mean() == pytest.approx(p, abs=0.003)
        assert np.all(np.isinf(one.time_s[one.outage]))
        # Many blocks: the fraction of zero-rate blocks; the transfers still finish.
        many = link.transfer_time(np.full(100, 2e5), 1e6, gamma, np.random.default_rng(8), 1e-3, link="truncated_shannon")
        assert not many.outage.any()
        assert many.outage_blocks.sum() / many.blocks.sum() == pytest.approx(p, abs=0.01)


def test_short_transfer_sees_the_block_rate():
    # One user, 1 s blocks, 1 kbit: finished inside the first block, at that block's rate.
    gamma, bandwidth, bits = 10.0, 1e6, 1e3
    result = link.transfer_time(bits, bandwidth, gamma, np.random.default_rng(21), 1.0)
    g = np.random.default_rng(21).standard_exponential(1)[0]
    assert int(result.blocks) == 1
    assert float(result.time_s) == pytest.approx(bits / (bandwidth * math.log2(1.0 + gamma * g)), rel=1e-12)
    # coherence inf is today's model: one Exp(1) per user (drawn in user order), rate = B·log2(1 + γg).
    gammas = np.array([0.5, 3.0, 40.0])
    today = link.transfer_time(1e6, bandwidth, gammas, np.random.default_rng(2), math.inf)
    g = np.random.default_rng(2).standard_exponential(3)
    np.testing.assert_allclose(today.time_s, 1e6 / (bandwidth * np.log2(1.0 + gammas * g)), rtol=1e-12)


def test_transfer_without_fading_and_block_accounting():
    # No fading: time = bits / (B·log2(1 + γ)); blocks = ceil(time / T_c); more than max_blocks -> outage.
    result = link.transfer_time([1e6, 0.0, 1e6], 1e6, [3.0, 3.0, 0.0], np.random.default_rng(0), 0.1, fading="none")
    assert result.time_s[0] == pytest.approx(0.5)  # log2(4) = 2 bit/s/Hz -> 2 Mbit/s
    assert list(result.blocks) == [5, 0, 10_000] and list(result.outage) == [False, False, True]
    assert result.time_s[1] == 0.0 and math.isinf(result.time_s[2])
    capped = link.transfer_time(1e6, 1e6, 3.0, np.random.default_rng(0), 0.1, fading="none", max_blocks=4)
    assert bool(capped.outage) and math.isinf(capped.time_s)
    # With fading, the time is bounded by its blocks: (blocks - 1)·T_c < time <= blocks·T_c.
    faded = link.transfer_time(np.full(500, 3e5), 1e6, 5.0, np.random.default_rng(1), 1e-2)
    assert np.all(faded.time_s > (faded.blocks - 1) * 1e-2) and np.all(faded.time_s <= faded.blocks * 1e-2 + 1e-15)


def test_rician_gains_have_unit_mean_and_the_right_variance():
    # |h|² with K: mean 1, variance (1 + 2K)/(1 + K)²: K = 0 -> 1 (Rayleigh), K = 9 -> 19/100.
    for k, variance in ((0.0, 1.0), (9.0, 0.19)):
        g = link.draw_fading(np.random.default_rng(9), 100_000, "rician", k)
        assert g.mean() == pytest.approx(1.0, abs=0.01)
        assert g.var() == pytest.approx(variance, rel=0.03)


def test_coverage_policy_rate_and_repair_bits():
    rates = np.array([[5.0, 1.0], [1.0, 2.0], [3.0, 3.0], [4.0, 4.0]])  # 4 receivers x 2 blocks
    np.testing.assert_array_equal(link.worst_user_rate(rates), [1.0, 1.0])
    np.testing.assert_array_equal(link.coverage_rate(rates, 1.0), [1.0, 1.0])
    np.testing.assert_array_equal(link.coverage_rate(rates, 0.75), [3.0, 2.0])  # best 3 of 4 decode
    np.testing.assert_array_equal(link.coverage_rate(rates, 0.5), [4.0, 3.0])
    np.testing.assert_array_equal(link.coverage_rate(rates, 0.01), [5.0, 4.0])
    # No fading: receiver SNRs 1, 3, 7, 15 -> 1, 2, 3, 4 bit/s/Hz. Coverage q = 0.5 sends at the
    # rate of the 2nd best (3 Mbit/s at 1 MHz): time = 3 Mbit / 3 Mbit/s = 1 s; the two below
    # miss every bit and are repaired by unicast.
    result = link.multicast_transfer(
        3e6, 1e6, [1.0, 3.0, 7.0, 15.0], np.random.default_rng(0), 0.1, fading="none", policy="coverage", q=0.5
    )
    assert result.time_s == pytest.approx(1.0) and result.blocks == 10 and result.rate_bps == pytest.approx(3e6)
    np.testing.assert_allclose(result.repair_bits, [3e6, 3e6, 0.0, 0.0])
    worst = link.multicast_transfer(3e6, 1e6, [1.0, 3.0, 7.0, 15.0], np.random.default_rng(0), 0.1, fading="none")
    assert worst.time_s == pytest.approx(3.0)
    np.testing.assert_array_equal(worst.repair_bits, 0.0)


def test_coverage_under_fading_repairs_what_was_missed():
    # q = 0.75 over 8 Rayleigh receivers: the stream's rate is the 6th best receiver's, so in
    # every block exactly the 2 below it (no ties with continuous fading) miss its bits:
    # the repair traffic is exactly 2/8 of 8 receivers x bits.
    bits = 2e6
    result = link.multicast_transfer(
        bits, 1e6, np.full(8, 10.0), np.random.default_rng(13), 1e-3, policy="coverage", q=0.75
    )
    assert not result.outage
    assert np.all(result.repair_bits >= 0) and np.all(result.repair_bits <= bits)
    assert result.repair_bits.sum() / (8 * bits) == pytest.approx(0.25, rel=1e-9)
    assert np.all(result.repair_bits > 0)  # every receiver is below the stream at times
    worst = link.multicast_transfer(bits, 1e6, np.full(8, 10.0), np.random.default_rng(13), 1e-3)
    assert result.time_s < worst.time_s


def test_coherence_time_from_speed():
    # 3 km/h at 3.5 GHz: f_D = 0.8333·3.5e9/3e8 = 9.7222 Hz, T_c = 0.423/9.7222 = 43.5 ms.
    assert link.coherence_time_s(3 / 3.6, 3.5) == pytest.approx(0.423 / 9.722222, rel=1e-6)
    assert math.isinf(link.coherence_time_s(0.0, 3.5))


def test_bits_per_block_moments_match_the_fading_laws_closed_forms():
    """The mean over Rayleigh fading is the ergodic rate's closed form; the share of empty blocks under
    truncated Shannon is P(γX < 0.1) = 1 - e^(-0.1/γ); the variance agrees with 200,000 drawn blocks."""
    gamma, bandwidth, tc = 10.0, 1e6, 1e-3
    mean, var, empty = link.block_bits_moments(bandwidth, gamma, tc)
    assert float(mean[0]) == pytest.approx(bandwidth * tc * ergodic_rayleigh_se(gamma), rel=1e-5)
    assert float(empty[0]) == 0.0
    drawn = bandwidth * tc * np.log2(1.0 + gamma * np.random.default_rng(3).standard_exponential(200_000))
    assert float(var[0]) == pytest.approx(drawn.var(), rel=0.02)
    weak = 10 ** (-9.4 / 10)
    mean, var, empty = link.block_bits_moments(bandwidth, weak, tc, link="truncated_shannon")
    assert float(empty[0]) == pytest.approx(1.0 - math.exp(-0.1 / weak), abs=1e-4)
    gains = np.random.default_rng(4).standard_exponential(400_000)
    bits = bandwidth * tc * link.spectral_efficiency(weak * gains, "truncated_shannon")
    assert float(mean[0]) == pytest.approx(bits.mean(), rel=0.01)
    rician, _, _ = link.block_bits_moments(bandwidth, gamma, tc, "rician", 10 ** 0.9)
    drawn = bandwidth * tc * np.log2(1.0 + gamma * link.draw_fading(np.random.default_rng(5), 400_000, "rician", 10 ** 0.9))
    assert float(rician[0]) == pytest.approx(drawn.mean(), rel=0.002)


def test_a_users_transfer_does_not_depend_on_how_many_users_share_the_call():
    """A weak user (mean SNR -9.4 dB under truncated Shannon: 58% of its 1 ms blocks carry nothing) sending
    100 kbit needs ~1,400 blocks. Alone (2,000 calls of one user) and among 10,000 such users in one call it
    draws the same law: no outage either way, mean times within 2%, and a two-sample KS test does not tell
    them apart. (With a draw budget shared by the call, 256 blocks each among 10,000 against a million alone,
    the crowd's times were extrapolated from a few hundred blocks and some became outages.)"""
    snr, bits, bandwidth, tc = 10 ** (-9.4 / 10), 1e5, 1e6, 1e-3
    alone = np.array([
        float(link.transfer_time(bits, bandwidth, snr, np.random.default_rng(seed), tc, link="truncated_shannon",
                                 max_blocks=10**6).time_s)
        for seed in range(2_000)
    ])
    crowd = link.transfer_time(np.full(10_000, bits), bandwidth, np.full(10_000, snr), np.random.default_rng(1), tc,
                               link="truncated_shannon", max_blocks=10**6).time_s
    assert np.isfinite(alone).all() and np.isfinite(crowd).all()
    assert alone.mean() > 256 * tc
    assert crowd.mean() == pytest.approx(alone.mean(), rel=0.02)
    assert stats.ks_2samp(alone, crowd).pvalue > 1e-3


def test_subbands_turn_a_worst_user_multicast_from_outage_towards_the_ergodic_rate():
    """A multicast to 100 Rayleigh receivers at 10 dB sent at the weakest receiver's rate: with flat blocks some
    receiver is in a deep fade in almost every block (the stream runs at ~4% of one receiver's ergodic rate, the
    formula at γ/100); with independent subbands each receiver's block rate averages over them and the weakest
    receiver's rate rises towards the ergodic rate at its mean SNR (above 80% of it at 64 subbands)."""
    gamma, n, bandwidth, tc = 10.0, 100, 1e6, 1e-3
    ergodic = bandwidth * ergodic_rayleigh_se(gamma)
    bits = 400 * ergodic * tc
    rates = []
    for subbands in (1, 4, 16, 64):
        sent = link.multicast_transfer(bits, bandwidth, np.full(n, gamma), np.random.default_rng(9), tc,
                                       max_blocks=10**6, exact_blocks=10**6, subbands=subbands)
        assert not sent.outage
        rates.append(sent.rate_bps)
    assert rates[0] == pytest.approx(bandwidth * ergodic_rayleigh_se(gamma / n), rel=0.05)
    assert rates == sorted(rates) and rates[0] < 0.1 * ergodic and rates[-1] > 0.8 * ergodic
    mean, var, empty = link.block_bits_moments(bandwidth, gamma, tc, subbands=8)
    drawn = bandwidth * tc * np.log2(1 + gamma * np.random.default_rng(2).standard_exponential((100_000, 8))).mean(axis=1)
    assert float(mean[0]) == pytest.approx(drawn.mean(), rel=0.01) and float(var[0]) == pytest.approx(drawn.var(), rel=0.05)
    with pytest.raises(ValueError, match=r"^subbands must be an integer >= 1, got 0$"):
        link.transfer_time(1e3, 1e6, 1.0, np.random.default_rng(0), 1e-3, subbands=0)
