"""Physical channel: user drop, path loss (log-distance or TR 38.901), fading, link rates, transfer times.

Beyond the paper (user-centric-fl.txt normalises time by T_dl); pure numpy so each
piece can be checked against a hand computation.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from . import link, nr, pathloss
from ..seam import StreamDelivery
from .interference import FadedInterference
from .profile import NrSettings, PhysicalChannel


def drop_users(channel: PhysicalChannel, num_clients: int, rng: np.random.Generator) -> np.ndarray:
    """Distances (m) of users dropped uniformly over the annulus min_distance..cell_radius."""
    inner, outer = channel.min_distance_m**2, channel.cell_radius_m**2
    return np.sqrt(rng.uniform(inner, outer, size=num_clients))


def path_loss_db(channel: PhysicalChannel, distance_m: np.ndarray) -> np.ndarray:
    """Log-distance path loss, reference distance 1 m."""
    return channel.reference_loss_db + 10.0 * channel.path_loss_exponent * np.log10(distance_m)


def static_loss_db(channel: PhysicalChannel, distance_m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each user's large-scale loss for the whole run: log-distance (no draw), or a TR 38.901 scenario with
    the user's LOS state and shadowing drawn from ``rng`` once (``pathloss.draw_large_scale``)."""
    return static_large_scale(channel, distance_m, rng)[0]


def static_large_scale(
    channel: PhysicalChannel, distance_m: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray | None]:
    """``static_loss_db`` and each user's LOS state (None under ``log_distance``, which has no LOS state)."""
    if channel.path_loss_model == "log_distance":
        return path_loss_db(channel, distance_m), None
    drawn = pathloss.draw_large_scale(channel.path_loss_model, distance_m, channel.carrier_ghz, rng, shadowing=channel.shadowing)
    return drawn.loss_db, drawn.los


def k_factor(channel: PhysicalChannel, los: np.ndarray | None = None) -> float | np.ndarray | None:
    """The linear Rician K of the channel (None unless ``fading`` is rician). With ``los`` (each user's TR 38.901
    LOS state) one K per user: the profile's for a LOS user, 0 (Rayleigh in distribution: no specular path)
    for a NLOS one. Without it (``log_distance`` path loss draws no LOS state) every user gets the profile's K."""
    if channel.fading != "rician":
        return None
    k = 10.0 ** (channel.k_factor_db / 10.0)
    return k if los is None else np.where(np.asarray(los, dtype=bool), k, 0.0)


def draw_fading(channel: PhysicalChannel, num_clients: int, rng: np.random.Generator, los: np.ndarray | None = None) -> np.ndarray:
    """Power gains |h|^2 for one round: Exp(1) under Rayleigh fading, Rician of mean 1 (of each user's K,
    ``k_factor(channel, los)``), 1 without fading.

    Under fading the draw is always made, even if unused, so the generator
    advances the same way whatever the plan (and whatever the users' LOS states).
    """
    if channel.fading == "rayleigh":
        return rng.standard_exponential(num_clients)
    if channel.fading == "rician":
        return link.draw_fading(rng, num_clients, "rician", k_factor(channel, los))
    return np.ones(num_clients)


def mean_snr(tx_power_dbm: float, loss_db: np.ndarray, bandwidth_hz: float, noise_density_dbm_hz: float) -> np.ndarray:
    """Linear SNR without small-scale fading: P·10^(-L/10) / (N0·B)."""
    received_w = dbm_to_watt(tx_power_dbm) * 10.0 ** (-np.asarray(loss_db, dtype=float) / 10.0)
    return received_w / (dbm_to_watt(noise_density_dbm_hz) * bandwidth_hz)


def link_snr(channel: PhysicalChannel, direction: str, loss_db: np.ndarray) -> np.ndarray:
    """Each user's mean SNR on a direction through the profile's link budget (antenna gains, other losses,
    the receiver's noise figure): ``mean_snr`` of the radiated power over the receiver's noise density."""
    bandwidth = channel.bandwidth_hz if direction == "dl" else channel.uplink_bandwidth_hz
    return mean_snr(channel.radiated_dbm(direction), loss_db, bandwidth, channel.noise_dbm_hz(direction))


