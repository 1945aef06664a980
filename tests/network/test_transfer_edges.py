"""Edges the mutation check found untested (issue 51, item 8): the multicast's extrapolated rest, a held-fading
multicast in outage, a user without bandwidth, a round that ends exactly at its deadline, every NR carrier width;
from the full check of ``link.py``: the draw budgets, caps met exactly, rates under 1 bit/s, empty blocks, the
moments' samples, one-draw multicasts, and seeded results recorded to the last bit."""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest

from wirelessfl.network import NetworkModel, SystemProfile, link, nr
from wirelessfl.network.interference import FadedInterference
from wirelessfl.seam import CommPlan, Stream


def test_a_multicast_past_its_drawn_blocks_repairs_exactly_what_its_weak_receiver_missed():
    """No fading, coverage q = 0.5 over receivers at SNR 3 and 15: every block goes at the strong one's rate
    (B·log2(16) = 4 Mbit/s), so the weak one misses every bit. 10 blocks' worth of bits with 4 blocks drawn: the
    rest is extrapolated, and the repair must still be the whole payload (bits / delivered · missed)."""
    bits = 4e6 * 1e-3 * 10
    sent = link.multicast_transfer(bits, 1e6, np.array([3.0, 15.0]), np.random.default_rng(0), 1e-3, fading="none",
                                   policy="coverage", q=0.5, exact_blocks=4)
    assert not sent.outage and sent.blocks == 10
    assert sent.time_s == pytest.approx(bits / 4e6, rel=1e-12)
    assert sent.repair_bits.tolist() == pytest.approx([bits, 0.0], rel=1e-12)


def test_a_held_multicast_with_a_receiver_out_of_coverage_is_in_outage():
    """One draw held for the stream, truncated Shannon: a receiver 20 dB below SINR_MIN has rate 0 at any
    plausible gain, so the worst-user stream never ends."""
    sent = link.multicast_transfer(1e6, 1e6, np.array([1e-3, 100.0]), np.random.default_rng(1), math.inf,
                                   link="truncated_shannon", fading="none")
    assert (sent.time_s, sent.blocks, sent.rate_bps, sent.outage) == (math.inf, 1, 0.0, True)
    assert sent.repair_bits.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("coherence_s", [math.inf, 1e-3])
def test_a_user_without_bandwidth_is_in_outage_and_one_without_bits_takes_no_time(coherence_s):
    sent = link.transfer_time(np.array([1e5, 1e5, 0.0]), np.array([0.0, 1e6, 0.0]), np.array([10.0, 10.0, 10.0]),
                              np.random.default_rng(2), coherence_s)
    assert sent.time_s[0] == math.inf and sent.outage[0]
    assert 0 < sent.time_s[1] < math.inf and not sent.outage[1]
    assert sent.time_s[2] == 0.0 and not sent.outage[2]


@pytest.mark.parametrize("schedule", ["phased", "pipelined"])
@pytest.mark.parametrize("closed_form", [True, False])
def test_computing_or_landing_exactly_at_the_deadline_counts_as_on_time(schedule, closed_form):
    """One client, T_dl = 1, compute exactly 1 (mu = inf), an upload of rho = 1: it has the model at 1, has
    computed at 2 and lands at 3. A deadline of 2 keeps it (its upload lands late); a deadline of 3 takes it."""
    plan = CommPlan.broadcast([0], model_params=1)

    def timing(deadline):
        profile = SystemProfile.from_dict({"name": "edge", "rho": 1.0, "t_min": 1.0, "schedule": schedule, "deadline": deadline})
        return NetworkModel(profile, 1, np.random.default_rng(0), closed_form=closed_form).time_round(plan, np.random.default_rng(0))

    at_compute = timing(2.0)
    assert at_compute.t_computed[0] == 2.0 and at_compute.t_uploaded[0] == 3.0 and at_compute.arrived == frozenset()
    at_landing = timing(3.0)
    assert at_landing.t_uploaded[0] == 3.0 and at_landing.arrived == frozenset({0}) and at_landing.t_end == 3.0


