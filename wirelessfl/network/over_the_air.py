"""Over-the-air (analog) aggregation on the uplink: who transmits, the receiver's effective noise, the airtime.

The scheduled devices send their (normalised) model updates at the same time on the same d real symbols;
the waveforms add on the air, and the base station receives their sum plus its noise. Each device k
inverts its channel so that every update arrives with the same amplitude (truncated channel inversion,
Zhu, Wang, Huang, "Broadband Analog Aggregation for Low-Latency Federated Edge Learning", IEEE TWC 19(1),
2020, eq. (6)): a device whose instantaneous SNR at full power, gamma_k = mean_snr_k * |h_k|^2, is below
the truncation threshold theta would need more than its power limit and is left out of the round.

The common received SNR of the alignment is eta = min over the transmitting devices of gamma_k: the
weakest of them transmits at full power, the others below it (Yang, Jiang, Shi, Ding, "Federated
Learning via Over-the-Air Computation", IEEE TWC 19(3), 2020, eq. (11), their denoising factor
eta = min_k P_0 |h_k|^2 / |b_k|^2 with a single receive antenna and unit-power symbols). With a threshold
theta, eta >= theta, so the truncation trades participation for aggregation error (Zhu et al., Sec. IV).
The receiver's noise per real symbol is then 1/eta relative to one aligned device's symbol power.

Per fading block and subband (Zhu et al., Sec. V, broadband analog aggregation: truncation per sub-channel):
under block fading (``coherence_s`` / ``ue_speed_mps``) the d symbols are laid out in time and frequency, a
block of T_c seconds carrying B T_c symbols over the band, cut into the profile's ``subbands`` equal groups of
subcarriers. Coordinates fill the subbands of the first block, then of the next (``analog_cells``); each
(block, subband) cell has its own fading gain per device, so truncation (gamma_k,c >= theta) and alignment
(eta_c = min over the cell's devices) are per cell, and each coordinate has its own contributors and noise.
With fading held for the round there is one cell, the round's draw.

Time on air: one analog transmission of d symbols whatever the number of devices: d / B seconds on an
uplink band of B Hz (one real symbol per Hz per second, Nyquist signalling), divided by the uplink's TDD
share of the carrier's time where a pattern is set.

Pure numpy: the learning side receives the result as a ``seam.AnalogAggregation``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..seam import AnalogAggregation, AnalogCell, CommPlan, RoundTiming, frozen
from .profile import PhysicalChannel

MAX_CELLS = 65_536
"""Cells (fading blocks x subbands) an analog transmission may span: each is a set of contributors the learning
side applies, so a 10 us block under a million-parameter model is refused before the run (``run.preflight``)."""


def truncated_inversion(
    snr: np.ndarray, scheduled: np.ndarray, threshold_db: float | None, noise: bool = True, airtime_s: float = 0.0,
    stops: np.ndarray | None = None,
) -> AnalogAggregation:
    """Which of ``scheduled`` (client ids) transmit and the receiver's relative noise variance 1/eta.

    ``snr``: every client's instantaneous uplink SNR at full power (linear, indexed by id). A client passes
    when its SNR is at least the threshold (``threshold_db`` None: every scheduled client passes, no
    truncation). eta = the smallest SNR among those that pass; ``noise`` False: a noiseless receiver
    (infinite SNR), noise_var 0. No client passes: nothing is received, noise_var 0.

    Per cell (``stops``, the cells' last coordinate + 1, increasing; ``snr`` then ``[cells, clients]``): the same
    rule in every cell (``seam.AnalogAggregation.cells``); cells of no coordinate are dropped.
    """
    scheduled = np.asarray(scheduled, dtype=np.int64)
    if stops is None:
        gamma = np.asarray(snr, dtype=float)[scheduled]
        keep = np.ones(len(scheduled), dtype=bool) if threshold_db is None else gamma >= 10.0 ** (threshold_db / 10.0)
        passed = scheduled[keep]
        noise_var = 1.0 / float(gamma[keep].min()) if noise and len(passed) else 0.0
        return AnalogAggregation(frozenset(passed.tolist()), frozenset(scheduled[~keep].tolist()), noise_var, airtime_s)
    stops = np.asarray(stops, dtype=np.int64)
    sizes = np.diff(stops, prepend=0)
    gamma = np.asarray(snr, dtype=float)[:, scheduled][sizes > 0]
    stops, sizes = stops[sizes > 0], sizes[sizes > 0]
    keep = np.ones(gamma.shape, dtype=bool) if threshold_db is None else gamma >= 10.0 ** (threshold_db / 10.0)
    eta = np.where(keep, gamma, np.inf).min(axis=1)
    cell_noise = np.where(np.isfinite(eta), 1.0 / eta, 0.0) if noise else np.zeros(len(eta))
    cells = tuple(AnalogCell(stop, scheduled[row].tolist(), nv) for stop, row, nv in zip(stops.tolist(), keep, cell_noise.tolist()))
    sent = sizes * keep.any(axis=1)
    noise_var = float((sent * cell_noise).sum() / sent.sum()) if sent.sum() else 0.0
    anywhere = keep.any(axis=0)
    return AnalogAggregation(
        frozenset(scheduled[anywhere].tolist()), frozenset(scheduled[~anywhere].tolist()), noise_var, airtime_s, cells
    )


def analog_cells(channel: PhysicalChannel, model_params: int) -> np.ndarray:
    """The stops of an analog transmission's cells (``[blocks * subbands]``, block-major, empty cells repeating a
    stop) under block fading: block b carries coordinates [b·B·T_c·share, (b+1)·B·T_c·share) (B the uplink band,
    share its TDD time share), cut into ``subbands`` equal runs, one per subband."""
    per_block = _block_symbols(channel)
    blocks = max(1, math.ceil(model_params / per_block))
    edges = np.minimum(np.floor(np.arange(blocks + 1) * per_block), model_params).astype(np.int64)
    edges[-1] = model_params
    s = channel.subbands
    starts, ends = edges[:-1, None], edges[1:, None]
    return (starts + ((ends - starts) * np.arange(1, s + 1)[None, :]) // s).reshape(-1)


def cell_count(channel: PhysicalChannel, model_params: int) -> int:
    """Cells (blocks x subbands) ``analog_cells`` lays a model out on; 1 with fading held for the round."""
    if channel.block_s is None:
        return 1
    return max(1, math.ceil(model_params / _block_symbols(channel))) * channel.subbands


def _block_symbols(channel: PhysicalChannel) -> float:
    """Real symbols one fading block carries over the uplink band: B·T_c·(TDD uplink share)."""
    return channel.uplink_bandwidth_hz * channel.block_s * channel.time_share("ul")


def analog_airtime_s(channel: PhysicalChannel, model_params: int) -> float:
    """d / B: ``model_params`` real symbols over the uplink band, stretched by the uplink's TDD time share."""
    return model_params / (channel.uplink_bandwidth_hz * channel.time_share("ul"))


