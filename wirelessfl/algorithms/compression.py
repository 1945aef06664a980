"""Compressed uploads: each client sends a compressed model update, the server decompresses it.

* ``qsgd``: stochastic uniform quantisation to ``bits`` bits per coordinate
  (Alistarh, Grubic, Li, Tomioka, Vojnovic, "QSGD: Communication-Efficient SGD
  via Gradient Quantization and Encoding", NeurIPS 2017): with s levels,
  Q(v)_i = ||v||_2 · sign(v_i) · ξ_i / s, ξ_i = l + 1 with probability
  |v_i| s / ||v|| - l (l = floor(|v_i| s / ||v||)), else l. Unbiased, with
  E||Q(v) - v||² <= min(d / s², sqrt(d) / s) ||v||² (their Lemma 3.1). One bit
  is the sign, so b bits give s = 2^(b-1) - 1 levels (b >= 2); 32 bits are the
  float32 value itself (the uncompressed upload).
* ``top_k``: the ``fraction`` · d coordinates of largest magnitude, with error
  feedback (Stich, Cordonnier, Jaggi, "Sparsified SGD with Memory", NeurIPS
  2018).
* ``sign``: scaled sign, C(p) = (||p||_1 / d) · sign(p), with error feedback
  (Karimireddy, Rebjock, Stich, Jaggi, "Error Feedback Fixes SignSGD and other
  Gradient Compression Schemes", ICML 2019, EF-SignSGD).

Error feedback (their Algorithm 2): a client compresses p = Δ + e, sends
C(p) and keeps e <- p - C(p) for its next upload. The residual of each client
is the compressor's state, checkpointed with the algorithm.

What is compressed is the update Δ = θ_trained - θ_received; the server sees
θ_received + C(Δ). The upload's size in model units is the compressed bits over
32 bits per parameter (the float32 upload): values, indices and scales counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from wirelessfl.learning.client_store import ClientStore, ClientStores

METHODS = ("qsgd", "top_k", "sign")
#: bits of one uncompressed value (the float32 the upload carries) and of a scale
FLOAT_BITS = 32


@dataclass(frozen=True)
class Compression:
    """``training.compression``: the method and its setting (``bits`` for qsgd, ``fraction`` for top_k);
    ``error_feedback`` None is the method's own default (on for top_k and sign, off for the unbiased qsgd)."""

    method: str
    bits: int | None = None
    fraction: float | None = None
    error_feedback: bool | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"compression.method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.method == "qsgd" and not (isinstance(self.bits, int) and 2 <= self.bits <= FLOAT_BITS):
            raise ValueError(f"compression.bits: qsgd needs 2 to 32 bits per value (one is the sign), got {self.bits!r}")
        if self.method == "top_k" and not (isinstance(self.fraction, float) and 0 < self.fraction <= 1):
            raise ValueError(f"compression.fraction: top_k needs a fraction of the coordinates in (0, 1], got {self.fraction!r}")

    @property
    def feedback(self) -> bool:
        return self.method != "qsgd" if self.error_feedback is None else bool(self.error_feedback)

    def kept(self, d: int) -> int:
        """top_k: how many coordinates of ``d`` are sent."""
        return max(1, int(math.floor(self.fraction * d + 0.5)))

    def identity(self, d: int) -> bool:
        """True when nothing is lost: qsgd at 32 bits, top_k keeping every coordinate."""
        return (self.method == "qsgd" and self.bits == FLOAT_BITS) or (self.method == "top_k" and self.kept(d) == d)

    def payload_bits(self, d: int) -> int:
        """Bits of one compressed upload of ``d`` values: qsgd b·d + a 32-bit norm; top_k its k float32
        values plus their positions (a list of ceil(log2 d)-bit indices or a d-bit mask, whichever is shorter),
        or the dense vector when that is shorter; sign d bits + a 32-bit scale. The identity sends 32·d."""
        if self.identity(d):
            return FLOAT_BITS * d
        if self.method == "qsgd":
            return self.bits * d + FLOAT_BITS
        if self.method == "top_k":
            k = self.kept(d)
            index_bits = max(1, math.ceil(math.log2(d)))
            return min(FLOAT_BITS * k + min(k * index_bits, d), FLOAT_BITS * d)
        return d + FLOAT_BITS

    def payload(self, d: int) -> float:
        """The upload in model units (1.0: a float32 model of ``d`` parameters)."""
        return self.payload_bits(d) / (FLOAT_BITS * d)