TS38101_TABLE_5_3_2_1 = {
    15: {5: 25, 10: 52, 15: 79, 20: 106, 25: 133, 30: 160, 40: 216, 50: 270},
    30: {5: 11, 10: 24, 15: 38, 20: 51, 25: 65, 30: 78, 40: 106, 50: 133, 60: 162, 70: 189, 80: 217, 90: 245, 100: 273},
    60: {10: 11, 15: 18, 20: 24, 25: 31, 30: 38, 40: 51, 50: 65, 60: 79, 70: 93, 80: 107, 90: 121, 100: 135},
}
"""TS 38.101-1 Table 5.3.2-1 (FR1 maximum transmission bandwidth N_RB), written out again here."""


def test_every_nr_carrier_width_has_the_specs_prb_count():
    assert sum(len(widths) for widths in TS38101_TABLE_5_3_2_1.values()) == 33
    for spacing, widths in TS38101_TABLE_5_3_2_1.items():
        for mhz, prbs in widths.items():
            assert nr.prbs_for(mhz * 1e6, spacing) == prbs, (spacing, mhz)
    assert nr.PRBS_PER_CARRIER == TS38101_TABLE_5_3_2_1


@pytest.mark.parametrize("record_events", [True, False])
def test_under_tdd_the_base_station_goes_ahead_of_an_upload_queued_before_its_stream(record_events):
    """Pipelined TDD, three one-model streams a -> {0}, b -> {1}, c -> {2} (0-1, 1-2, 2-3), compute 0.5, rho = 1.
    Client 0 has computed at 1.5 and waits for the medium during b; when b ends at 2 the base station takes it for
    c (2-3) although the upload asked first, so uploads run 3-4, 4-5, 5-6 (SimPy and the closed form)."""
    plan = CommPlan(streams=(Stream(1.0, {0}, "a"), Stream(1.0, {1}, "b"), Stream(1.0, {2}, "c")),
                    uplink={0: 1.0, 1: 1.0, 2: 1.0}, work={0: 1.0, 1: 1.0, 2: 1.0})
    profile = SystemProfile.from_dict({"name": "tdd", "rho": 1.0, "t_min": 0.5, "schedule": "pipelined", "duplex": "tdd"})
    timing = NetworkModel(profile, 3, np.random.default_rng(0), record_events=record_events).time_round(plan, np.random.default_rng(0))
    assert dict(timing.t_received) == {0: 1.0, 1: 2.0, 2: 3.0}
    assert dict(timing.t_uploaded) == {0: 4.0, 1: 5.0, 2: 6.0} and timing.t_end == 6.0


def test_one_block_is_a_valid_cap_and_zero_is_one_line():
    """``max_blocks = 1``: a transfer that fits in its first block finishes, one that needs two is in outage."""
    sent = link.transfer_time(np.array([1e3, 1e6]), 1e6, 10.0, np.random.default_rng(0), 1e-3, fading="none", max_blocks=1)
    assert sent.time_s[0] == pytest.approx(1e3 / (1e6 * math.log2(11.0)), rel=1e-12) and sent.time_s[1] == math.inf
    assert sent.outage.tolist() == [False, True]
    with pytest.raises(ValueError) as error:
        link.transfer_time(1e3, 1e6, 10.0, np.random.default_rng(0), 1e-3, max_blocks=0)
    assert str(error.value) == "max_blocks must be an integer >= 1, got 0"


def test_a_multicast_to_one_receiver_is_its_unicast_and_one_past_its_cap_is_in_outage():
    """No fading: one receiver at SNR 15 takes bits / (B·log2(16)); twice the bits the 5-block cap allows end in
    outage with no rate and the blocks it used."""
    one = link.multicast_transfer(4e3, 1e6, np.array([15.0]), np.random.default_rng(0), 1e-3, fading="none")
    assert (one.time_s, one.blocks, one.outage) == (pytest.approx(1e-3), 1, False) and one.rate_bps == pytest.approx(4e6)
    capped = link.multicast_transfer(4e4, 1e6, np.array([15.0, 15.0]), np.random.default_rng(0), 1e-3, fading="none", max_blocks=5)
    assert (capped.time_s, capped.blocks, capped.rate_bps, capped.outage) == (math.inf, 5, 0.0, True)