def link_model(channel: PhysicalChannel, direction: str):
    """The link abstraction of a direction: a ``link.LINKS`` name (TR 36.942 has its own uplink
    defaults) or, for ``nr``, the direction's ``nr.NrLink`` (PDSCH down, PUSCH up)."""
    if channel.link == "truncated_shannon":
        return "truncated_shannon" if direction == "dl" else "truncated_shannon_ul"
    if channel.link == "nr":
        bandwidth = channel.bandwidth_hz if direction == "dl" else channel.uplink_bandwidth_hz
        return nr_link(channel.nr, direction, bandwidth)
    return "shannon"


@lru_cache(maxsize=32)
def nr_link(settings: NrSettings, direction: str, bandwidth_hz: float) -> nr.NrLink:
    """The NR link of one direction, built once per settings (its tables come from the on-disk cache)."""
    return nr.make_link(
        direction, bandwidth_hz, scs_khz=settings.subcarrier_spacing_khz, mcs_table=settings.mcs_table,
        bler_target=settings.bler_target, harq_retransmissions=settings.harq_retransmissions,
        harq_rtt_s=settings.harq_rtt_ms / 1e3, re_per_prb=settings.data_re_per_prb,
    )


def block_link(channel: PhysicalChannel, direction: str):
    """The link abstraction a fading block of a direction is sent with: ``link_model``, or with ``subband_mapping:
    eesm`` the direction's NR link mapping each block's subbands to one effective SINR (``nr.EesmLink``)."""
    if channel.link == "nr" and channel.nr.olla is not None and direction == "ul":
        return olla_link(channel, "ul")
    if channel.subband_mapping != "eesm":
        return link_model(channel, direction)
    bandwidth = channel.bandwidth_hz if direction == "dl" else channel.uplink_bandwidth_hz
    return _eesm_link(channel.nr, direction, bandwidth)


def olla_link(channel: PhysicalChannel, direction: str) -> nr.OllaLink:
    """A direction's NR link under ``physical.nr.olla`` (the uplink; the downlink of a stream with one receiver):
    one HARQ feedback per slot of the direction's TDD share of a fading block, and EESM over subbands with
    ``subband_mapping: eesm``."""
    bandwidth = channel.bandwidth_hz if direction == "dl" else channel.uplink_bandwidth_hz
    eesm = channel.subbands > 1 and channel.subband_mapping == "eesm"
    return _olla_link(channel.nr, direction, bandwidth, channel.block_s * channel.time_share(direction), eesm)


@lru_cache(maxsize=32)
def _olla_link(settings: NrSettings, direction: str, bandwidth_hz: float, s_per_block: float, eesm: bool) -> nr.OllaLink:
    """One HARQ feedback per slot of the direction in a fading block (at least one)."""
    base = nr_link(settings, direction, bandwidth_hz)
    olla = settings.olla
    return nr.olla_link(
        base, olla.delta_up_db, olla.cqi_delay_blocks, olla.offset_init_db, olla.offset_min_db, olla.offset_max_db,
        feedbacks_per_block=round(s_per_block / base.slot_s), eesm=eesm,
    )


@lru_cache(maxsize=32)
def _eesm_link(settings: NrSettings, direction: str, bandwidth_hz: float) -> nr.EesmLink:
    return nr.eesm_link(nr_link(settings, direction, bandwidth_hz))