def qsgd(v: torch.Tensor, bits: int, generator: torch.Generator) -> torch.Tensor:
    """QSGD of each row of ``v`` with s = 2^(bits-1) - 1 levels (one uniform draw per coordinate)."""
    s = 2 ** (bits - 1) - 1
    norm = torch.linalg.vector_norm(v, dim=1, keepdim=True)
    scaled = v.abs() / norm.clamp_min(torch.finfo(v.dtype).tiny) * s
    low = torch.floor(scaled)
    up = torch.rand(v.shape, generator=generator, dtype=v.dtype).to(v.device) < (scaled - low)
    return torch.sign(v) * norm * (low + up.to(v.dtype)) / s


def qsgd_variance(v: torch.Tensor, bits: int) -> torch.Tensor:
    """E||Q(v) - v||² of each row exactly: sum_i (||v|| / s)² p_i (1 - p_i), p_i the fractional level."""
    s = 2 ** (bits - 1) - 1
    norm = torch.linalg.vector_norm(v, dim=1, keepdim=True)
    scaled = v.abs() / norm.clamp_min(torch.finfo(v.dtype).tiny) * s
    p = scaled - torch.floor(scaled)
    return ((norm / s) ** 2 * p * (1 - p)).sum(dim=1)


def qsgd_bound(v: torch.Tensor, bits: int) -> torch.Tensor:
    """Alistarh et al.'s Lemma 3.1 bound of each row: min(d / s², sqrt(d) / s) ||v||²."""
    s, d = 2 ** (bits - 1) - 1, v.shape[1]
    return min(d / s**2, math.sqrt(d) / s) * torch.linalg.vector_norm(v, dim=1) ** 2


def top_k(v: torch.Tensor, count: int) -> torch.Tensor:
    """Each row of ``v`` with all but its ``count`` largest-magnitude coordinates set to zero."""
    index = torch.topk(v.abs(), count, dim=1).indices
    return torch.zeros_like(v).scatter_(1, index, v.gather(1, index))


def scaled_sign(v: torch.Tensor) -> torch.Tensor:
    """(||v||_1 / d) · sign(v) per row, a zero coordinate sent as + (one bit carries no zero)."""
    scale = v.abs().sum(dim=1, keepdim=True) / v.shape[1]
    return torch.where(v >= 0, scale, -scale)


class Compressor:
    """One algorithm's upload compression: ``payload`` for its plans, ``apply`` in its step; its state is each
    client's error-feedback residual ``[m, P]`` (float32, zeros until the client first uploads), in a client store
    of ``stores`` (RAM unless given) made on first use."""

    def __init__(self, spec: Compression, num_clients: int, params: int, stores: ClientStores | None = None) -> None:
        self.spec = spec
        self.num_clients = num_clients
        self.params = params
        self.stores = stores if stores is not None else ClientStores()
        self.residual: ClientStore | None = None

    def _residual(self, device: torch.device) -> ClientStore:
        if self.residual is None:
            self.residual = self.stores.new("residual", self.num_clients, torch.zeros(self.params, dtype=torch.float32, device=device))
        return self.residual

    @property
    def payload(self) -> float:
        return self.spec.payload(self.params)

    def apply(self, members: np.ndarray, start: torch.Tensor, trained: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """What the server reconstructs of each member's upload: ``start + C(trained - start [+ residual])``,
        in float64 and returned in ``trained``'s dtype; the identity returns ``trained`` itself."""
        if self.spec.identity(self.params):
            return trained
        delta = trained.double() - start.double()
        if self.spec.feedback:
            delta = delta + self._residual(trained.device).gather(members).double()
        if self.spec.method == "qsgd":
            sent = qsgd(delta, self.spec.bits, generator)
        elif self.spec.method == "top_k":
            sent = top_k(delta, self.spec.kept(self.params))
        else:
            sent = scaled_sign(delta)
        if self.spec.feedback:
            self.residual.scatter(members, (delta - sent).to(torch.float32))
        return (start.double() + sent).to(trained.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {} if self.residual is None else {"residual": self.residual.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any], device: torch.device) -> None:
        if "residual" in state:
            self._residual(device).load_state_dict(state["residual"])
