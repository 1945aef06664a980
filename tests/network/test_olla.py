"""Outer-loop link adaptation (``nr.OllaLink``): offsets and MCS equal Sionna SYS's ``OuterLoopLinkAdaptation`` on the
same feedback, the long-run BLER meets the target, and without loops to close it picks today's inner-loop MCS."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.network import link, nr
from wirelessfl.network.profile import NrSettings, OllaSettings, PhysicalChannel

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")

SIONNA_OLLA = r"""
import json, sys, torch
import sionna.sys as ss
case = json.loads(sys.argv[1])
pa = ss.PHYAbstraction(device="cpu")
olla = ss.OuterLoopLinkAdaptation(pa, num_ut=len(case["sinr_db"][0]), bler_target=case["target"], delta_up=case["delta_up"],
                                  offset_min=case["offset_min"], offset_max=case["offset_max"], device="cpu")
re = torch.full((len(case["sinr_db"][0]),), case["re"], dtype=torch.int32)
offsets, mcs = [], []
for feedback, db in zip(case["feedback"], case["sinr_db"]):
    sinr = torch.tensor([10 ** (d / 10) for d in db], dtype=torch.float32)
    chosen = olla(re, harq_feedback=torch.tensor(feedback), sinr_eff=sinr, mcs_table_index=1, mcs_category=0)
    offsets.append(olla.offset.tolist())
    mcs.append(chosen.tolist())
print(json.dumps({"offset": offsets, "mcs": mcs, "delta_down": olla.delta_down}))
"""


def olla_case() -> dict:
    """Three users, 100 slots of feedback (-1: none, 0: NACK, 1: ACK) with runs long enough to reach both clamps,
    and SINRs 0.02 dB off Sionna's 0.1 dB grid once the offset (a multiple of 0.5 dB or of 1.5/9 dB) is taken off."""
    rng = np.random.default_rng(7)
    steps, users = 100, 3
    feedback = rng.choice([-1, 0, 1], size=(steps, users), p=[0.1, 0.3, 0.6])
    feedback[5:25, 0] = 0  # NACKs up to the upper clamp
    feedback[30:95, 1] = 1  # ACKs down to the lower clamp
    sinr_db = np.round(rng.uniform(-6.0, 24.0, size=(steps, users)), 1) + 0.02
    return {"target": 0.1, "delta_up": 1.5, "offset_min": -3.0, "offset_max": 6.0, "re": 51 * 156,
            "feedback": feedback.tolist(), "sinr_db": sinr_db.tolist()}


SIONNA_SAID = Path(__file__).with_name("sionna_olla_reference.json")
"""What ``SIONNA_OLLA`` printed for ``olla_case()`` (sionna-no-rt 2.x): the default run compares with this record;
``-m slow`` checks the record against Sionna itself (about 30 s of CPU to import it)."""