def analog_timing(timing: RoundTiming, analog: AnalogAggregation) -> RoundTiming:
    """The round of ``timing`` (timed with no uploads: downlink and computation) with one analog upload:
    the devices in ``analog.passed`` wait for the last of them to finish computing, then transmit together
    for ``analog.airtime_s``; truncated devices send nothing. Only the passed devices arrive."""
    clients = sorted(timing.t_computed)
    passed = sorted(analog.passed)
    start = max((timing.t_computed[c] for c in passed), default=0.0)
    end = start + analog.airtime_s
    t_uploaded = {c: (end if c in analog.passed else math.inf) for c in clients}
    t_upload_start = {c: (start if c in analog.passed else timing.t_computed[c]) for c in clients}
    airtime = {c: (analog.airtime_s if c in analog.passed else 0.0) for c in clients}
    computed = max((timing.t_computed[c] for c in clients), default=0.0)
    return replace(
        timing,
        t_uploaded=frozen(clients, [t_uploaded[c] for c in clients]),
        t_upload_start=frozen(clients, [t_upload_start[c] for c in clients]) if timing.has_activities else timing.t_upload_start,
        airtime=frozen(clients, [airtime[c] for c in clients]) if timing.has_activities else timing.airtime,
        arrived=frozenset(passed),
        t_end=max(computed, end if passed else 0.0, max(timing.t_received.values(), default=0.0)),
        retransmissions={},
    )


def silent_plan(plan: CommPlan) -> CommPlan:
    """``plan`` with no digital upload (the analog one is timed apart); its draws are the same (they do not
    depend on the plan)."""
    return CommPlan(plan.streams, dict.fromkeys(plan.uplink, 0.0), dict(plan.work), plan.model_params, plan.label)