def test_harq_where_no_mcs_meets_the_target_counts_every_copy_as_failed():
    """At a grid SINR with no usable MCS every copy fails: 1 + R transmissions, the TB lost (what a multicast's
    HARQ tail reads at a weakest receiver in outage)."""
    tbler = np.full((2, 3), 0.5)
    first, transmissions, lost = nr.harq_statistics(tbler, np.array([-1, 1, 1]), 3, 0.1)
    assert (first[0], transmissions[0], lost[0]) == (1.0, 4.0, 1.0)
    assert transmissions[1] == 1.0 + 0.5 + 0.25 + 0.125 and lost[1] == 0.5**4
    _, transmissions, lost = nr.harq_statistics(tbler, np.array([0, 0, 0]), 3, 0.1)  # MCS 0 is an MCS like the others
    assert transmissions.tolist() == [1.875] * 3 and lost.tolist() == [0.0625] * 3


def test_eesm_keeps_float32_sinrs_in_float32():
    """The link's search runs in float32, as Sionna's EESM does; float64 SINRs stay float64."""
    assert nr.eesm_sinr(np.array([1.0, 10.0], dtype=np.float32), 4.71).dtype == np.float32
    assert nr.eesm_sinr(np.array([1.0, 10.0]), 4.71).dtype == np.float64


def test_a_multicast_draws_max_256_or_2_to_the_20_over_its_receivers_blocks():
    """``exact_blocks_for``: the documented rule ``max(256, 2^20 // receivers)``, an integer (0 receivers: as 1)."""
    assert [link.exact_blocks_for(rows) for rows in (0, 1, 1000, 4096, 5000)] == [2**20, 2**20, 1048, 256, 256]
    assert isinstance(link.exact_blocks_for(1000), int)


@pytest.mark.parametrize("owed", [1e3, 1e2])
def test_a_unicast_transfer_draws_256_blocks_then_ends_after_its_renewal_number_of_blocks(owed):
    """One user, Rayleigh, Shannon, B = 1 MHz, T_c = 1 ms, SNR 1, R = 1,000 or 100 bits more than its first 256 blocks
    carry (m is about 860): those are the generator's first 256 exponential draws, and the rest takes
    max(R/m + sqrt(R·v/m³)·Z, 0) blocks, Z the next standard normal, m and v ``block_bits_moments``'s."""
    reference = np.random.default_rng(5)
    per_block = 1e6 * np.log2(1.0 + reference.standard_exponential(256)) * 1e-3
    z = reference.standard_normal(1)[0]
    m, v, _ = link.block_bits_moments(1e6, 1.0, 1e-3)
    more = max(owed / m[0] + math.sqrt(owed * v[0] / m[0] ** 3) * z, 0.0)
    sent = link.transfer_time(float(per_block.sum()) + owed, 1e6, 1.0, np.random.default_rng(5), 1e-3)
    assert sent.time_s == pytest.approx(256e-3 + more * 1e-3, rel=1e-12)
    assert sent.blocks == 256 + math.ceil(more) and not sent.outage


def test_a_transfer_that_needs_exactly_its_cap_of_blocks_is_delivered():
    """A link of 1 bit/s/Hz at any SNR: 1,000 bits a 1 ms block of 1 MHz, so 4,000 bits end exactly with block 4 of
    a cap of 4; 6,000 bits with 4 blocks drawn end after a renewal rest of exactly 2 (variance 0) at a cap of 6; 5,000
    bits at a cap of 4 are in outage, and the generator has given only the 4 blocks' gains (no renewal draw), as are
50,000 bits whose rest would need 46 blocks past 4 drawn at a cap of 10."""
    sent = link.transfer_time(4e3, 1e6, 1.0, np.random.default_rng(0), 1e-3, link=np.ones_like, max_blocks=4)
    assert (sent.time_s, sent.blocks, sent.outage) == (pytest.approx(4e-3, rel=1e-12), 4, False)
    rest = link.transfer_time(6e3, 1e6, 1.0, np.random.default_rng(0), 1e-3, link=np.ones_like, max_blocks=6, exact_blocks=4)
    assert (rest.time_s, rest.blocks, rest.outage) == (pytest.approx(6e-3, rel=1e-12), 6, False)
    rng, reference = np.random.default_rng(0), np.random.default_rng(0)
    late = link.transfer_time(5e3, 1e6, 1.0, rng, 1e-3, link=np.ones_like, max_blocks=4)
    reference.standard_exponential((1, 4))
    assert (late.time_s, late.blocks, late.outage) == (math.inf, 4, True) and rng.random() == reference.random()
    far = link.transfer_time(5e4, 1e6, 1.0, np.random.default_rng(0), 1e-3, link=np.ones_like, max_blocks=10, exact_blocks=4)
    assert (far.time_s, far.blocks, far.outage) == (math.inf, 4, True)  # a rest of 46 blocks does not fit in 6


