"""Physical channel: user drop, path loss (log-distance or TR 38.901), fading, link rates, transfer times.

Beyond the paper (user-centric-fl.txt normalises time by T_dl); pure numpy so each
piece can be checked against a hand computation.
"""

from __future__ import annotations

import numpy as np

from . import link, pathloss
from .profile import PhysicalChannel


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
    if channel.path_loss_model == "log_distance":
        return path_loss_db(channel, distance_m)
    return pathloss.draw_large_scale(
        channel.path_loss_model, distance_m, channel.carrier_ghz, rng, shadowing=channel.shadowing
    ).loss_db


def k_factor(channel: PhysicalChannel) -> float | None:
    """The linear Rician K of the channel (None unless ``fading`` is rician)."""
    return 10.0 ** (channel.k_factor_db / 10.0) if channel.fading == "rician" else None


def draw_fading(channel: PhysicalChannel, num_clients: int, rng: np.random.Generator) -> np.ndarray:
    """Power gains |h|^2 for one round: Exp(1) under Rayleigh fading, Rician of mean 1, 1 without fading.

    Under fading the draw is always made, even if unused, so the generator
    advances the same way whatever the plan.
    """
    if channel.fading == "rayleigh":
        return rng.standard_exponential(num_clients)
    if channel.fading == "rician":
        return link.draw_fading(rng, num_clients, "rician", k_factor(channel))
    return np.ones(num_clients)


def mean_snr(tx_power_dbm: float, loss_db: np.ndarray, bandwidth_hz: float, noise_density_dbm_hz: float) -> np.ndarray:
    """Linear SNR without small-scale fading: P·10^(-L/10) / (N0·B)."""
    received_w = dbm_to_watt(tx_power_dbm) * 10.0 ** (-np.asarray(loss_db, dtype=float) / 10.0)
    return received_w / (dbm_to_watt(noise_density_dbm_hz) * bandwidth_hz)


def link_model(channel: PhysicalChannel, direction: str) -> str:
    """The ``link.LINKS`` name for a direction: TR 36.942 has its own uplink defaults."""
    if channel.link == "truncated_shannon":
        return "truncated_shannon" if direction == "dl" else "truncated_shannon_ul"
    return "shannon"


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
    if channel.link == "shannon":
        return shannon_rate(power_dbm, loss_db, fading_gain, bandwidth_hz, channel.noise_density_dbm_hz)
    snr = mean_snr(power_dbm, loss_db, bandwidth_hz, channel.noise_density_dbm_hz) * fading_gain
    return bandwidth_hz * link.spectral_efficiency(snr, link_model(channel, direction))


def downlink_rates(channel: PhysicalChannel, loss_db: np.ndarray, fading_gain: np.ndarray) -> np.ndarray:
    return _rates(channel, "dl", channel.bs_power_dbm, channel.bandwidth_hz, loss_db, fading_gain)


def uplink_rates(channel: PhysicalChannel, loss_db: np.ndarray, fading_gain: np.ndarray) -> np.ndarray:
    return _rates(channel, "ul", channel.ue_power_dbm, channel.uplink_bandwidth_hz, loss_db, fading_gain)


MAX_BLOCKS = 1_000_000
"""Blocks a transfer may take before it is an outage (10^4 s of 10 ms blocks)."""


def _stream_time(channel: PhysicalChannel, bits: float, snr: np.ndarray, rng: np.random.Generator) -> float:
    """A multicast's time, plus the unicast repairs of the receivers its rate left behind (``coverage``), sent
    one after another on the same carrier after it: the stream counts as received when the last repair lands."""
    block, fading, k, dl = channel.block_s, channel.fading, k_factor(channel), link_model(channel, "dl")
    sent = link.multicast_transfer(bits, channel.bandwidth_hz, snr, rng, block, fading, k, dl, channel.multicast, channel.coverage_q, MAX_BLOCKS)
    repair = np.asarray(sent.repair_bits, dtype=float)
    if not repair.any():
        return float(sent.time_s)
    owed = repair > 0
    repairs = link.transfer_time(repair[owed], channel.bandwidth_hz, snr[owed], rng, block, fading, k, dl, MAX_BLOCKS)
    return float(sent.time_s + np.sum(repairs.time_s))


def block_durations(
    channel: PhysicalChannel, loss_db: np.ndarray, stream_members: tuple[np.ndarray, ...], stream_bits: np.ndarray,
    upload_bits: np.ndarray, clients: np.ndarray, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Stream and upload durations (s) over block fading of length ``channel.block_s``.

    Draw order: each stream's receivers' blocks (then its repairs' blocks) in
    stream order, then the uploads' blocks (``link.multicast_transfer``,
    ``link.transfer_time``).
    Downlink and uplink draws are independent (no TDD reciprocity across blocks).
    A transfer still unfinished after ``MAX_BLOCKS`` blocks is in outage and
    lasts ``inf``: it misses any deadline.
    """
    block, fading, k = channel.block_s, channel.fading, k_factor(channel)
    dl_snr = mean_snr(channel.bs_power_dbm, loss_db, channel.bandwidth_hz, channel.noise_density_dbm_hz)[clients]
    ul_snr = mean_snr(channel.ue_power_dbm, loss_db, channel.uplink_bandwidth_hz, channel.noise_density_dbm_hz)[clients]
    streams = np.array([
        _stream_time(channel, float(bits), dl_snr[members], rng) for bits, members in zip(stream_bits.tolist(), stream_members)
    ])
    uploads = link.transfer_time(
        upload_bits, channel.uplink_bandwidth_hz, ul_snr, rng, block, fading, k, link_model(channel, "ul"), MAX_BLOCKS
    ).time_s
    return streams, np.asarray(uploads, dtype=float)
