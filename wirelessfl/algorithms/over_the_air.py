"""Over-the-air aggregation, the learning side: the server's aggregate of the analog sum (docs/levers.md).

The network decides who transmits and the receiver's relative noise 1/eta (``network/over_the_air.py``,
handed across as a ``seam.AnalogAggregation``); this module turns that into the aggregate's error.

Normalisation (Zhu, Wang, Huang, IEEE TWC 2020, eq. (4); Yang, Jiang, Shi, Ding, IEEE TWC 2020, eq. (6)):
device k of the set K that passed the truncation sends x_k = w_k Δ_k / s, Δ_k its update (trained minus
received model), w_k its FedAvg weight (n_k / n) and s = max_{j in K} w_j ||Δ_j||_2 / sqrt(d) a scale all
devices learn with their schedule (one number), so no device's mean symbol power exceeds one. Each
inverts its channel so its symbols arrive with SNR eta; the server receives y = sum_{k in K} x_k + z,
z ~ N(0, (1/eta) I_d), and estimates the FedAvg update as (s / W_K) y, W_K = sum_{k in K} w_k:

    Δ̂ = sum_K w_k Δ_k / W_K + (s / W_K) z,

the digital FedAvg update over K plus Gaussian noise of variance s² / (W_K² eta) per coordinate. Its mean
squared error is E||Δ̂ - Δ_K||² = d s² / (W_K² eta) = max_K (w_k ||Δ_k||)² / (W_K² eta): with equal weights
and update norms r, r² / (|K|² eta), the 1/|K|² of Zhu et al.'s aggregation error (more devices, less
error; truncating deep fades raises eta but shrinks |K|).

The noise is drawn from ``(learning seed, round, "over-the-air")``, apart from every other stream, so the
other curves' common random numbers are unchanged; a noiseless receiver (``receiver_noise: false``,
infinite SNR) adds nothing and the aggregate is digital FedAvg's over K, exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from wirelessfl.seam import AnalogAggregation


@dataclass(frozen=True)
class OverTheAir:
    """``training.aggregation`` with ``mode: over_the_air``: the truncation threshold on the instantaneous
    uplink SNR at full power (dB; None: no truncation) and whether the receiver adds noise."""

    truncation_db: float | None = None
    receiver_noise: bool = True

    def __post_init__(self) -> None:
        if self.truncation_db is not None and not math.isfinite(self.truncation_db):
            raise ValueError(f"aggregation.truncation_db must be a finite number of dB, got {self.truncation_db}")


def noise_std(received: torch.Tensor, uploads: Mapping[int, torch.Tensor], weights: torch.Tensor, noise_var: float) -> float:
    """The standard deviation s / (W_K sqrt(eta)) of the aggregate's noise per coordinate (module docstring):
    ``received`` the model the devices started from, ``uploads`` the trained models of K, ``weights`` every
    client's FedAvg weight, ``noise_var`` = 1/eta."""
    if not uploads or noise_var == 0:
        return 0.0
    d = received.numel()
    scale = max(float(weights[k]) * float(torch.linalg.vector_norm((theta - received).double())) for k, theta in uploads.items())
    mass = sum(float(weights[k]) for k in uploads)
    return scale / math.sqrt(d) / mass * math.sqrt(noise_var)


def analog_aggregate(
    digital: torch.Tensor, received: torch.Tensor, uploads: Mapping[int, torch.Tensor], weights: torch.Tensor,
    analog: AnalogAggregation, generator: torch.Generator,
) -> torch.Tensor:
    """The server's model after the analog round: ``digital`` (FedAvg's aggregate over ``uploads``, shape [P])
    plus the receiver's noise scaled back; ``digital`` itself when the noise is zero."""
    std = noise_std(received, uploads, weights, analog.noise_var)
    if std == 0.0:
        return digital
    z = torch.randn(digital.shape, generator=generator, dtype=torch.float64)
    return (digital.double() + std * z.to(digital.device)).to(digital.dtype)