def uplink_held_use(channel: PhysicalChannel, snr: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``nr``, one fading draw held for the round: each upload's MCS (the one at the SINR ``snr`` it is sent at,
    -1 below the lowest MCS) and its HARQ retransmissions, ``retransmissions_per_bit`` times its ``bits``, rounded."""
    ul = link_model(channel, "ul")
    index = nr.snr_index(ul.tables, snr)
    return ul.mcs[index].astype(np.int64), _rounded(bits * retransmissions_per_bit(ul, index))


def retransmissions_per_bit(ul: nr.NrLink, index: np.ndarray) -> np.ndarray:
    """HARQ retransmissions per delivered bit at SINR grid ``index``: a TB takes E[T] slots on average, E[T] - 1 of
    them retransmissions, and the slots carry G = TBS·(1 - p_lost)/E[T] bits each, so (E[T] - 1) / (E[T]·G); 0 where
    no MCS is usable (nothing is sent)."""
    goodput = ul.goodput_bits[index]
    sent = goodput > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sent, (ul.transmissions[index] - 1.0) / np.where(sent, ul.transmissions[index] * goodput, 1.0), 0.0)


def uplink_block_use(channel: PhysicalChannel, mean_snr: np.ndarray, los: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``nr`` over fading blocks: per user, the MCS most of its upload's blocks use (the mode of the MCS over its
    fading law at its mean SINR; -1 when most blocks are outage blocks) and its expected HARQ retransmissions per bit
    (renewal-reward: E[retransmitted slots per block] / E[bits per block] over the law, the same with subbands as
    each subband has the law of a flat block). No draw: the law is ``link._fading_points``, whose mass is summed per
    SINR grid point (the points of gain g with ``nr.snr_index(γ̄·g)`` on it), so the cost is users × grid points."""
    ul = link_model(channel, "ul")
    snr_db = 10.0 * np.log10(np.maximum(np.asarray(mean_snr, dtype=float), 1e-300))
    k = k_factor(channel, los)
    low, _, step = ul.tables.snr_grid
    size = ul.tables.snr_db.size
    levels = np.arange(-1, int(ul.mcs.max()) + 1)
    by_mcs = (ul.mcs[:, None] == levels[None, :]).astype(float)  # [grid, levels]
    sent = ul.goodput_bits > 0
    retransmitted = np.where(sent, 1.0 - 1.0 / ul.transmissions, 0.0)  # retransmitted share of a block's slots
    modes, per_bit = np.empty(snr_db.size, dtype=np.int64), np.zeros(snr_db.size)
    for value in (np.unique(k).tolist() if isinstance(k, np.ndarray) else [k]):
        users = np.flatnonzero(k == value) if isinstance(k, np.ndarray) else np.arange(snr_db.size)
        gain, weight = link._fading_points(channel.fading, value)
        order = np.argsort(gain)
        gain_db = 10.0 * np.log10(np.maximum(gain[order], 1e-300))
        below = np.concatenate([[0.0], np.cumsum(weight[order])])  # mass of the points under each cut
        edges = low + (np.arange(size - 1) + 0.5) * step  # grid point j holds SINRs (dB) in [edge j-1, edge j)
        for start in range(0, users.size, 4096):
            part = users[start : start + 4096]
            cuts = below[np.searchsorted(gain_db, edges[None, :] - snr_db[part, None])]
            mass = np.diff(np.concatenate([np.zeros((part.size, 1)), cuts, np.full((part.size, 1), below[-1])], axis=1), axis=1)
            modes[part] = levels[np.argmax(mass @ by_mcs, axis=1)]
            goodput = mass @ ul.goodput_bits
            per_bit[part] = np.where(goodput > 0, (mass @ retransmitted) / np.where(goodput > 0, goodput, 1.0), 0.0)
    return modes, per_bit


def _rounded(values: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(values, dtype=float)).astype(np.int64)


def harq_tail_s(channel: PhysicalChannel, direction: str, snr: np.ndarray) -> np.ndarray:
    """Seconds a transfer waits at its end for its last TB's HARQ retransmissions (``nr`` only, else 0)."""
    if channel.link != "nr":
        return np.zeros(np.shape(snr))
    return link_model(channel, direction).tail_s(snr)


def dbm_to_watt(dbm: float | np.ndarray) -> float | np.ndarray:
    return 10.0 ** ((np.asarray(dbm, dtype=float) - 30.0) / 10.0)


def shannon_rate(
    tx_power_dbm: float, loss_db: np.ndarray, fading_gain: np.ndarray, bandwidth_hz: float, noise_density_dbm_hz: float
) -> np.ndarray:
    """Rate in bit/s: B·log2(1 + P·g·10^(-L/10) / (N0·B))."""
    received_w = dbm_to_watt(tx_power_dbm) * fading_gain * 10.0 ** (-np.asarray(loss_db, dtype=float) / 10.0)
    noise_w = dbm_to_watt(noise_density_dbm_hz) * bandwidth_hz
    return bandwidth_hz * np.log2(1.0 + received_w / noise_w)


