"""Standard channels in a profile: TR 38.901 path loss, Rician fading, block fading by coherence time or
speed, truncated Shannon, coverage multicast. Default profiles keep the old model (its own tests)."""

import math

import numpy as np
import pytest
from scipy.special import exp1

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile
from wirelessfl.network import link, pathloss
from wirelessfl.network import physical as phy
from wirelessfl.seam import CommPlan, Stream


def cell(**channel) -> SystemProfile:
    return SystemProfile(name="cell", t_min=0.0, physical=PhysicalChannel(**channel))


def ring(distance: float, **channel) -> SystemProfile:
    """Every user at ``distance`` (a 1 mm annulus)."""
    return cell(min_distance_m=distance, cell_radius_m=distance + 1e-3, **channel)


def ergodic_se(snr: float) -> float:
    """E[log2(1 + snr·X)], X ~ Exp(1): log2(e)·e^{1/snr}·E1(1/snr)."""
    return math.log2(math.e) * math.exp(1 / snr) * exp1(1 / snr)


def test_the_default_profile_draws_and_times_as_before():
    channel = PhysicalChannel()
    assert (channel.path_loss_model, channel.coherence_s, channel.ue_speed_mps, channel.link, channel.multicast) == (
        "log_distance", None, None, "shannon", "worst_user",
    )
    assert channel.block_s is None
    model = NetworkModel(cell(), 50, np.random.default_rng(0))
    distances = phy.drop_users(channel, 50, np.random.default_rng(0))
    assert np.array_equal(model.path_loss_db, phy.path_loss_db(channel, distances))


def test_a_tr38901_cell_takes_each_users_loss_from_the_tr_with_its_los_state():
    model = NetworkModel(cell(path_loss_model="UMa", carrier_ghz=3.5, cell_radius_m=1000, shadowing=False), 400, np.random.default_rng(1))
    d = model.distances_m
    los = pathloss.path_loss_db("UMa", d, 3.5, True)
    nlos = pathloss.path_loss_db("UMa", d, 3.5, False)
    is_los = np.isclose(model.path_loss_db, los)
    assert np.all(is_los | np.isclose(model.path_loss_db, nlos))
    expected = pathloss.los_probability("UMa", d).mean()
    assert abs(is_los.mean() - expected) < 0.06


def test_shadowing_spreads_the_loss_with_the_trs_deviation():
    flat = NetworkModel(ring(200.0, path_loss_model="UMi", shadowing=False), 4000, np.random.default_rng(2))
    shadowed = NetworkModel(ring(200.0, path_loss_model="UMi"), 4000, np.random.default_rng(2))
    extra = shadowed.path_loss_db - flat.path_loss_db  # same LOS draws, then N(0, sigma)
    nlos = ~np.isclose(flat.path_loss_db, pathloss.path_loss_db("UMi", flat.distances_m, 3.5, True))
    assert abs(extra[nlos].std() - 7.82) < 0.3 and abs(extra[~nlos].std() - 4.0) < 0.3


def test_a_long_upload_over_many_coherence_blocks_sees_the_ergodic_rate():
    profile = ring(300.0, coherence_s=1e-2)
    model = NetworkModel(profile, 1, np.random.default_rng(0))
    channel = profile.physical
    snr = float(phy.mean_snr(channel.ue_power_dbm, model.path_loss_db, channel.bandwidth_hz, channel.noise_density_dbm_hz)[0])
    bits = 2e9  # ~18,000 blocks: the mean over blocks is within 0.5% (sd of one block's SE / mean ~0.5)
    plan = CommPlan(streams=(), uplink={0: 1.0}, work={0: 1.0}, model_params=int(bits / 32))
    upload = model.draw_round(plan, np.random.default_rng(5)).upload[0]
    assert upload == pytest.approx(bits / (channel.bandwidth_hz * ergodic_se(snr)), rel=0.01)
    assert upload / channel.block_s > 1000


def test_a_short_transfer_inside_one_block_sees_that_blocks_rate():
    profile = ring(300.0, coherence_s=10.0)
    model = NetworkModel(profile, 1, np.random.default_rng(0))
    channel = profile.physical
    snr = phy.mean_snr(channel.bs_power_dbm, model.path_loss_db, channel.bandwidth_hz, channel.noise_density_dbm_hz)
    plan = CommPlan(streams=(Stream(1.0, [0]),), uplink={}, work={0: 1.0}, model_params=1000)
    duration = model.draw_round(plan, np.random.default_rng(7)).stream_durations[0]
    draws = np.random.default_rng(7)
    draws.standard_exponential(1)  # the round's compute draw comes first
    gain = draws.standard_exponential(1)[0]  # then the stream's first block
    assert duration == pytest.approx(1000 * 32 / (channel.bandwidth_hz * math.log2(1 + snr[0] * gain)), rel=1e-9)