def test_a_transfer_of_less_than_one_bit_takes_its_time():
    """Half a bit at 1 bit/s/Hz over 1 MHz (SNR 1, no fading): 0.5 µs, not 0."""
    sent = link.transfer_time(np.array([0.5, 0.0]), 1e6, 1.0, np.random.default_rng(0), 1e-3, fading="none")
    assert sent.time_s.tolist() == [pytest.approx(5e-7, rel=1e-12), 0.0] and sent.blocks.tolist() == [1, 0]


def test_a_rate_at_or_below_one_bit_per_second_is_still_a_rate():
    """No fading, T_c = 1 ms: half a hertz at SNR 1 (1 bit/s/Hz) is 0.5 bit/s, so 1 bit takes 2 s and its blocks;
    at SNR 0 a user is in outage with its 10,000 blocks all empty; 1,000 bits over 1 MHz take one block; a payload
    so small that its time underflows to 0 still uses one block."""
    sent = link.transfer_time(np.array([1.0, 1.0, 1e3, 1e-320]), np.array([0.5, 1e6, 1e6, 1e6]), np.array([1.0, 0.0, 1.0, 1.0]),
                              np.random.default_rng(0), 1e-3, fading="none")
    assert sent.time_s.tolist() == [2.0, math.inf, 1e-3, 0.0]
    assert sent.blocks.tolist() == [math.ceil(2.0 / 1e-3), 10_000, 1, 1]
    assert sent.outage_blocks.tolist() == [0, 10_000, 0, 0] and sent.outage.tolist() == [False, True, False, False]


def test_under_block_fading_half_a_hertz_delivers_and_snr_0_or_no_bandwidth_is_outage_without_draws():
    """Rayleigh, T_c = 1 s, cap 50 blocks: a user with 0.5 Hz at SNR 10 delivers its bit, exactly as when alone
    (the users at SNR 0 or without bandwidth draw nothing), and those two are in outage with 50 empty blocks."""
    sent = link.transfer_time(1.0, np.array([0.5, 1e6, 0.0]), np.array([10.0, 0.0, 10.0]), np.random.default_rng(3), 1.0, max_blocks=50)
    alone = link.transfer_time(1.0, 0.5, 10.0, np.random.default_rng(3), 1.0, max_blocks=50)
    assert 0 < sent.time_s[0] < math.inf and sent.time_s[0] == alone.time_s and sent.blocks[0] == alone.blocks
    assert sent.time_s[1:].tolist() == [math.inf, math.inf] and sent.outage.tolist() == [False, True, True]
    assert sent.blocks[1:].tolist() == [50, 50] and sent.outage_blocks[1:].tolist() == [50, 50]
    slow = link.transfer_time(3.0, 0.5, 1.0, np.random.default_rng(4), 1.0, max_blocks=50)  # under 0.5 bit/s a block, never 0
    assert slow.blocks > 1 and slow.outage_blocks == 0 and not slow.outage
    long = link.transfer_time(200.0, 0.5, 1.0, np.random.default_rng(5), 1.0)  # 0.43 bits a block: a renewal rest, no outage
    assert 256 < long.blocks < 1000 and not long.outage