def _sionna_now() -> dict:
    done = subprocess.run([sys.executable, "-c", SIONNA_OLLA, json.dumps(olla_case())], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _uplink(case: dict) -> nr.OllaLink:
    ul = nr.make_link("ul", 20e6, scs_khz=30, bler_target=case["target"])
    assert ul.prbs * 156 == case["re"]
    return nr.olla_link(ul, case["delta_up"], offset_min_db=case["offset_min"], offset_max_db=case["offset_max"])


@pytest.mark.slow
def test_the_record_is_sionnas_own_calls():
    assert _sionna_now() == json.loads(SIONNA_SAID.read_text())


def test_offsets_and_mcs_equal_sionnas_on_the_same_feedback():
    case, said = olla_case(), json.loads(SIONNA_SAID.read_text())
    olla = _uplink(case)
    assert olla.delta_down_db == said["delta_down"]
    offset = np.zeros(3, dtype=np.float32)
    offsets, chosen = [], []
    for feedback, db in zip(case["feedback"], case["sinr_db"]):
        feedback = np.array(feedback)
        offset = olla.step(offset, feedback == 0, feedback == 1)
        offsets.append(offset.tolist())
        chosen.append(olla.estimated_mcs(np.array(db, dtype=np.float32), offset).tolist())
    theirs = np.array(said["offset"])
    assert theirs.max() == 6.0 and theirs.min() == -3.0  # both clamps are reached
    np.testing.assert_array_equal(np.array(offsets, dtype=np.float32), theirs.astype(np.float32))
    np.testing.assert_array_equal(np.array(chosen), np.array(said["mcs"]))


@pytest.mark.parametrize("direction", ["ul", "dl"])
def test_with_no_delay_and_no_offset_it_picks_the_inner_loops_mcs(direction):
    """At offset 0 and a report of the block's own SINR, every grid SINR gets today's MCS (where some MCS meets the
    target; below, Sionna's lowest), and that MCS's goodput is today's: the upload's loop and a unicast stream's."""
    ul = nr.make_link(direction, 20e6, scs_khz=30)
    olla = nr.olla_link(ul)
    grid = ul.tables.snr_db.astype(np.float32)
    chosen = olla.estimated_mcs(grid, np.zeros(grid.size, dtype=np.float32))
    served = ul.mcs >= 0
    assert served.any() and not served.all()
    np.testing.assert_array_equal(chosen[served], ul.mcs[served])
    assert (chosen[~served] == olla.lowest).all() and olla.lowest == 3
    index = np.arange(grid.size)[served]
    np.testing.assert_array_equal(olla.goodput_by_mcs[ul.mcs[served], index], ul.goodput_bits[served])
    # A first block of a transfer over flat blocks: the inner loop's rate, block by block.
    snr = 10 ** (np.array([2.0, 9.0, 17.0, 30.0]) / 10)
    run = olla.start(snr)
    se = run.blocks(np.arange(4), snr[:, None], np.random.default_rng(0))
    np.testing.assert_array_equal(se[:, 0], ul(snr))


def _run(olla: nr.OllaLink, mean_db: float, users: int, blocks: int, seed: int) -> tuple[nr.OllaRun, np.ndarray]:
    """``blocks`` Rayleigh blocks of ``users`` users at mean SINR ``mean_db``, their NACKs per block."""
    rng = np.random.default_rng(seed)
    snr = np.full(users, 10 ** (mean_db / 10))
    run = olla.start(snr)
    nacks = []
    for _ in range(blocks // 50):
        run.blocks(np.arange(users), snr[:, None] * rng.standard_exponential((users, 50)), rng)
        nacks.append(run.last_nacks)
    return run, np.concatenate(nacks, axis=1)


@pytest.mark.parametrize(("target", "delay"), [(0.1, 1), (0.3, 0)])
def test_the_long_run_bler_of_a_fading_user_meets_the_target(target, delay):
    """Stationary Rayleigh blocks, one feedback a block: once the loop has settled (the last 400 of 600 blocks), the
    NACK share is the target within three standard errors over 300 independent users. The inner loop, which meets
    the target in every block, stays well below it."""
    ul = nr.make_link("ul", 20e6, scs_khz=30, bler_target=target)
    olla = nr.olla_link(ul, 1.0, delay)
    users, blocks = 300, 600
    run, nacks = _run(olla, 12.0, users, blocks, seed=1)
    share = nacks[:, 200:].mean(axis=1)
    error = share.std(ddof=1) / math.sqrt(users)
    assert 0 < error < 0.01 and abs(share.mean() - target) < 3 * error, (share.mean(), error)
    snr = 10 ** 1.2 * np.random.default_rng(2).standard_exponential(100_000)
    index = nr.snr_index(ul.tables, snr)
    inner = ul.first_tbler[index][ul.mcs[index] >= 0].mean()
    assert inner < target - 10 * error
    # The loop's identity: NACKs·up - ACKs·down is how far the offset moved (no clamp was reached).
    assert np.all(np.abs(run.offset) < 20)
    moved = olla.delta_up_db * nacks.sum(axis=1) - olla.delta_down_db * (blocks - nacks.sum(axis=1))
    np.testing.assert_allclose(moved, run.offset, atol=1e-3)


@pytest.mark.parametrize(
    ("olla", "error"),
    [
        ({"delta_up_db": 0}, r"^physical.nr.olla.delta_up_db must be in \(0, 10\] dB \(Sionna's default is 1\), got 0$"),
        ({"cqi_delay_blocks": -1}, r"^physical.nr.olla.cqi_delay_blocks must be an integer in \[0, 1000\] \(fading blocks\), got -1$"),
        ({"cqi_delay_blocks": 1.5}, r"^physical.nr.olla.cqi_delay_blocks must be an integer in \[0, 1000\] \(fading blocks\), got 1.5$"),
        ({"offset_min_db": 5, "offset_max_db": 5}, r"^physical.nr.olla.offset_min_db must be below offset_max_db, got 5 and 5$"),
        ({"offset_init_db": 30}, r"^physical.nr.olla.offset_init_db must be in \[offset_min_db, offset_max_db\], got 30$"),
        ({"offset_max_db": "x"}, r"^physical.nr.olla.offset_max_db must be a number, got 'x'$"),
        ({"bler_target": 0.1}, r"^unknown physical.nr.olla keys \['bler_target'\]; allowed keys: delta_up_db, cqi_delay_blocks, "),
        (3, r"^physical.nr.olla must be a mapping of outer-loop link adaptation settings \(or null\), got 3$"),
    ],
)
def test_bad_settings_get_one_line(olla, error):
    with pytest.raises(ValueError, match=error):
        NrSettings.from_dict({"olla": olla})


@pytest.mark.parametrize("where", [{}, {"coherence_s": 0.01, "fading": "none"}])
def test_the_loop_needs_fading_blocks(where):
    with pytest.raises(ValueError, match=r"^physical.nr.olla needs block fading: set coherence_s or ue_speed_mps and fading other than 'none'$"):
        PhysicalChannel(link="nr", bandwidth_hz=20e6, nr={"olla": {}}, **where)


def test_the_loop_over_subbands_needs_eesm():
    with pytest.raises(ValueError, match=r"^physical.nr.olla with subbands > 1 needs subband_mapping 'eesm' \(one MCS per transport block, "
                                         r"whose effective SINR the loop reports\), got 'mean'$"):
        PhysicalChannel(link="nr", bandwidth_hz=20e6, nr={"olla": {}}, coherence_s=0.01, subbands=4)
    PhysicalChannel(link="nr", bandwidth_hz=20e6, nr={"olla": {}}, coherence_s=0.01, subbands=4, subband_mapping="eesm")


def test_the_settings_round_trip_and_default_to_none():
    assert NrSettings().olla is None and NrSettings().to_dict()["olla"] is None
    settings = NrSettings.from_dict({"olla": {"cqi_delay_blocks": 2, "delta_up_db": 0.5}})
    assert settings.olla == OllaSettings(delta_up_db=0.5, cqi_delay_blocks=2)
    assert NrSettings.from_dict(settings.to_dict()) == settings


def test_a_transfer_counts_its_blocks_mcs_and_nacks():
    """Through ``link.transfer_time``: 20 feedbacks a block, uploads of about 150 blocks. The NACKs counted are
    close to the target's share of the feedbacks of the blocks used, the MCS is the mode of those blocks', and a
    user with nothing to send uses no MCS."""
    ul = nr.make_link("ul", 20e6, scs_khz=30)
    olla = nr.olla_link(ul, 1.0, 1, feedbacks_per_block=20)
    users = 60
    snr = np.full(users, 10 ** 1.2)
    bits = np.full(users, 150 * 0.01 * 20e6 * float(np.mean(ul(snr[0] * np.random.default_rng(5).standard_exponential(4096)))))
    bits[0] = 0.0
    sent = link.transfer_time(bits, 20e6, snr, np.random.default_rng(6), 0.01, "rayleigh", link=olla, max_blocks=10_000)
    assert sent.mcs[0] == -1 and sent.retransmissions[0] == 0
    share = sent.retransmissions[1:].sum() / (20.0 * sent.blocks[1:].sum())
    assert 0.08 < share < 0.13, share
    assert set(sent.mcs[1:].tolist()) <= set(range(olla.lowest, 29)) and sent.mcs[1:].min() >= olla.lowest
    assert np.isfinite(sent.time_s).all() and 100 < np.median(sent.blocks[1:]) < 600
    illa = link.transfer_time(bits, 20e6, snr, np.random.default_rng(6), 0.01, "rayleigh", link=ul, max_blocks=10_000)
    assert illa.mcs is None and illa.retransmissions is None


def test_a_round_records_what_the_loops_drew_and_leaves_the_downlink_alone():
    """A block-fading NR round with ``olla``: the per-client MCS and retransmissions are the uploads' own loops' (not
    the fading law's mode), the downlink streams (drawn before the uploads) keep their durations, and only the uploads
    change."""
    from wirelessfl.network import NetworkModel, SystemProfile
    from wirelessfl.seam import CommPlan

    def round_with(olla):
        channel = PhysicalChannel(link="nr", bandwidth_hz=20e6, cell_radius_m=600, coherence_s=0.02, nr={"olla": olla})
        model = NetworkModel(SystemProfile(name="cell", rho=1.0, t_min=0.5, physical=channel), 30, np.random.default_rng(3))
        plan = CommPlan.broadcast(range(30), model_params=20_000)
        return model.draw_round(plan, np.random.default_rng(4))

    inner, outer = round_with(None), round_with({"cqi_delay_blocks": 1})
    np.testing.assert_array_equal(inner.stream_durations, outer.stream_durations)
    assert not np.array_equal(inner.upload, outer.upload)
    assert outer.retransmissions.sum() > 0 and (outer.mcs >= 3).all()
    assert not np.array_equal(inner.mcs, outer.mcs)


def test_the_loops_defaults_are_sionnas_and_a_block_shorter_than_a_slot_still_gets_one_feedback():
    """Sionna's ``OuterLoopLinkAdaptation`` defaults (delta_up 1 dB, offsets in [-20, 20] dB, starting at 0), a
    report that is not stale, flat blocks; ``physical`` asks for round(block / slot) feedbacks, 0 for a block under
    half a slot, and gets one."""
    olla = nr.olla_link(nr.make_link("ul", 20e6, scs_khz=30))
    settings = (olla.delta_up_db, olla.cqi_delay_blocks, olla.offset_init_db, olla.offset_min_db, olla.offset_max_db)
    assert settings == (1.0, 0, 0.0, -20.0, 20.0) and olla.feedbacks_per_block == 1 and olla.eesm is None
    assert nr.olla_link(olla.link, feedbacks_per_block=0).feedbacks_per_block == 1


def test_a_report_two_blocks_stale_sends_the_mean_for_two_blocks_then_each_blocks_own():
    """Offsets held at 0: the first two blocks' MCS is the one for the mean SINR (20 dB), then each block's for the
    block two before it (5 dB: a lower MCS); the last two blocks' reports wait for the next call."""
    olla = nr.olla_link(nr.make_link("ul", 20e6, scs_khz=30), 1.0, 2, offset_min_db=0.0, offset_max_db=0.0)
    run = olla.start(np.full(3, 100.0))
    sinr = np.full((3, 4), 10 ** 0.5)
    run.blocks(np.arange(3), sinr, np.random.default_rng(0))
    high, low = (int(olla.estimated_mcs(np.float32(db), 0.0)) for db in (20.0, 5.0))
    assert high > low >= olla.lowest
    assert run.last_mcs.tolist() == [[high, high, low, low]] * 3
    np.testing.assert_array_equal(run.pending, np.full((3, 2), np.float32(10.0) * np.log10(np.float32(10 ** 0.5))))


def test_a_run_counts_only_the_blocks_used_and_extends_at_their_nack_rate():
    """``count``: a block with share 0 (after the transfer ended) adds no MCS; NACKs in proportion to the share.
    ``extend``: more blocks at the NACK rate per block counted (one block is enough), none for a user with none counted,
    and no 0/0 on the way. ``moments``: over the blocks drawn, one included."""
    olla = nr.olla_link(nr.make_link("ul", 20e6, scs_khz=30), feedbacks_per_block=20)
    run = olla.start(np.full(3, 10.0))
    run.last_mcs = np.array([[5, 9, 9], [4, 4, 4], [7, 7, 7]])
    run.last_nacks = np.array([[1, 2, 3], [2, 5, 5], [4, 4, 4]])
    run.count(np.arange(3), np.array([[1.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    mcs, _ = run.use()
    assert mcs.tolist() == [5, 4, -1]  # user 0: MCS 5 and 9 once each (the lowest of a tie), not 9 twice
    assert run.nacks.tolist() == [2.0, 1.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.extend(np.arange(3), np.array([4, 10, 10]))
    assert run.nacks.tolist() == [2.0 + 2.0 / 2 * 4, 1.0 + 1.0 * 10, 0.0]
    users = np.arange(2)
    se = run.blocks(users, np.array([[10.0], [100.0]]), np.random.default_rng(1))[:, 0]
    assert se.min() > 0
    mean, var, empty = run.moments(np.arange(3), 2.0)
    assert mean.tolist() == [2.0 * se[0], 2.0 * se[1], 0.0] and var.tolist() == [0.0, 0.0, 0.0] and empty.tolist() == [0.0] * 3