def test_speed_sets_the_block_from_the_doppler_shift():
    channel = PhysicalChannel(ue_speed_mps=1.4, carrier_ghz=3.5)
    assert channel.block_s == pytest.approx(0.423 / (1.4 * 3.5e9 / 3e8))
    assert PhysicalChannel(ue_speed_mps=0.0).block_s is None


def test_a_coverage_multicast_lasts_until_its_unicast_repairs_land():
    group = list(range(8))
    plan = CommPlan(streams=(Stream(1.0, group),), uplink={}, work=dict.fromkeys(group, 1.0), model_params=200_000)
    profile = cell(coherence_s=2e-3, multicast="coverage", coverage_q=0.75)
    model = NetworkModel(profile, 8, np.random.default_rng(0))
    duration = model.draw_round(plan, np.random.default_rng(3)).stream_durations[0]
    channel, bits = profile.physical, 200_000 * 32
    snr = phy.mean_snr(channel.bs_power_dbm, model.path_loss_db, channel.bandwidth_hz, channel.noise_density_dbm_hz)
    draws = np.random.default_rng(3)
    draws.standard_exponential(8)  # the round's compute draws
    sent = link.multicast_transfer(bits, channel.bandwidth_hz, snr, draws, 2e-3, "rayleigh", None, "shannon", "coverage", 0.75, phy.MAX_BLOCKS)
    owed = sent.repair_bits > 0
    assert owed.any() and sent.repair_bits.sum() < bits * 8
    repairs = link.transfer_time(sent.repair_bits[owed], channel.bandwidth_hz, snr[owed], draws, 2e-3, "rayleigh", None, "shannon", phy.MAX_BLOCKS)
    assert duration == pytest.approx(sent.time_s + repairs.time_s.sum(), rel=1e-12)


def test_truncated_shannon_rates_follow_tr36942():
    channel = PhysicalChannel(link="truncated_shannon", fading="none")
    loss = np.array([80.0, 120.0, 160.0])
    snr = phy.mean_snr(channel.bs_power_dbm, loss, channel.bandwidth_hz, channel.noise_density_dbm_hz)
    expected = channel.bandwidth_hz * np.where(10 * np.log10(snr) < -10, 0.0, np.minimum(0.6 * np.log2(1 + snr), 4.4))
    assert np.allclose(phy.downlink_rates(channel, loss, np.ones(3)), expected, rtol=1e-12)
    ul = phy.mean_snr(channel.ue_power_dbm, loss, channel.bandwidth_hz, channel.noise_density_dbm_hz)
    assert np.allclose(phy.uplink_rates(channel, loss, np.ones(3)), channel.bandwidth_hz * link.spectral_efficiency(ul, "truncated_shannon_ul"), rtol=1e-12)
    assert (link.TR36942_UPLINK.alpha, link.TR36942_UPLINK.snr_min_db) == (0.4, -10.0)


def test_rician_gains_have_mean_one_in_round_mode():
    gains = phy.draw_fading(PhysicalChannel(fading="rician", k_factor_db=9.0), 200_000, np.random.default_rng(0))
    k = 10 ** 0.9
    assert gains.mean() == pytest.approx(1.0, abs=0.01)
    assert gains.var() == pytest.approx((1 + 2 * k) / (1 + k) ** 2, rel=0.03)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"path_loss_model": "urban"}, r"^physical.path_loss_model must be one of 'log_distance', 'UMa', 'UMi', 'RMa', got 'urban'$"),
        ({"carrier_ghz": 200}, r"^physical.carrier_ghz must be in \[0.5, 100\] .*, got 200$"),
        ({"path_loss_model": "RMa", "carrier_ghz": 40}, r"^physical.carrier_ghz must be at most 30 for path_loss_model RMa \(TR 38.901\), got 40$"),
        ({"coherence_s": 0}, r"^physical.coherence_s must be in \[1e-05, 3600\] .*, got 0$"),
        ({"coherence_s": 1e-3, "ue_speed_mps": 3}, r"^physical: give coherence_s or ue_speed_mps .*, not both$"),
        ({"multicast": "coverage", "coverage_q": 0.9}, r"^physical.multicast 'coverage' needs block fading: set coherence_s or ue_speed_mps$"),
        ({"coverage_q": 1.5, "coherence_s": 1e-3}, r"^physical.coverage_q must be in \[0.01, 1\] .*, got 1.5$"),
        ({"link": "lte"}, r"^physical.link must be one of 'shannon', 'truncated_shannon', 'nr', got 'lte'$"),
        ({"shadowing": "yes"}, r"^physical.shadowing must be true or false, got 'yes'$"),
    ],
)
def test_bad_channel_settings_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        PhysicalChannel(**fields)


def test_the_summary_line_names_the_models():
    assert PhysicalChannel(fading="none").summary() == (
        "cell 10-250 m, log-distance path loss (exponent 3.5), no fading, Shannon rates, 10 MHz, worst-user multicast"
    )
    assert PhysicalChannel(path_loss_model="RMa", carrier_ghz=0.7, shadowing=False, fading="rician", coherence_s=0.01).summary() == (
        "cell 10-250 m, TR 38.901 RMa at 0.7 GHz (no shadowing), Rician K = 9 dB fading in 10 ms blocks, Shannon rates, "
        "10 MHz, worst-user multicast"
    )