def test_a_seed_reproduces_a_mixed_call_to_the_last_bit():
    """A seed reproduces every result (the rule the traces keep byte for byte): five Rayleigh users of 16 to 755 blocks
    (several passes of ``_chunk``'s sizes, the last past its 256 drawn blocks), and under truncated Shannon one user
    whose mean rate is 0 (SNR 0.05 < SINR_min 0.1: no estimate, so a pass draws every block left); two users with
a tenth of a block each (the 4-block floor of a pass); three users under faded interference and one with 4 subbands (their
renewal moments over fixed samples); eight
under outer-loop link adaptation (the NACKs of each last, partial block; the renewal rest of the long ones); 5,000 users of about 230 blocks (the memory cap on a pass,
2^20 draws). Recorded values:
    a change here changes which draws each user gets, which must be a deliberate, documented one."""
    sent = link.transfer_time(np.array([3e3, 5e4, 2e5, 1e5, 4e5]), 1e6, np.array([0.05, 1.0, 10.0, 100.0, 0.5]),
                              np.random.default_rng(7), 1e-3)
    assert sent.time_s.tolist() == [0.04248082451062863, 0.05635592503316818, 0.07537967878745133, 0.015264807955381952,
                                    0.7549335035377336]
    assert sent.blocks.tolist() == [43, 57, 76, 16, 755] and not sent.outage_blocks.any()
    capped = link.transfer_time(np.array([2e3, 2e4, 1e3]), 1e6, np.array([0.05, 1.0, 10.0]), np.random.default_rng(8), 1e-3,
                                link="truncated_shannon")
    assert capped.time_s.tolist() == [0.13299738877442235, 0.04372227204472633, 0.0013741311254115477]
    assert capped.blocks.tolist() == [133, 44, 2] and capped.outage_blocks.tolist() == [118, 6, 0]
    tiny = link.transfer_time(np.array([100.0, 100.0]), 1e6, 1.0, np.random.default_rng(10), 1e-3)  # passes of 4 blocks
    assert tiny.time_s.tolist() == [0.00012087995597013558, 4.870033114540477e-05]
    faded = FadedInterference.from_moments(np.array([1.0, 3.0, 2.0]), np.array([1.0, 9.0, 4.0]))  # passes sized at the mean SINR
    interfered = link.transfer_time(np.array([3e4, 6e4, 1e6]), 1e6, np.array([10.0, 30.0, 5.0]), np.random.default_rng(11), 1e-3,
                                    interference=faded)
    assert interfered.time_s.tolist() == [0.0153781302761559, 0.02032740028366327, 0.754273653518243]
    pair = FadedInterference.from_moments(np.array([1.0, 3.0]), np.array([1.0, 9.0]))  # a pass sized by both
    interfered = link.transfer_time(np.array([3e4, 6e4]), 1e6, np.array([10.0, 30.0]), np.random.default_rng(11), 1e-3, interference=pair)
    assert interfered.time_s.tolist() == [0.015196765148502907, 0.026039199341180434]
    subbands = link.transfer_time(1e6, 1e6, 5.0, np.random.default_rng(13), 1e-3, subbands=4)
    assert subbands.time_s == 0.4664824466179384 and subbands.blocks == 467
    olla = nr.olla_link(nr.make_link("ul", 20e6, scs_khz=30), 1.0, 1, feedbacks_per_block=3)  # NACKs of a partial last block
    adapted = link.transfer_time(np.geomspace(1e5, 1e8, 8), 20e6, np.geomspace(2.0, 50.0, 8), np.random.default_rng(12), 1e-3, link=olla)
    assert adapted.time_s.tolist() == [0.009550482430339425, 0.018962352108412232, 0.060855423097963685, 0.14271379800990644,
                                       0.296387414447598, 0.5693990483371808, 1.3349228752180313, 3.6104596914697016]
    assert adapted.mcs.tolist() == [3, 3, 3, 3, 3, 12, 16, 3]
    assert adapted.retransmissions.tolist() == [7, 10, 25, 49, 95, 182, 417, 1241]
    assert adapted.outage_blocks.tolist() == [1, 1, 4, 8, 10, 13, 31, 127]  # the long ones' rests at the empty share drawn
    many = link.transfer_time(np.full(5000, 2e5), 1e6, 1.0, np.random.default_rng(9), 1e-3)  # 2^20 // 5000 = 209 a pass
    assert (many.time_s[0], many.time_s[-1], many.blocks.sum()) == (0.2314987043711537, 0.24772582025889656, 1166358)


def test_block_se_is_flat_fading_unless_told_subbands():
    """Its default: one gain a block, ``[users, blocks]`` (here no fading, SNR 1: 1 bit/s/Hz)."""
    assert link.block_se(link.shannon, np.array([1.0]), np.random.default_rng(0), 3, "none", None).tolist() == [[1.0, 1.0, 1.0]]


