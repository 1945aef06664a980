"""The MCS an NR upload used and its HARQ retransmissions, per client-round (``client_rounds.parquet``).

HARQ by hand: a TB is sent E[T] times on average (E[T] - 1 retransmissions) and delivers TBS·(1 - p_lost) bits,
so an upload of B bits at one SINR retransmits B·(E[T] - 1) / (TBS·(1 - p_lost)) times.
"""

from __future__ import annotations

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, PhysicalChannel, SystemProfile, nr
from wirelessfl.network import physical as phy
from wirelessfl.network.compute import draw_compute_times
from wirelessfl.seam import CommPlan

CHANNEL = PhysicalChannel(link="nr", bandwidth_hz=20e6)


def _grid_point(ul: nr.NrLink, db: float) -> tuple[int, float]:
    """The grid index of ``db`` and a linear SINR exactly on it."""
    index = int(nr.snr_index(ul.tables, np.array([10.0 ** (db / 10.0)]))[0])
    return index, 10.0 ** (float(ul.tables.snr_db[index]) / 10.0)


def _delivered_per_tb(ul: nr.NrLink, index: int) -> float:
    tbs = float(ul.tables.tbs[ul.category, int(ul.mcs[index]), ul.prbs - 1])
    return tbs * (1.0 - float(ul.lost[index]))


def test_a_held_upload_reports_the_mcs_of_its_sinr_and_its_tbs_retransmissions():
    ul = phy.link_model(CHANNEL, "ul")
    # A grid point where the first copy fails often enough for HARQ to matter.
    index = int(np.flatnonzero((ul.mcs >= 0) & (ul.transmissions > 1.05))[0])
    snr = 10.0 ** (float(ul.tables.snr_db[index]) / 10.0)
    per_tb = _delivered_per_tb(ul, index)
    expected = 100.0 * (float(ul.transmissions[index]) - 1.0)  # 100 TBs' worth of bits
    mcs, retransmissions = phy.uplink_held_use(CHANNEL, np.array([snr, snr, 1e-3]), np.array([100.0 * per_tb, 0.0, 1e6]))
    assert mcs.tolist() == [int(ul.mcs[index]), int(ul.mcs[index]), -1]
    assert retransmissions.tolist() == [round(expected), 0, 0]  # no bits, none; below every MCS nothing is sent
    assert expected >= 5


def test_retransmissions_per_bit_is_the_hand_ratio_and_zero_where_nothing_is_sent():
    ul = phy.link_model(CHANNEL, "ul")
    index, _ = _grid_point(ul, 8.0)
    hand = (float(ul.transmissions[index]) - 1.0) / _delivered_per_tb(ul, index)
    assert phy.retransmissions_per_bit(ul, np.array([index]))[0] == pytest.approx(hand, rel=1e-12)
    assert phy.retransmissions_per_bit(ul, np.array([0])).tolist() == [0.0]  # -10 dB: no MCS, no TB


def test_without_fading_the_block_use_is_the_one_sinr_of_every_block():
    channel = PhysicalChannel(link="nr", bandwidth_hz=20e6, fading="none", coherence_s=0.01)
    ul = phy.link_model(channel, "ul")
    points = [_grid_point(ul, db) for db in (-20.0, 5.0, 25.0)]
    modes, per_bit = phy.uplink_block_use(channel, np.array([snr for _, snr in points]))
    assert modes.tolist() == [int(ul.mcs[i]) for i, _ in points] and modes[0] == -1
    assert per_bit.tolist() == pytest.approx(phy.retransmissions_per_bit(ul, np.array([i for i, _ in points])).tolist(), rel=1e-12)


def test_under_rayleigh_the_block_use_is_the_mode_and_mean_over_the_law():
    channel = PhysicalChannel(link="nr", bandwidth_hz=20e6, coherence_s=0.01)
    ul = phy.link_model(channel, "ul")
    top = int(ul.mcs.max())
    # 60 dB above the grid's top: P(a block below the top MCS's threshold) = 1 - exp(-10^((thr - 60)/10)) < 1e-4.
    # -40 dB: P(g > 10^4) = exp(-10^4) = 0, every block is an outage block and nothing is sent.
    modes, per_bit = phy.uplink_block_use(channel, np.array([1e6, 1e-4]))
    assert modes.tolist() == [top, -1] and per_bit[1] == 0.0
    high = phy.retransmissions_per_bit(ul, np.array([ul.mcs.size - 1]))[0]
    assert per_bit[0] == pytest.approx(high, rel=1e-3)
    # A mid user by hand from 100,000 drawn blocks: the MCS histogram's peak and E[retx slots]/E[bits].
    snr = 10.0 ** (12.0 / 10.0)
    index = nr.snr_index(ul.tables, snr * np.random.default_rng(0).standard_exponential(100_000))
    counts = np.bincount(ul.mcs[index] + 1)
    retx = np.where(ul.goodput_bits[index] > 0, 1.0 - 1.0 / ul.transmissions[index], 0.0).mean() / ul.goodput_bits[index].mean()
    modes, per_bit = phy.uplink_block_use(channel, np.array([snr]))
    assert modes[0] == int(np.argmax(counts)) - 1
    assert per_bit[0] == pytest.approx(retx, rel=0.03)


def test_a_held_fading_round_reports_the_use_of_the_drawn_sinr():
    profile = SystemProfile(name="cell", rho=1.0, t_min=0.5, physical=PhysicalChannel(link="nr", bandwidth_hz=20e6, cell_radius_m=800))
    model = NetworkModel(profile, 40, np.random.default_rng(3))
    plan = CommPlan.broadcast(range(40), model_params=50_000)
    timing = model.time_round(plan, np.random.default_rng(4))
    rng = np.random.default_rng(4)  # the round's draws redone: compute, downlink gains, uplink gains (FDD)
    draw_compute_times(model.t_min, model.mu, rng)
    phy.draw_fading(profile.physical, 40, rng)
    ul_gain = phy.draw_fading(profile.physical, 40, rng)
    snr = phy.link_snr(profile.physical, "ul", model.uplink_loss_db) * ul_gain
    mcs, retransmissions = phy.uplink_held_use(profile.physical, snr, np.full(40, 50_000 * 32.0))
    assert [timing.mcs[c] for c in range(40)] == mcs.tolist()
    assert [timing.retransmissions[c] for c in range(40)] == retransmissions.tolist()
    assert len(set(mcs.tolist())) > 3 and retransmissions.max() > 0