def test_a_common_drop_places_the_same_users_in_every_profile():
    """``drop: common`` keys the static draws by the seed alone: two profiles with different channels place
    their users at the same distances with the same LOS states and shadowing; ``per_profile`` does not."""
    from wirelessfl.network import SystemProfile
    from wirelessfl.run.seeds import static_rng

    def losses(name: str, drop: str, link: str) -> np.ndarray:
        profile = SystemProfile(name=name, physical=PhysicalChannel(path_loss_model="UMa", drop=drop, link=link))
        return NetworkModel(profile, 50, static_rng(3, profile)).path_loss_db

    np.testing.assert_array_equal(losses("a", "common", "shannon"), losses("b", "common", "truncated_shannon"))
    assert not np.array_equal(losses("a", "per_profile", "shannon"), losses("b", "per_profile", "shannon"))
    with pytest.raises(ValueError, match=r"^physical.drop must be one of 'per_profile', 'common', got 'shared'$"):
        PhysicalChannel(drop="shared")


def test_each_stream_reports_its_rate_and_repairs_by_hand():
    """No fading, 4 receivers, coverage q = 0.75: the multicast runs at the second-weakest receiver's Shannon
    rate; the weakest gets all the bits again by unicast at its own rate, after the multicast."""
    physical = PhysicalChannel(fading="none", coherence_s=0.01, multicast="coverage", coverage_q=0.75)
    profile = SystemProfile(name="cell", physical=physical)
    model = NetworkModel(profile, 4, np.random.default_rng(2))
    plan = CommPlan(streams=(Stream(1.0, [0, 1, 2, 3], label="all"),), uplink={}, work={c: 1.0 for c in range(4)}, model_params=10_000)
    (delivery,) = model.time_round(plan, np.random.default_rng(0)).deliveries
    rates = phy.downlink_rates(physical, model.path_loss_db, np.ones(4))
    weakest, second = np.sort(rates)[:2]
    bits = 10_000 * 32
    assert (delivery.label, delivery.receivers, delivery.bits) == ("all", 4, bits)
    assert delivery.rate_bps == pytest.approx(second, rel=1e-12)
    assert (delivery.repaired, delivery.repair_bits) == (1, pytest.approx(bits))
    assert delivery.seconds == pytest.approx(bits / second + bits / weakest, rel=1e-12)
    worst = SystemProfile(name="cell", physical=PhysicalChannel(fading="none", coherence_s=0.01))
    (plain,) = NetworkModel(worst, 4, np.random.default_rng(2)).time_round(plan, np.random.default_rng(0)).deliveries
    assert plain.rate_bps == pytest.approx(weakest, rel=1e-12) and plain.repair_bits == 0.0 and plain.repaired == 0


def test_a_default_physical_round_is_the_original_model():
    """The defaults (and the new fields left unset: uplink, drop, nr) keep the original physical model: per
    round one Exp(1) compute draw per client, one Rayleigh downlink and one uplink gain per client, Shannon
    rates at the log-distance loss, each stream at its weakest receiver's rate. Written out here from that
    model and compared with draw_round on the same generator (to 1e-13: the same formula, written in another order)."""
    channel = PhysicalChannel()
    profile = SystemProfile(name="cell", physical=channel, t_min=0.5, mu=2.0)
    model = NetworkModel(profile, 6, np.random.default_rng(4))
    plan = CommPlan(streams=(Stream(1.0, [0, 1, 2]), Stream(0.5, [3, 4, 5])), uplink={c: 1.0 for c in range(6)},
                    work={c: 1.0 for c in range(6)}, model_params=20_000)
    inputs = model.draw_round(plan, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    compute = 0.5 + rng.exponential(1 / 2.0, 6)
    dl, ul = rng.standard_exponential(6), rng.standard_exponential(6)
    noise = 10 ** ((channel.noise_density_dbm_hz - 30) / 10) * channel.bandwidth_hz
    gain = 10 ** (-model.path_loss_db / 10)
    dl_rate = channel.bandwidth_hz * np.log2(1 + 10 ** ((channel.bs_power_dbm - 30) / 10) * dl * gain / noise)
    ul_rate = channel.bandwidth_hz * np.log2(1 + 10 ** ((channel.ue_power_dbm - 30) / 10) * ul * gain / noise)
    bits = 20_000 * 32
    np.testing.assert_allclose(inputs.compute, compute, rtol=1e-15)
    np.testing.assert_allclose(inputs.stream_durations, [bits / dl_rate[:3].min(), 0.5 * bits / dl_rate[3:].min()], rtol=1e-13)
    np.testing.assert_allclose(inputs.upload, bits / ul_rate, rtol=1e-13)