def _rates(channel: PhysicalChannel, direction: str, power_dbm: float, bandwidth_hz: float, loss_db, fading_gain) -> np.ndarray:
    """Rates while the direction has the air, times its TDD share of the carrier's time (1 without a pattern)."""
    if channel.link == "shannon":
        return shannon_rate(power_dbm, loss_db, fading_gain, bandwidth_hz, channel.noise_dbm_hz(direction)) * channel.time_share(direction)
    snr = mean_snr(power_dbm, loss_db, bandwidth_hz, channel.noise_dbm_hz(direction)) * fading_gain
    return bandwidth_hz * link.spectral_efficiency(snr, link_model(channel, direction)) * channel.time_share(direction)


FADING_SAMPLES = 4096
"""Fading gains averaged over in ``ergodic_downlink_rates``: a fixed draw, so the mean is the same every call."""


def ergodic_downlink_rates(channel: PhysicalChannel, loss_db: np.ndarray, los: np.ndarray | None = None) -> np.ndarray:
    """Each user's downlink rate averaged over the channel's fading law (bit/s): the rate a long transfer sees.

    The gains are a fixed draw of ``FADING_SAMPLES`` (seeded apart from the run's generators), so the
    answer depends only on the channel and the user's static loss.
    """
    return ergodic_rates(channel, loss_db, "dl", los)


def ergodic_rates(channel: PhysicalChannel, loss_db: np.ndarray, direction: str, los: np.ndarray | None = None) -> np.ndarray:
    """:func:`ergodic_downlink_rates` of the downlink (``dl``) or the uplink (``ul``); with ``los``, each user
    over its own fading law (``k_factor``)."""
    rates_of = downlink_rates if direction == "dl" else uplink_rates
    loss = np.asarray(loss_db, dtype=float)
    k = k_factor(channel, los)
    if isinstance(k, np.ndarray):  # LOS and NLOS users: each class over its own law
        rates = np.empty(loss.size)
        for value in np.unique(k).tolist():
            users = np.flatnonzero(k == value)
            rates[users] = _ergodic(channel, loss.ravel()[users], rates_of, value)
        return rates
    return _ergodic(channel, loss, rates_of, k)


def _ergodic(channel: PhysicalChannel, loss: np.ndarray, rates_of, k: float | None) -> np.ndarray:
    gains = link.draw_fading(np.random.default_rng(0), FADING_SAMPLES, channel.fading, k)
    rates = np.empty(loss.size)
    for start in range(0, loss.size, 256):  # 256 users x 4,096 gains at a time: 8 MB per array
        part = loss[start : start + 256, None]
        rates[start : start + 256] = rates_of(channel, part, gains[None, :]).mean(axis=1)
    return rates


OUTAGE_S = 1e4
"""A transfer that takes longer than this is in outage: the ``MAX_BLOCKS`` blocks of 10 ms after which block
fading gives up on one; a round of hours is no longer a wireless round."""


def in_outage(
    channel: PhysicalChannel, loss_db: np.ndarray, bits: float, ul_loss_db: np.ndarray | None = None, los: np.ndarray | None = None
) -> np.ndarray:
    """Per user: whether receiving or sending ``bits`` (one model) at its ergodic rates takes longer than
    ``OUTAGE_S`` (a rate of 0 included). What the link budget alone says, before any round is drawn.
    ``ul_loss_db``: the uplink's own loss where it differs (interference, power control); ``los``: each user's
    LOS state (``k_factor``)."""
    ul_loss = loss_db if ul_loss_db is None else ul_loss_db
    with np.errstate(divide="ignore"):
        seconds = np.maximum(bits / ergodic_rates(channel, loss_db, "dl", los), bits / ergodic_rates(channel, ul_loss, "ul", los))
    return ~(seconds <= OUTAGE_S)


def ergodic_uplink_rates(channel: PhysicalChannel, loss_db: np.ndarray, los: np.ndarray | None = None) -> np.ndarray:
    """Each user's uplink rate averaged over the channel's fading law (bit/s), as ``ergodic_downlink_rates``:
    the long-run rate a proportional-fair scheduler divides the instantaneous rate by."""
    return ergodic_rates(channel, loss_db, "ul", los)


