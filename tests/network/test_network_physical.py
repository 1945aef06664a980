import math

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile
from wirelessfl.network import physical as phy
from wirelessfl.seam import CommPlan, Stream

STILL = PhysicalChannel(fading="none")


def physical_profile(channel: PhysicalChannel = STILL, **overrides) -> SystemProfile:
    return SystemProfile(**{"name": "cell", "rho": 1.0, "t_min": 0.5, "physical": channel, **overrides})


def test_one_user_snr_and_rate_by_hand():
    # 23 dBm, 90 dB loss, noise -174 dBm/Hz over 1 MHz = -114 dBm -> SNR = 47 dB.
    rate = phy.shannon_rate(23.0, np.array([90.0]), np.array([1.0]), 1e6, -174.0)
    assert rate[0] == pytest.approx(1e6 * math.log2(1 + 10**4.7), rel=1e-12)
    loss = phy.path_loss_db(PhysicalChannel(reference_loss_db=30.0, path_loss_exponent=3.0), np.array([100.0]))
    assert loss[0] == pytest.approx(30.0 + 30.0 * 2, abs=1e-12)


def test_rates_fall_with_distance():
    distances = np.array([10.0, 50.0, 100.0, 200.0])
    loss = phy.path_loss_db(STILL, distances)
    for rates in (phy.downlink_rates(STILL, loss, np.ones(4)), phy.uplink_rates(STILL, loss, np.ones(4))):
        assert np.all(np.diff(rates) < 0)


def test_users_are_dropped_inside_the_annulus():
    distances = phy.drop_users(STILL, 2000, np.random.default_rng(0))
    assert distances.min() >= STILL.min_distance_m and distances.max() <= STILL.cell_radius_m
    # Uniform over the area: P(d <= r) = (r^2 - d_min^2) / (R^2 - d_min^2); at the median radius, 1/2.
    median_radius = math.sqrt((STILL.min_distance_m**2 + STILL.cell_radius_m**2) / 2)
    assert abs(np.mean(distances <= median_radius) - 0.5) < 0.04


def test_one_user_round_in_seconds_by_hand():
    model = NetworkModel(physical_profile(), 1, np.random.default_rng(0))
    loss = model.path_loss_db[0]
    noise_w = 10 ** ((-174.0 - 30) / 10) * 10e6
    dl_rate = 10e6 * math.log2(1 + 10 ** ((43.0 - 30 - loss) / 10) / noise_w)
    ul_rate = 10e6 * math.log2(1 + 10 ** ((23.0 - 30 - loss) / 10) / noise_w)
    bits = 100_000 * 32
    plan = CommPlan.broadcast([0], model_params=100_000)
    timing = model.time_round(plan, np.random.default_rng(0))
    assert timing.time_unit == "s"
    assert timing.t_received[0] == pytest.approx(bits / dl_rate, rel=1e-12)
    assert timing.t_end == pytest.approx(bits / dl_rate + 0.5 + bits / ul_rate, rel=1e-12)


def test_multicast_stream_goes_at_its_weakest_receivers_rate():
    model = NetworkModel(physical_profile(PhysicalChannel()), 6, np.random.default_rng(0))
    group = [1, 2, 4, 5]

    def plan(streams):
        return CommPlan(streams=streams, uplink={}, work=dict.fromkeys(group, 1.0), model_params=50_000)

    multicast = model.draw_round(plan((Stream(1.0, group),)), np.random.default_rng(3)).stream_durations[0]
    unicasts = [model.draw_round(plan((Stream(1.0, [c]),)), np.random.default_rng(3)).stream_durations[0] for c in group]
    assert multicast == max(unicasts)
    assert multicast > min(unicasts)


def test_fading_is_redrawn_each_round_and_reproducible():
    model = NetworkModel(physical_profile(PhysicalChannel()), 4, np.random.default_rng(0))
    plan = CommPlan.broadcast(range(4), model_params=10_000)
    rng = np.random.default_rng(1)
    first, second = model.time_round(plan, rng), model.time_round(plan, rng)
    assert first.t_received[0] != second.t_received[0]
    again = NetworkModel(physical_profile(PhysicalChannel()), 4, np.random.default_rng(0))
    assert again.time_round(plan, np.random.default_rng(1)) == first


