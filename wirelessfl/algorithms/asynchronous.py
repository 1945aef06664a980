"""Buffered asynchronous aggregation, the learning side: the updates in flight and the server's step.

FedAsync (Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", arXiv:1903.03934, 2019) mixes each
arriving model into the server's: x_t = (1 - alpha_t) x_{t-1} + alpha_t x_new, alpha_t = alpha s(t - tau),
with a staleness function s of the versions the update missed:

    constant     s = 1
    polynomial   s_a(sigma) = (sigma + 1)^(-a)                      a > 0
    hinge        s_{a,b}(sigma) = 1 if sigma <= b, else 1 / (a (sigma - b) + 1)   a > 0, b >= 0

FedBuff (Nguyen, Malik, Zhan, Yousefpour, Rabbat, Malek, Huba, "Federated Learning with Buffered
Asynchronous Aggregation", AISTATS 2022, Algorithm 1) waits for K updates, each the client's change
Delta_k = theta_k - x_{tau_k} from the version tau_k it trained on, and steps x_t = x_{t-1} + eta_g times
their staleness-weighted mean. Here, for the ``buffer`` updates K that the network lands (``network/buffered.py``)
and n_k the client's training samples:

    x_t = x_{t-1} + alpha * sum_{k in K} (n_k / n_K) s(sigma_k) Delta_k,    n_K = sum_{k in K} n_k,

written as the mixing step it is, with every update rebased onto the current model:

    alpha_t = alpha * sum_K n_k s_k / n_K,
    x_t = (1 - alpha_t) x_{t-1} + alpha_t * sum_K (n_k s_k / sum_K n_j s_j) (theta_k + x_{t-1} - x_{tau_k}).

sigma_k = (t - 1) - tau_k counts the aggregations the update missed: 0 for an update trained on the current
model. FedAsync's t - tau counts the aggregation itself as well (its t - tau is sigma + 1), so under its
polynomial rule a fresh update already weighs 2^(-a). We count as FedBuff does, whose 1 / sqrt(1 + sigma) is
the polynomial rule with a = 1/2. With ``buffer: 1`` the step is FedAsync's with x_new the update rebased onto
x_{t-1} (FedBuff's delta), which is FedAsync's own x_new when the update is fresh.

When every update is fresh (B = all participants), theta_k + (x_{t-1} - x_{tau_k}) is theta_k exactly, every
s_k is 1 under any rule, alpha_t is alpha, and at alpha = 1 the step is FedAvg's weighted mean to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

STALENESS_RULES = ("constant", "polynomial", "hinge")


@dataclass(frozen=True)
class Asynchronous:
    """``training.aggregation`` with ``mode: async``: aggregate once ``buffer`` uploads have landed, each
    weighted by ``staleness`` (with its ``a`` and ``b``), and mix the result in at rate ``alpha``."""

    buffer: int
    staleness: str = "constant"
    a: float | None = None
    b: float | None = None
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if self.buffer < 1:
            raise ValueError(f"aggregation.buffer must be at least 1 upload, got {self.buffer}")
        if self.staleness not in STALENESS_RULES:
            raise ValueError(f"aggregation.staleness must be one of {', '.join(STALENESS_RULES)}, got {self.staleness!r}")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"aggregation.alpha must be in (0, 1], got {self.alpha}")
        if self.staleness != "constant" and not (self.a is not None and math.isfinite(self.a) and self.a > 0):
            raise ValueError(f"aggregation.a: staleness {self.staleness} needs a finite decay a > 0, got {self.a}")
        if self.staleness == "hinge" and not (self.b is not None and self.b >= 0):
            raise ValueError(f"aggregation.b: staleness hinge needs b >= 0, got {self.b}")

    def weight(self, sigma: int) -> float:
        """s(sigma): the weight of an update that missed ``sigma`` aggregations (module docstring)."""
        if self.staleness == "constant":
            return 1.0
        if self.staleness == "polynomial":
            return (sigma + 1.0) ** -self.a
        return 1.0 if sigma <= self.b else 1.0 / (self.a * (sigma - self.b) + 1.0)


class AsyncBuffer:
    """The updates in flight: for each client dispatched and not yet aggregated, the model it trained, the
    model it trained from and the round it was dispatched in (its base version is that round minus one).
    Part of the algorithm's state: a resumed run carries them byte for byte."""

    def __init__(self, spec: Asynchronous) -> None:
        self.spec = spec
        self.pending: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}

    def dispatch(
        self, round: int, pool: np.ndarray, capacity: int, available: Callable[[int], np.ndarray],
        sample: Callable[[int, int, np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """The clients that receive the current model at the start of ``round``: with nothing in flight, the
        round's available clients (the synchronous draw); otherwise enough idle clients of ``pool`` to bring
        the clients in flight back to ``capacity`` (every idle one, or a seeded sample of them)."""
        if not self.pending:
            return available(round)
        idle = np.setdiff1d(pool, np.fromiter(self.pending, dtype=np.int64))
        count = capacity - len(self.pending)
        if count >= len(idle):
            return idle
        return sample(round, count, idle) if count > 0 else idle[:0]

    def add(self, round: int, members: np.ndarray, trained: torch.Tensor, received: torch.Tensor) -> None:
        """``members`` dispatched in ``round``, with the rows they trained and the rows they trained from."""
        for r, client in enumerate(members.tolist()):
            self.pending[client] = (trained[r], received[r], round)

    def take(self, round: int, arrived: frozenset[int]) -> tuple[list[int], torch.Tensor, torch.Tensor, list[int]]:
        """Remove the ``arrived`` updates from the buffer: their clients (sorted), trained and base rows, and
        staleness sigma_k = round - (dispatch round) (the aggregations each missed)."""
        missing = sorted(set(arrived) - set(self.pending))
        if missing:
            raise ValueError(f"async aggregation: clients {missing} arrived without an update in flight")
        clients = sorted(arrived)
        entries = [self.pending.pop(c) for c in clients]
        if not entries:
            return [], torch.empty(0), torch.empty(0), []
        trained = torch.stack([e[0] for e in entries])
        base = torch.stack([e[1] for e in entries])
        return clients, trained, base, [round - e[2] for e in entries]

    def server_step(
        self, current: torch.Tensor, mixing: torch.Tensor, clients: list[int], trained: torch.Tensor, base: torch.Tensor,
        sigma: list[int],
    ) -> tuple[torch.Tensor, float]:
        """x_t from ``current`` x_{t-1} (``[1, P]``) and the taken updates (module docstring); ``mixing`` ``[1, m]``
        holds n_j / n. Returns x_t and alpha_t. The weighted mean is ``MixingAlgorithm.aggregate``'s arithmetic."""
        s = torch.tensor([self.spec.weight(x) for x in sigma], dtype=torch.float64)
        data = mixing[:, torch.as_tensor(clients, dtype=torch.long)]
        weights = data * s[None, :]
        mass = weights.sum(dim=1, keepdim=True)
        alpha_t = self.spec.alpha * float(mass[0, 0] / data.sum())
        rebased = trained + (current - base).to(trained.device)
        mixed = (weights / mass.clamp_min(1e-300)).to(rebased.dtype).to(rebased.device) @ rebased
        return current * (1.0 - alpha_t) + mixed * alpha_t, alpha_t

    def state_dict(self) -> dict[str, Any]:
        clients = sorted(self.pending)
        if not clients:
            return {"clients": np.zeros(0, dtype=np.int64)}
        return {
            "clients": np.asarray(clients, dtype=np.int64),
            "rounds": np.asarray([self.pending[c][2] for c in clients], dtype=np.int64),
            "trained": torch.stack([self.pending[c][0] for c in clients]).detach().cpu().clone(),
            "base": torch.stack([self.pending[c][1] for c in clients]).detach().cpu().clone(),
        }

    def load_state_dict(self, state: Mapping[str, Any], device: torch.device) -> None:
        clients = np.asarray(state["clients"]).tolist()
        self.pending = {
            int(c): (state["trained"][r].to(device), state["base"][r].to(device), int(state["rounds"][r]))
            for r, c in enumerate(clients)
        }