def downlink_rates(channel: PhysicalChannel, loss_db: np.ndarray, fading_gain: np.ndarray) -> np.ndarray:
    return _rates(channel, "dl", channel.radiated_dbm("dl"), channel.bandwidth_hz, loss_db, fading_gain)


def uplink_rates(channel: PhysicalChannel, loss_db: np.ndarray, fading_gain: np.ndarray) -> np.ndarray:
    """Uplink rates; 0 (an upload that is not sent and never arrives) where the SINR is below
    ``ul_sinr_threshold_db``, so the round's timing, the scheduler's channel state and the ergodic rates agree."""
    rates = _rates(channel, "ul", channel.radiated_dbm("ul"), channel.uplink_bandwidth_hz, loss_db, fading_gain)
    if channel.ul_sinr_threshold_db is None:
        return rates
    sinr = link_snr(channel, "ul", loss_db) * fading_gain
    return np.where(sinr < 10.0 ** (channel.ul_sinr_threshold_db / 10.0), 0.0, rates)


def add_held_harq_tails(
    channel: PhysicalChannel, loss_db: np.ndarray, ul_loss_db: np.ndarray, dl_gain: np.ndarray, ul_gain: np.ndarray,
    stream_members: tuple[np.ndarray, ...], streams: np.ndarray, uploads: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Durations with one draw held per round, plus the HARQ round trips of each transfer's last TB
    (at the weakest receiver's SINR for a stream; uploads of 0 bits stay 0)."""
    dl_snr = link_snr(channel, "dl", loss_db) * dl_gain
    ul_snr = link_snr(channel, "ul", ul_loss_db) * ul_gain
    weakest = np.array([dl_snr[m].min() for m in stream_members]) if stream_members else np.zeros(0)
    streams = np.asarray(streams, dtype=float) + harq_tail_s(channel, "dl", weakest)
    uploads = np.where(np.asarray(uploads) > 0, uploads + harq_tail_s(channel, "ul", ul_snr), uploads)
    return streams, uploads


MAX_BLOCKS = 1_000_000
"""Blocks a transfer may take before it is an outage (10^4 s of 10 ms blocks)."""


def _stream_delivery(
    channel: PhysicalChannel, label: str, bits: float, snr: np.ndarray, rng: np.random.Generator, k=None,
    interference: FadedInterference | None = None,
) -> StreamDelivery:
    """A multicast over fading blocks, plus the unicast repairs of the receivers its rate left behind
    (``coverage``), sent one after another on the same carrier after it: the stream counts as received
    when the last repair lands. ``k``: the receivers' K-factors (``k_factor``); ``interference``: theirs when it fades
    (``snr`` is then the signal over the noise alone; the HARQ tail is taken at the mean SINR). With
    ``physical.nr.olla`` a stream with one receiver is a unicast: ``_unicast_delivery``."""
    block, fading, dl = channel.block_s, channel.fading, block_link(channel, "dl")
    bandwidth = channel.bandwidth_hz * channel.time_share("dl")  # a fading block's bits come in its downlink slots
    if channel.link == "nr" and channel.nr.olla is not None and snr.size == 1:
        return _unicast_delivery(channel, label, bits, snr, rng, k, interference)
    sent = link.multicast_transfer(bits, bandwidth, snr, rng, block, fading, k, dl, channel.multicast, channel.coverage_q, MAX_BLOCKS,
                                   subbands=channel.subbands, interference=interference)
    mean_sinr = snr if interference is None else snr / (1.0 + interference.mean)
    served = link.coverage_rate(mean_sinr, channel.coverage_q) if channel.multicast == "coverage" else mean_sinr.min()
    tail = float(harq_tail_s(channel, "dl", np.array([served]))[0]) if bits > 0 else 0.0
    repair = np.asarray(sent.repair_bits, dtype=float)
    seconds, owed = float(sent.time_s) + tail, repair > 0
    if owed.any():
        repairs = link.transfer_time(repair[owed], bandwidth, snr[owed], rng, block, fading, link._users_k(k, np.flatnonzero(owed)), dl,
                                     MAX_BLOCKS, subbands=channel.subbands, interference=link._users_interference(interference, owed))
        seconds = float(sent.time_s + tail + np.sum(repairs.time_s + harq_tail_s(channel, "dl", mean_sinr[owed])))
    return StreamDelivery(label, int(snr.size), float(bits), seconds, float(sent.rate_bps), float(repair.sum()), int(owed.sum()))


def _unicast_delivery(
    channel: PhysicalChannel, label: str, bits: float, snr: np.ndarray, rng: np.random.Generator, k, interference: FadedInterference | None,
) -> StreamDelivery:
    """A stream to one receiver under ``physical.nr.olla``: sent as an upload is (``link.transfer_time``), through the
    receiver's own outer loop on the downlink (``olla_link``), then the HARQ tail at its mean SINR."""
    bandwidth = channel.bandwidth_hz * channel.time_share("dl")
    sent = link.transfer_time(np.array([bits]), bandwidth, snr, rng, channel.block_s, channel.fading, k, olla_link(channel, "dl"), MAX_BLOCKS,
                              subbands=channel.subbands, interference=interference)
    mean_sinr = snr if interference is None else snr / (1.0 + interference.mean)
    seconds = float(sent.time_s[0])
    tail = float(harq_tail_s(channel, "dl", mean_sinr)[0]) if bits > 0 else 0.0
    rate = bits / seconds if 0 < seconds < math.inf else 0.0
    return StreamDelivery(label, 1, float(bits), seconds + tail, rate)


def block_durations(
    channel: PhysicalChannel, loss_db: np.ndarray, ul_loss_db: np.ndarray, stream_members: tuple[np.ndarray, ...], stream_bits: np.ndarray,
    upload_bits: np.ndarray, clients: np.ndarray, rng: np.random.Generator, labels: tuple[str, ...] = (),
    los: np.ndarray | None = None, interference: tuple[FadedInterference, FadedInterference] | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[StreamDelivery, ...], tuple[np.ndarray, np.ndarray] | None]:
    """Stream and upload durations (s) over block fading of length ``channel.block_s``, each stream's
    delivery (rate, repairs), and with ``physical.nr.olla`` each upload's (modal MCS, HARQ retransmissions) as
    its loop drew them (None without).

    Draw order: each stream's receivers' blocks (then its repairs' blocks) in
    stream order, then the uploads' blocks (``link.multicast_transfer``,
    ``link.transfer_time``; with ``physical.nr.olla`` a one-receiver stream's are ``link.transfer_time``'s).
    Downlink and uplink draws are independent (no TDD reciprocity across blocks).
    A transfer still unfinished after ``MAX_BLOCKS`` blocks is in outage and
    lasts ``inf``: it misses any deadline. ``los``: every user's LOS state (``k_factor``), None under log-distance.
    ``interference``: every user's (downlink, uplink) faded interference (``topology.interference: faded``); the
    losses are then the signal's alone, without the interference's rise.
    """
    block, fading = channel.block_s, channel.fading
    k = k_factor(channel, None if los is None else np.asarray(los)[clients])
    dl_snr = link_snr(channel, "dl", loss_db)[clients]
    ul_snr = link_snr(channel, "ul", ul_loss_db)[clients]
    labels = labels or tuple(str(s) for s in range(len(stream_members)))
    dl_faded = ul_faded = None
    if interference is not None:
        dl_faded, ul_faded = (side.subset(clients) for side in interference)
    deliveries = tuple(
        _stream_delivery(channel, label, float(bits), dl_snr[members], rng, link._users_k(k, members),
                         link._users_interference(dl_faded, members))
        for label, bits, members in zip(labels, stream_bits.tolist(), stream_members)
    )
    streams = np.array([d.seconds for d in deliveries])
    sent = link.transfer_time(
        upload_bits, channel.uplink_bandwidth_hz * channel.time_share("ul"), ul_snr, rng, block, fading, k, block_link(channel, "ul"), MAX_BLOCKS,
        subbands=channel.subbands, interference=ul_faded,
    )
    ul_sinr = ul_snr if ul_faded is None else ul_snr / (1.0 + ul_faded.mean)
    uploads = np.where(np.asarray(upload_bits) > 0, sent.time_s + harq_tail_s(channel, "ul", ul_sinr), sent.time_s)
    use = None if sent.mcs is None else (sent.mcs, sent.retransmissions)
    return streams, np.asarray(uploads, dtype=float), deliveries, use
