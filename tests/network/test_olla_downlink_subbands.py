"""Outer-loop link adaptation on the downlink (streams with one receiver) and over blocks of subbands (EESM): the
same loop as an upload's, the inner loop's MCS where the loop has nothing to correct, flat blocks float for float
with one subband, and the long-run NACK share at the target."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wirelessfl.network import link, nr, physical
from wirelessfl.network.profile import PhysicalChannel

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")


def _channel(**extra) -> PhysicalChannel:
    values = {"link": "nr", "bandwidth_hz": 20e6, "cell_radius_m": 600, "coherence_s": 0.01, "nr": {"olla": {"cqi_delay_blocks": 1}}}
    return PhysicalChannel(**{**values, **extra})


def test_the_downlink_loop_feeds_back_once_per_downlink_slot_of_a_block():
    """DDDSU with 10:2:2 symbols gives the downlink 52/70 of the time: 20 slots of 0.5 ms in a 10 ms block carry
    round(20·52/70) = 15 downlink feedbacks and round(20·16/70) = 5 uplink ones; FDD 20 each way."""
    tdd = _channel(tdd_pattern="DDDSU")
    assert physical.olla_link(tdd, "dl").feedbacks_per_block == 15 and physical.olla_link(tdd, "ul").feedbacks_per_block == 5
    fdd = _channel()
    dl = physical.olla_link(fdd, "dl")
    assert dl.feedbacks_per_block == 20 and physical.block_link(fdd, "ul").feedbacks_per_block == 20
    assert dl.link.category == nr.PDSCH and dl.eesm is None
    assert physical.olla_link(_channel(subbands=4, subband_mapping="eesm"), "dl").eesm is not None


def test_a_unicast_stream_is_sent_as_an_upload_is_through_the_downlink_loop():
    """A one-receiver stream under ``olla`` makes exactly the draws and takes exactly the time of ``transfer_time``
    through the downlink's ``OllaLink`` (the upload's loop, block by block: same MCS and NACK sequence), plus the HARQ
    tail; with a one-block-stale report it takes longer than the inner loop's multicast path on the same seed."""
    channel = _channel()
    snr, bits = np.array([10 ** 1.2]), 3e6
    got = physical._stream_delivery(channel, "u", bits, snr, rng := np.random.default_rng(8))
    expected_rng = np.random.default_rng(8)
    sent = link.transfer_time(np.array([bits]), 20e6, snr, expected_rng, 0.01, "rayleigh", None, physical.olla_link(channel, "dl"),
                              physical.MAX_BLOCKS)
    assert rng.bit_generator.state == expected_rng.bit_generator.state
    tail = float(physical.harq_tail_s(channel, "dl", snr)[0])
    assert got.seconds == float(sent.time_s[0]) + tail and got.rate_bps == bits / float(sent.time_s[0])
    assert (got.receivers, got.repair_bits, got.repaired) == (1, 0.0, 0)
    assert sent.mcs[0] >= 3 and sent.retransmissions[0] > 0
    inner = physical._stream_delivery(_channel(nr={}), "u", bits, snr, np.random.default_rng(8))
    assert inner.seconds < got.seconds


def test_a_round_loops_its_unicast_streams_and_leaves_its_multicasts_alone():
    """Streams to one receiver take the loop; a stream to several keeps the inner loop's rate, so its duration is the
    same with and without ``olla`` when it is drawn first."""
    from wirelessfl.network import NetworkModel, SystemProfile
    from wirelessfl.seam import CommPlan, Stream

    def round_with(olla):
        channel = PhysicalChannel(link="nr", bandwidth_hz=20e6, cell_radius_m=600, coherence_s=0.02, nr={"olla": olla})
        model = NetworkModel(SystemProfile(name="cell", rho=1.0, t_min=0.5, physical=channel), 6, np.random.default_rng(3))
        streams = (Stream(1.0, frozenset(range(4)), "group"), Stream(1.0, frozenset({4}), "one"), Stream(1.0, frozenset({5}), "two"))
        plan = CommPlan(streams, {c: 1.0 for c in range(6)}, {c: 1.0 for c in range(6)}, model_params=20_000)
        return model.draw_round(plan, np.random.default_rng(4))

    inner, outer = round_with(None), round_with({"cqi_delay_blocks": 1})
    assert inner.stream_durations[0] == outer.stream_durations[0]
    assert (outer.stream_durations[1:] > inner.stream_durations[1:]).all()


def _eesm_olla(direction: str = "ul", delay: int = 0, target: float = 0.1) -> nr.OllaLink:
    return nr.olla_link(nr.make_link(direction, 20e6, scs_khz=30, bler_target=target), 1.0, delay, eesm=True)


def test_with_one_subband_the_eesm_loop_is_the_flat_loop_float_for_float():
    """EESM of one subband is its SINR (ln 1 = 0), so a loop fed blocks of one subband reports, picks, fails and moves
    exactly as it does on flat blocks (SINRs within EESM's [-30, 30] dB clamp, as Rayleigh draws at 12 dB are)."""
    olla = _eesm_olla(delay=1)
    rng = np.random.default_rng(11)
    sinr = 10 ** 1.2 * rng.standard_exponential((200, 60))
    assert sinr.min() > 1e-3 and sinr.max() < 1e3
    flat, sub = olla.start(np.full(200, 10 ** 1.2)), olla.start(np.full(200, 10 ** 1.2))
    se_flat = flat.blocks(np.arange(200), sinr, np.random.default_rng(12))
    se_sub = sub.blocks(np.arange(200), sinr[..., None], np.random.default_rng(12))
    np.testing.assert_array_equal(se_sub, se_flat)
    np.testing.assert_array_equal(sub.last_mcs, flat.last_mcs)
    np.testing.assert_array_equal(sub.last_nacks, flat.last_nacks)
    np.testing.assert_array_equal(sub.offset, flat.offset)
    np.testing.assert_array_equal(sub.pending, flat.pending)
    assert flat.last_nacks.sum() > 0 and np.unique(flat.last_mcs).size > 5