def test_tdd_uses_one_reciprocal_gain_per_user_fdd_two():
    """With equal bandwidths the DL/UL SNR ratio is P_bs/P_ue = 20 dB exactly when the gain is shared."""

    def snr_ratio(duplex: str) -> float:
        model = NetworkModel(physical_profile(PhysicalChannel(), duplex=duplex), 1, np.random.default_rng(0))
        inputs = model.draw_round(CommPlan.broadcast([0], model_params=1000), np.random.default_rng(2))
        bits, bandwidth = 1000 * 32, 10e6
        dl_snr = 2 ** (bits / inputs.stream_durations[0] / bandwidth) - 1
        ul_snr = 2 ** (bits / inputs.upload[0] / bandwidth) - 1
        return dl_snr / ul_snr

    assert snr_ratio("tdd") == pytest.approx(100.0, rel=1e-9)
    assert snr_ratio("fdd") != pytest.approx(100.0, rel=1e-3)


def test_physical_mode_needs_the_model_size():
    model = NetworkModel(physical_profile(), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^plan.model_params must be > 0 with a physical channel .* got 0$"):
        model.time_round(CommPlan.broadcast([0, 1]), np.random.default_rng(0))


def test_nominal_downlink_rates_by_hand():
    # 43 dBm, loss 38.5 + 35 log10(d), noise -174 dBm/Hz over 10 MHz = -104 dBm: SNR(dB) = 108.5 - 35 log10(d).
    net = NetworkModel(physical_profile(PhysicalChannel()), 3, np.random.default_rng(0))
    snr_db = 43.0 - net.path_loss_db + 104.0
    np.testing.assert_allclose(net.nominal_downlink_rates(), 10e6 * np.log2(1 + 10 ** (snr_db / 10)), rtol=1e-12)
    np.testing.assert_allclose(snr_db, 108.5 - 35.0 * np.log10(net.distances_m), rtol=1e-12)
    assert NetworkModel(SystemProfile(name="plain", rho=1.0), 3, np.random.default_rng(0)).nominal_downlink_rates() is None


def test_link_budget_terms_move_each_directions_mean_snr_by_their_decibels():
    """Antenna gains add to both directions, other losses subtract from both, and each receiver's noise figure
    (the phone's on the downlink, the gNB's on the uplink) subtracts from its own direction only."""
    loss = np.array([100.0, 120.0])
    plain = PhysicalChannel()
    budget = PhysicalChannel(bs_antenna_gain_dbi=8.0, ue_antenna_gain_dbi=-1.0, noise_figure_ue_db=9.0,
                             noise_figure_bs_db=5.0, other_losses_db=3.0)
    for direction, figure in (("dl", 9.0), ("ul", 5.0)):
        shift = 10 * np.log10(phy.link_snr(budget, direction, loss) / phy.link_snr(plain, direction, loss))
        np.testing.assert_allclose(shift, 8.0 - 1.0 - 3.0 - figure, atol=1e-12)
    assert plain.radiated_dbm("dl") == plain.bs_power_dbm and plain.noise_dbm_hz("ul") == plain.noise_density_dbm_hz


def test_a_named_link_budget_fills_the_fields_and_the_scenario_overrides_them():
    channel = PhysicalChannel.from_dict({"link_budget": "tr38901-calibration", "ue_power_dbm": 26.0})
    assert (channel.bs_power_dbm, channel.ue_power_dbm, channel.bs_antenna_gain_dbi) == (44.0, 26.0, 8.0)
    assert (channel.noise_figure_bs_db, channel.noise_figure_ue_db) == (5.0, 9.0)
    assert "link_budget" not in channel.to_dict() and PhysicalChannel.from_dict(channel.to_dict()) == channel
    with pytest.raises(ValueError, match=r"^physical.link_budget must be one of 'tr38901-calibration', got 'lte'$"):
        PhysicalChannel.from_dict({"link_budget": "lte"})
    with pytest.raises(ValueError, match=r"^physical.noise_figure_ue_db must be in \[0, 20\] \(9 dB is TR 38.901's calibration UT receiver\), got 50$"):
        PhysicalChannel(noise_figure_ue_db=50)


def test_a_receiver_in_outage_makes_its_stream_last_forever_without_a_numpy_warning():
    """A held-fading round whose weakest receiver gets rate 0 (truncated Shannon below -10 dB): the stream and
    that user's upload last inf, a user with nothing to upload takes 0, and numpy says nothing."""
    import warnings

    channel = PhysicalChannel(fading="none", link="truncated_shannon", cell_radius_m=100_000, min_distance_m=10_000, bs_power_dbm=-30, ue_power_dbm=-40)
    model = NetworkModel(physical_profile(channel), 2, np.random.default_rng(0))
    plan = CommPlan(streams=(Stream(1.0, frozenset({0, 1})),), uplink={0: 1.0, 1: 0.0}, work={0: 1.0, 1: 1.0}, model_params=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inputs = model.draw_round(plan, np.random.default_rng(1))
    assert math.isinf(inputs.stream_durations[0]) and math.isinf(inputs.upload[0]) and inputs.upload[1] == 0.0


def test_a_tdd_pattern_gives_each_direction_its_share_of_the_carriers_time():
    """DDDSU with a 10:2:2 special slot: the downlink has 3·14 + 10 of 70 symbols, the uplink 14 + 2; a held-fading
    round's rates are the FDD rates times those shares, so its transfers take 70/52 and 70/16 as long."""
    tdd = PhysicalChannel(fading="none", tdd_pattern="DDDSU")
    assert tdd.time_share("dl") == pytest.approx(52 / 70) and tdd.time_share("ul") == pytest.approx(16 / 70)
    assert PhysicalChannel().time_share("ul") == 1.0
    fdd = PhysicalChannel(fading="none")
    plan = CommPlan(streams=(Stream(1.0, frozenset({0, 1})),), uplink={0: 1.0, 1: 1.0}, work={0: 1.0, 1: 1.0}, model_params=10_000)
    a = NetworkModel(physical_profile(fdd), 2, np.random.default_rng(0)).draw_round(plan, np.random.default_rng(1))
    b = NetworkModel(physical_profile(tdd), 2, np.random.default_rng(0)).draw_round(plan, np.random.default_rng(1))
    np.testing.assert_allclose(b.stream_durations, a.stream_durations * 70 / 52)
    np.testing.assert_allclose(b.upload, a.upload * 70 / 16)
    assert "TDD DDDSU (downlink 74%, uplink 23% of the time)" in tdd.summary()
    assert PhysicalChannel.from_dict(tdd.to_dict()) == tdd
    with pytest.raises(ValueError, match=r"^physical.tdd_pattern 'DDDD' has no uplink slot \(U\) or uplink symbol in its special slots \(S\)$"):
        PhysicalChannel(tdd_pattern="DDDD")
    with pytest.raises(ValueError, match=r"^physical.tdd_pattern must be 1-20 slots of D, S and U \(DDDSU is common at 3.5 GHz\), got 'DDXU'$"):
        PhysicalChannel(tdd_pattern="DDXU")
    with pytest.raises(ValueError, match=r"^physical.tdd_special_symbols must be three whole numbers"):
        PhysicalChannel(tdd_pattern="DDDSU", tdd_special_symbols=[10, 2, 3])
    assert PhysicalChannel(tdd_pattern="DDDS", tdd_special_symbols=[6, 4, 4]).time_share("ul") == pytest.approx(4 / 56)


def test_subbands_need_block_fading_and_a_carriers_prbs():
    assert PhysicalChannel(coherence_s=1e-3, subbands=8).subbands == 8
    with pytest.raises(ValueError, match=r"^physical.subbands > 1 needs block fading: set coherence_s or ue_speed_mps$"):
        PhysicalChannel(subbands=8)
    with pytest.raises(ValueError, match=r"^physical.subbands must be a whole number in \[1, 275\] \(1: flat fading over the carrier; at most its PRBs\), got 300$"):
        PhysicalChannel(coherence_s=1e-3, subbands=300)