def test_an_empty_block_carries_nothing_rather_than_under_a_bit():
    """``block_bits_moments``'s share of empty blocks: 0 for Shannon at 0.5 Hz (every block under half a bit, none
    empty), flat, over 2 subbands and under faded interference; under truncated Shannon at SNR 0.05 a block is empty
    when g < 2 (SINR_min 0.1): 1 - e^-2 flat (the grid, to 1e-3), (1 - e^-2)^2 with both subbands empty (4,096
    sampled blocks), and at least 1 - e^-2 with interference."""
    faded = FadedInterference.from_moments(np.array([0.5]), np.array([0.25]))
    for settings in ({}, {"subbands": 2}, {"interference": faded}):
        assert link.block_bits_moments(np.array([0.5]), np.array([1.0]), 1.0, **settings)[2].tolist() == [0.0], settings
    p = 1.0 - math.exp(-2.0)
    assert link.block_bits_moments(1e6, 0.05, 1e-3, link="truncated_shannon")[2][0] == pytest.approx(p, abs=1e-3)
    assert link.block_bits_moments(1e6, 0.05, 1e-3, link="truncated_shannon", subbands=2)[2][0] == pytest.approx(p * p, abs=0.03)
    assert link.block_bits_moments(np.array([1e6]), np.array([0.05]), 1e-3, link="truncated_shannon", interference=faded)[2][0] >= p - 0.03


def test_blocks_of_257_subbands_have_the_flat_mean():
    """More subbands than 2^20 / 4,096 samples: the moments still come (in steps of one user), with the flat mean
    (the mean of the subbands' efficiencies has the same mean)."""
    flat = link.block_bits_moments(1e6, 1.0, 1e-3)[0][0]
    assert link.block_bits_moments(1e6, 1.0, 1e-3, subbands=257)[0][0] == pytest.approx(flat, rel=0.01)
    none = FadedInterference.from_moments(np.array([0.0]), np.array([0.0]))  # no interference: the same law
    assert link.block_bits_moments(np.array([1e6]), np.array([1.0]), 1e-3, subbands=257, interference=none)[0][0] == pytest.approx(flat, rel=0.01)


def test_under_faded_interference_two_subbands_halve_the_variance_of_a_blocks_bits():
    """Two subbands of independent gains (and interference draws): each block's bits are the mean of two, so their
    variance is about half of one subband's (4,096 sampled blocks; 0.75 leaves room for the sample)."""
    faded = FadedInterference.from_moments(np.array([1.0]), np.array([1.0]))
    one = link.block_bits_moments(np.array([1e6]), np.array([10.0]), 1e-3, interference=faded)[1][0]
    two = link.block_bits_moments(np.array([1e6]), np.array([10.0]), 1e-3, subbands=2, interference=faded)[1][0]
    assert 0.3 * one < two < 0.75 * one


def test_a_links_remembered_moments_are_its_own():
    """The table of remembered moments is keyed by the link's identity and holds the link: a table left under the
    same identity by another object (a link since collected) is not read."""
    def shannon(snr):
        return np.log2(1.0 + snr)

    settings = (1e-3, "rayleigh", None, 2)
    link._MOMENTS[id(shannon)] = (object(), {(settings, 1e6, 1.0): (1.0, 2.0, 3.0)})
    try:
        mean, var, empty = link.block_bits_moments(1e6, 1.0, 1e-3, link=shannon, subbands=2)
    finally:
        link._MOMENTS.pop(id(shannon), None)
    assert mean[0] == pytest.approx(link.block_bits_moments(1e6, 1.0, 1e-3)[0][0], rel=0.05) and empty[0] == 0.0


def test_a_constant_links_blocks_have_no_variance():
    """1 bit/s/Hz at any SINR: every block carries 1,000 bits, over subbands or under faded interference alike."""
    faded = FadedInterference.from_moments(np.array([0.5]), np.array([0.25]))
    for settings in ({"subbands": 2}, {"interference": faded}):
        mean, var, empty = link.block_bits_moments(np.array([1e6]), np.array([1.0]), 1e-3, link=np.ones_like, **settings)
        assert (mean.tolist(), var.tolist(), empty.tolist()) == ([1000.0], [0.0], [0.0]), settings


