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

Time on air: one analog transmission of d symbols whatever the number of devices: d / B seconds on an
uplink band of B Hz (one real symbol per Hz per second, Nyquist signalling), divided by the uplink's TDD
share of the carrier's time where a pattern is set.

Pure numpy: the learning side receives the result as a ``seam.AnalogAggregation``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..seam import AnalogAggregation, CommPlan, RoundTiming, frozen
from .profile import PhysicalChannel


def truncated_inversion(
    snr: np.ndarray, scheduled: np.ndarray, threshold_db: float | None, noise: bool = True, airtime_s: float = 0.0
) -> AnalogAggregation:
    """Which of ``scheduled`` (client ids) transmit and the receiver's relative noise variance 1/eta.

    ``snr``: every client's instantaneous uplink SNR at full power (linear, indexed by id). A client passes
    when its SNR is at least the threshold (``threshold_db`` None: every scheduled client passes, no
    truncation). eta = the smallest SNR among those that pass; ``noise`` False: a noiseless receiver
    (infinite SNR), noise_var 0. No client passes: nothing is received, noise_var 0.
    """
    scheduled = np.asarray(scheduled, dtype=np.int64)
    gamma = np.asarray(snr, dtype=float)[scheduled]
    keep = np.ones(len(scheduled), dtype=bool) if threshold_db is None else gamma >= 10.0 ** (threshold_db / 10.0)
    passed = scheduled[keep]
    noise_var = 1.0 / float(gamma[keep].min()) if noise and len(passed) else 0.0
    return AnalogAggregation(frozenset(passed.tolist()), frozenset(scheduled[~keep].tolist()), noise_var, airtime_s)


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
