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

Per fading block and subband (``AnalogAggregation.cells``, Zhu et al., Sec. V): the coordinates of cell c
are sent by its own devices K_c and received with its own eta_c, so the server scales them by its own weight
mass W_c = sum_{k in K_c} w_k:

    Δ̂_i = sum_{K_c} w_k Δ_k,i / W_c + (s / W_c) z_i,  z_i ~ N(0, 1/eta_c), for every coordinate i of c,

with one scale s over every device that sends (the same normalisation). The error of cell c is
d_c s² / (W_c² eta_c); a coordinate no device sends keeps the model the devices received.

The noise is drawn from ``(learning seed, round, "over-the-air")``, apart from every other stream, so the
other curves' common random numbers are unchanged; a noiseless receiver (``receiver_noise: false``,
infinite SNR) adds nothing and the aggregate is digital FedAvg's over K, exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
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
    plus the receiver's noise scaled back; ``digital`` itself when the noise is zero. With ``analog.cells``
    (block fading) per cell (``cell_aggregate``)."""
    if analog.cells:
        return cell_aggregate(digital, received, uploads, weights, analog, generator)
    std = noise_std(received, uploads, weights, analog.noise_var)
    if std == 0.0:
        return digital
    z = torch.randn(digital.shape, generator=generator, dtype=torch.float64)
    return (digital.double() + std * z.to(digital.device)).to(digital.dtype)


def cell_aggregate(
    digital: torch.Tensor, received: torch.Tensor, uploads: Mapping[int, torch.Tensor], weights: torch.Tensor,
    analog: AnalogAggregation, generator: torch.Generator,
) -> torch.Tensor:
    """The server's model after an analog round of several cells (module docstring): per coordinate the weighted
    mean over the cell's devices among ``uploads`` (``digital``'s own value where the cell holds all of them, the
    ``received`` model where it holds none) plus noise of standard deviation s sqrt(noise_var_c) / W_c."""
    clients = sorted(uploads)
    if not clients:
        return digital
    d = digital.numel()
    stops = np.array([cell.stop for cell in analog.cells], dtype=np.int64)
    if stops[-1] != d:
        raise ValueError(f"analog aggregation: the cells cover {stops[-1]} coordinates, the model has {d}")
    sizes = np.diff(stops, prepend=0)
    column = {k: j for j, k in enumerate(clients)}
    member = np.zeros((len(stops), len(clients)), dtype=bool)
    for row, cell in zip(member, analog.cells):
        row[[column[k] for k in cell.passed if k in column]] = True
    w = weights.double().cpu().numpy()[clients]
    everyone = member.all(axis=1)
    # W_c; a cell of every device sums as noise_std does, so one such cell is the one-cell round to the last bit
    mass = np.where(everyone, sum(float(weights[k]) for k in uploads), member @ w)
    stacked = torch.stack([uploads[k] for k in clients]).double()
    norms = torch.linalg.vector_norm(stacked - received.double(), dim=1).cpu().numpy()
    scale = float((w * norms).max()) / math.sqrt(d)
    noise_var = np.array([cell.noise_var for cell in analog.cells])
    cell_std = np.where(mass > 0, scale / np.where(mass > 0, mass, 1.0) * np.sqrt(noise_var), 0.0)
    if everyone.all() and not cell_std.any():
        return digital
    device = digital.device
    out = digital.double()
    cell_weights = torch.as_tensor(member * w[None, :] / np.where(mass > 0, mass, 1.0)[:, None], device=device)  # [C, K]: w_k / W_c
    for c in np.flatnonzero(~everyone):  # a cell of some devices: their mean; of none: the received model
        a, b = stops[c] - sizes[c], stops[c]
        out[a:b] = cell_weights[c] @ stacked[:, a:b] if mass[c] > 0 else received[a:b].double()
    if cell_std.any():
        z = torch.randn(digital.shape, generator=generator, dtype=torch.float64)
        out = out + torch.as_tensor(np.repeat(cell_std, sizes), device=device) * z.to(device)
    return out.to(digital.dtype)


def truncated_share(analog: AnalogAggregation, scheduled) -> float:
    """The share of the scheduled devices' coordinates left unsent by truncation: sum over cells of d_c times the
    scheduled devices not in K_c, over d times the scheduled devices (one cell: truncated / scheduled)."""
    scheduled = {int(k) for k in scheduled}
    if not scheduled:
        return 0.0
    start, lost = 0, 0
    for cell in analog.cells:
        lost += (cell.stop - start) * len(scheduled - cell.passed)
        start = cell.stop
    return lost / (start * len(scheduled))