@pytest.mark.parametrize("direction", ["ul", "dl"])
def test_with_no_delay_and_no_offset_the_eesm_loop_picks_eesm_links_mcs(direction):
    """The report is the block's effective SINR for the MCS the inner loop (``EesmLink``) picks, so at offset 0 and
    no delay the loop's first block sends that MCS and carries ``EesmLink``'s goodput, block for block (Sionna's
    lowest MCS where EESM serves none)."""
    olla = _eesm_olla(direction)
    rng = np.random.default_rng(21)
    sinr = 10 ** (rng.uniform(-2.0, 2.5, size=(3000, 1, 1))) * rng.standard_exponential((3000, 1, 8))
    run = olla.start(np.full(3000, 10.0))
    se = run.blocks(np.arange(3000), sinr, np.random.default_rng(22))
    inner, _ = olla.eesm.mcs_and_index(sinr)
    served = inner >= 0
    assert 0.5 < served.mean() < 1.0 and np.unique(inner[served]).size > 15
    np.testing.assert_array_equal(run.last_mcs[served], inner[served])
    assert (run.last_mcs[~served] == olla.lowest).all()
    np.testing.assert_array_equal(se[served], olla.eesm.subbands_se(sinr)[served])


def test_the_report_is_the_effective_sinr_for_the_inner_loops_mcs():
    """A hand-checked block (``tests/network/test_eesm.py``): subband SINRs 1 and 10 give MCS 12 at γ_eff = 3.6148
    (β = 4.71), and that is the block's report; a block no MCS serves reports its γ_eff for the lowest MCS's β."""
    olla = _eesm_olla("ul")
    blocks = np.array([[1.0, 10.0], [0.01, 0.02]], dtype=np.float32)
    reported = olla.reported_sinr(blocks)
    assert olla.eesm.mcs_and_index(blocks)[0].tolist() == [12, -1]
    beta = olla.link.tables.eesm_beta
    closed = [-b * math.log(np.mean(np.exp(-blocks[i].astype(float) / b))) for i, b in enumerate([beta[12], beta[olla.lowest]])]
    np.testing.assert_allclose(reported, closed, rtol=1e-5)
    assert abs(reported[0] - 3.6148) < 1e-3


def test_the_long_run_nack_share_over_subbands_meets_the_target():
    """Stationary Rayleigh blocks of 8 subbands, a one-block-stale report, one feedback a block: over blocks 200-600 the
    NACK share of 300 users is the target within three standard errors, and the offset moved by exactly
    NACKs·delta_up - ACKs·delta_down (no clamp reached)."""
    olla = _eesm_olla("ul", delay=1)
    users, blocks = 300, 600
    rng = np.random.default_rng(31)
    snr = np.full(users, 10 ** 1.2)
    run = olla.start(snr)
    nacks = []
    for _ in range(blocks // 50):
        run.blocks(np.arange(users), snr[:, None, None] * rng.standard_exponential((users, 50, 8)), rng)
        nacks.append(run.last_nacks)
    nacks = np.concatenate(nacks, axis=1)
    share = nacks[:, 200:].mean(axis=1)
    error = share.std(ddof=1) / math.sqrt(users)
    assert 0 < error < 0.01 and abs(share.mean() - 0.1) < 3 * error, (share.mean(), error)
    assert np.all(np.abs(run.offset) < 20)
    moved = olla.delta_up_db * nacks.sum(axis=1) - olla.delta_down_db * (blocks - nacks.sum(axis=1))
    np.testing.assert_allclose(moved, run.offset, atol=1e-3)


def test_blocks_of_subbands_need_a_loop_built_with_eesm():
    olla = nr.olla_link(nr.make_link("ul", 20e6, scs_khz=30))
    with pytest.raises(ValueError, match=r"^blocks of subbands need an OllaLink built with eesm$"):
        olla.start(np.ones(2)).blocks(np.arange(2), np.ones((2, 3, 4)), np.random.default_rng(0))


def test_an_eesm_round_with_the_loop_draws_each_upload_over_its_subbands():
    """A block-fading round with 8 EESM subbands and ``olla``: every upload and the unicast stream finish, the
    uploads' MCS and retransmissions are their loops' own, and the same round on flat blocks differs."""
    from wirelessfl.network import NetworkModel, SystemProfile
    from wirelessfl.seam import CommPlan, Stream

    def round_with(subbands):
        channel = PhysicalChannel(link="nr", bandwidth_hz=20e6, cell_radius_m=600, coherence_s=0.02, subbands=subbands,
                                  subband_mapping="eesm", nr={"olla": {"cqi_delay_blocks": 1}})
        model = NetworkModel(SystemProfile(name="cell", rho=1.0, t_min=0.5, physical=channel), 8, np.random.default_rng(3))
        plan = CommPlan((Stream(1.0, frozenset({0}), "one"),), {c: 1.0 for c in range(8)}, {c: 1.0 for c in range(8)}, model_params=20_000)
        return model.draw_round(plan, np.random.default_rng(4))

    flat, sub = round_with(1), round_with(8)
    assert np.isfinite(sub.upload).all() and np.isfinite(sub.stream_durations).all()
    assert (sub.mcs >= 3).all() and sub.retransmissions.sum() > 0
    assert not np.array_equal(flat.upload, sub.upload) and flat.stream_durations[0] != sub.stream_durations[0]