def test_a_multicast_of_one_draw_is_its_stream_rate_and_the_receivers_below_it_miss_everything():
    """``coherence_s = inf``, no fading, receivers at SNR 3 and 15 (2 and 4 Mbit/s over 1 MHz): the worst-user stream
    goes at 2 Mbit/s in one block with nothing to repair; coverage q = 0.5 (upper median) at 4 Mbit/s, and only the
    receiver below that rate (not the one at it) misses the stream; the default q is 1, the worst user; 0.5 Hz
    gives a rate under 1 bit/s, still a rate; a stream of 0 bits takes nothing."""
    snr = np.array([3.0, 15.0])
    worst = link.multicast_transfer(4e6, 1e6, snr, np.random.default_rng(0), math.inf, fading="none")
    assert (worst.time_s, worst.blocks, worst.rate_bps, worst.outage, worst.repair_bits.tolist()) == (2.0, 1, 2e6, False, [0.0, 0.0])
    half = link.multicast_transfer(4e6, 1e6, snr, np.random.default_rng(0), math.inf, fading="none", policy="coverage", q=0.5)
    assert (half.time_s, half.blocks, half.rate_bps, half.outage, half.repair_bits.tolist()) == (1.0, 1, 4e6, False, [4e6, 0.0])
    default = link.multicast_transfer(4e6, 1e6, snr, np.random.default_rng(0), math.inf, fading="none", policy="coverage")
    assert (default.time_s, default.repair_bits.tolist()) == (2.0, [0.0, 0.0])
    slow = link.multicast_transfer(1.0, 0.5, np.array([1.0]), np.random.default_rng(0), math.inf, fading="none")
    assert (slow.time_s, slow.rate_bps, slow.outage) == (2.0, 0.5, False)
    for coherence_s in (math.inf, 1e-3):
        nothing = link.multicast_transfer(0.0, 1e6, snr, np.random.default_rng(0), coherence_s)
        assert (nothing.time_s, nothing.blocks, nothing.rate_bps, nothing.outage, nothing.repair_bits.tolist()) == (0.0, 0, 0.0, False, [0.0, 0.0])
    one_bit = link.multicast_transfer(1.0, 1e6, snr, np.random.default_rng(0), math.inf, fading="none")
    assert one_bit.time_s == 5e-7


def test_coverage_of_a_tiny_share_serves_the_best_receiver():
    """q below 1/n (even below the 1e-12 the rounding allows): at least one receiver, the best."""
    assert link.coverage_rate(np.array([1.0, 2.0, 3.0]), 1e-13) == 3.0


def test_a_seed_reproduces_a_multicast_to_the_last_bit():
    """As for unicast: three Rayleigh receivers (worst user, and coverage q = 0.5 with its repairs), two under
    faded interference (the pass sized at their mean SINR), and 300 with 8 subbands each (passes capped by memory,
    then by the 500 blocks drawn). Recorded values."""
    snr = np.array([3.0, 10.0, 30.0])
    worst = link.multicast_transfer(4e4, 1e6, snr, np.random.default_rng(14), 1e-3)
    assert (worst.time_s, worst.blocks) == (0.027260580997188113, 28)
    half = link.multicast_transfer(4e4, 1e6, snr, np.random.default_rng(14), 1e-3, policy="coverage", q=0.5)
    assert (half.time_s, half.blocks, half.repair_bits.tolist()) == (0.013877184853295955, 14, [28521.861307850155, 11478.138692149836, 0.0])
    faded = FadedInterference.from_moments(np.array([1.0, 3.0]), np.array([1.0, 9.0]))
    interfered = link.multicast_transfer(4e4, 1e6, np.array([10.0, 30.0]), np.random.default_rng(15), 1e-3, interference=faded)
    assert (interfered.time_s, interfered.blocks) == (0.02357898645299418, 24)
    wide = link.multicast_transfer(2e6, 1e6, np.full(300, 10.0), np.random.default_rng(16), 1e-3, subbands=8, exact_blocks=500)
    assert (wide.time_s, wide.blocks) == (1.2719663269797086, 1272)  # passes of 2^20 // (300·8) = 436 blocks, then 64


def test_a_multicast_past_its_drawn_blocks_extrapolates_exactly_within_its_cap():
    """A link of 1 bit/s/Hz at any SNR (1,000 bits a block of 1 ms and 1 MHz), 2 blocks drawn: 5,000 bits need a rest
    of exactly 3 blocks, which a cap of 5 takes (rate 1 Mbit/s), and 10,000 bits one of 8, which it does not; at 0.5 Hz
    and T_c = 1 s the drawn block carries half a bit and the rest is still extrapolated; a link that carries nothing
    is an outage after its drawn blocks."""
    one = np.array([1.0])
    fits = link.multicast_transfer(5e3, 1e6, one, np.random.default_rng(0), 1e-3, link=np.ones_like, exact_blocks=2, max_blocks=5)
    assert (fits.time_s, fits.blocks, fits.rate_bps, fits.outage) == (pytest.approx(5e-3, rel=1e-12), 5, pytest.approx(1e6, rel=1e-12), False)
    late = link.multicast_transfer(1e4, 1e6, one, np.random.default_rng(0), 1e-3, link=np.ones_like, exact_blocks=2, max_blocks=5)
    assert (late.time_s, late.blocks, late.outage) == (math.inf, 2, True)
    half = link.multicast_transfer(2.0, 0.5, one, np.random.default_rng(0), 1.0, link=np.ones_like, exact_blocks=1)
    assert (half.time_s, half.blocks, half.outage) == (4.0, 4, False)
    dead = link.multicast_transfer(1e3, 1e6, one, np.random.default_rng(0), 1e-3, link=np.zeros_like, exact_blocks=4)
    assert (dead.time_s, dead.blocks, dead.outage) == (math.inf, 4, True)


def test_nr_defaults_to_156_data_res_per_prb_and_carrier_widths_to_the_hz():
    """``load_tables()`` is the 156-RE table (the default docs/network.md gives; read from the signature, as another
    default would build a table); a carrier 1.5 Hz off 20 MHz is not 20 MHz (widths match to 1 Hz)."""
    assert inspect.signature(nr.load_tables).parameters["re_per_prb"].default == 156
    assert nr.prbs_for(20e6 + 0.5, 30) == 51
    with pytest.raises(ValueError) as error:
        nr.prbs_for(20e6 + 1.5, 30)
    assert str(error.value).startswith("an NR carrier at 30 kHz spacing is 5, 10, 15, 20,") and "got 20 MHz" in str(error.value)


def _table_arrays() -> dict[str, np.ndarray]:
    tables = nr.load_tables()
    arrays = {name: np.array(getattr(tables, name)) for name in ("bler", "qm", "rate", "tbs", "cbs", "ncb", "snr_grid", "cbs_grid")}
    return {**arrays, "eesm_beta": np.array(tables.eesm_beta, dtype=float)}


def test_an_eesm_beta_of_0_is_sound_and_a_negative_one_is_not():
    arrays = _table_arrays()
    arrays["eesm_beta"][0] = 0.0
    assert nr._table_problem(arrays) is None
    arrays["eesm_beta"][0] = -1.0
    assert nr._table_problem(arrays) == f"eesm_beta has shape [{arrays['eesm_beta'].size}] or values that are not finite and >= 0"


def test_a_table_file_with_pickled_objects_is_not_opened(tmp_path):
    """An ``.npz`` whose arrays need pickle to load is not a table file, whatever else it holds."""
    path = tmp_path / "tables.npz"
    arrays = {name: np.zeros(1) for name in nr.TABLE_ARRAYS}
    np.savez(path, **{**arrays, "bler": np.array([{}], dtype=object)}, meta=np.array(json.dumps({"sionna": "x", "params": {}})))
    assert nr.read_tables(path, "x", {}) == (None, "not a table file (ValueError: Object arrays cannot be loaded when allow_pickle=False)")


@pytest.mark.parametrize("prbs", [1, 11, 51, 106, 273])
def test_a_tbs_tbler_reads_the_bler_of_the_nearest_code_block_size(prbs):
    """``tbler_table`` reads each MCS's code-block BLER at the grid size nearest its code-block size (argmin of the
    distance here; exact halves left out), raised to its number of code blocks."""
    tables = nr.load_tables()
    low, high, step = tables.cbs_grid
    grid = low + step * np.arange(tables.bler.shape[2])
    tbler = nr.tbler_table(tables, nr.PUSCH, prbs)
    for mcs in np.flatnonzero(tables.qm[nr.PUSCH] > 0).tolist():
        size = tables.cbs[nr.PUSCH, mcs, prbs - 1]
        distance = np.abs(grid - size)
        if np.sort(distance)[1] - distance.min() < 1e-9:
            continue
        bler = tables.bler[nr.PUSCH, mcs, int(np.argmin(distance))].astype(np.float32)
        expected = np.float32(1.0) - np.power(np.float32(1.0) - bler, np.float32(tables.ncb[nr.PUSCH, mcs, prbs - 1]))
        finite = np.isfinite(bler)
        np.testing.assert_array_equal(tbler[mcs][finite], expected[finite])


def test_without_sionna_its_version_is_not_installed(monkeypatch):
    monkeypatch.setattr(nr, "find_sionna", lambda: None)
    assert nr.sionna_version() == "not installed"
