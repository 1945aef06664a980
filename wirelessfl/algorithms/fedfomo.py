"""FedFomo: personalized federated learning with first-order model optimization.

Zhang, Sapra, Fidler, Yeung, Alvarez, "Personalized Federated Learning with
First Order Model Optimization", ICLR 2021 (fedfomo.txt), eq. 3-5 and §3; a
baseline of user-centric-fl.txt §IV.

Each round client i downloads M of the models its peers uploaded, chosen by its
affinity row p_i (epsilon-greedy: each pick is uniformly random with
probability epsilon, else the highest remaining affinity; epsilon decays
linearly, ``max(epsilon - (t - 1) * decay, 0)`` in round t counted from 1: the
authors' ``epsilon - epoch * epsilon_decay`` with epochs counted from 0, so the
first downloads, in round 2, use epsilon - decay). With its own
previous model theta_i^{t-1} as the baseline and its validation loss L_i, every
candidate theta_n (the downloads and its own freshly trained model) gets

    w_n = (L_i(theta_i^{t-1}) - L_i(theta_n)) / ||theta_n - theta_i^{t-1}||     (eq. 3)

clipped at 0 and normalised; ``theta_i <- theta_i^{t-1} + sum_n w_n (theta_n -
theta_i^{t-1})`` (eq. 5); if no weight is positive the client keeps
theta_i^{t-1}. ``p_i += w`` with the unclipped weights. Then the client trains
locally and uploads.

Network cost: M unicast streams of one model per client (its real cost), one
upload, and the validation forward passes counted as compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import FORWARD_COST, Algorithm, Context, StepInfo, mean_finite, numpy_generator, register, torch_generator
from wirelessfl.algorithms.specs.fedfomo import SPEC
from wirelessfl.seam import CommPlan, Stream

def fomo_weights(base_loss: float, losses: Any, distances: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 3 and its normalisation: ``(raw w_n, clipped-and-normalised w*_n)``.

    A candidate at distance 0 from the baseline carries no direction and gets
    weight 0. When no raw weight is positive, ``w*`` is all zeros (keep the
    baseline model).
    """
    loss = np.asarray(losses, dtype=np.float64)
    dist = np.asarray(distances, dtype=np.float64)
    if loss.shape != dist.shape:
        raise ValueError(f"fomo_weights losses and distances must have the same shape, got {loss.shape} and {dist.shape}")
    if np.any(dist < 0):
        raise ValueError(f"fomo_weights distances must be >= 0, got {dist.tolist()}")
    raw = np.zeros_like(loss)
    moved = dist > 0
    raw[moved] = (float(base_loss) - loss[moved]) / dist[moved]
    positive = np.maximum(raw, 0.0)
    total = positive.sum()
    return raw, (positive / total if total > 0 else positive)


def current_epsilon(epsilon: float, decay: float, round: int) -> float:
    """Linear decay from ``epsilon`` at round 1 (rounds count from 1)."""
    return max(float(epsilon) - float(decay) * (int(round) - 1), 0.0)


def epsilon_greedy_pick(
    affinity: np.ndarray, available: np.ndarray, count: int, epsilon: float, rng: np.random.Generator
) -> list[int]:
    """``count`` distinct entries of ``available``: random w.p. epsilon, else top affinity.

    Ties in affinity are broken by a random order drawn from ``rng``.
    """
    remaining = list(rng.permutation(np.asarray(available, dtype=np.int64)))
    picks: list[int] = []
    for _ in range(min(count, len(remaining))):
        if rng.random() < epsilon:
            choice = remaining[int(rng.integers(len(remaining)))]
        else:
            choice = max(remaining, key=lambda j: affinity[j])
        remaining.remove(choice)
        picks.append(int(choice))
    return picks


@register
class FedFomo(Algorithm):
    """Per-client models mixed by eq. 3 weights on each client's validation split."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        m = ctx.num_clients
        init = ctx.arch.init_flat(1, torch_generator(ctx.seed, "init")).to(ctx.device)
        self.base = init.expand(m, -1).clone()
        self.current = self.base.clone()
        self.server = self.base.clone()
        self.uploaded = np.zeros(m, dtype=bool)
        self.affinity = np.eye(m)

    # -- plan -----------------------------------------------------------------
    def selection(self, round: int) -> dict[int, list[int]]:
        """Which peer models each participant downloads this round."""
        members = self.participants(round)
        rng = numpy_generator(self.ctx.seed, round, "fedfomo-select")
        epsilon = current_epsilon(self.params.epsilon, self.params.epsilon_decay, round)
        chosen: dict[int, list[int]] = {}
        for i in members:
            available = np.flatnonzero(self.uploaded & (np.arange(self.ctx.num_clients) != i))
            chosen[int(i)] = epsilon_greedy_pick(
                self.affinity[i], available, self.params.models_per_client, epsilon, rng
            )
        return chosen

    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        chosen = self.selection(round)
        if not self.uploaded.any():
            streams = (Stream(1.0, frozenset(int(i) for i in members), "initial-model"),)
        else:
            streams = tuple(
                Stream(1.0, frozenset({i}), f"model-{j}-to-{i}") for i, peers in chosen.items() for j in peers
            )
        return CommPlan(
            streams=streams,
            uplink={int(i): 1.0 for i in members},
            work={int(i): self.relative_work(int(i), len(chosen[int(i)])) for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def relative_work(self, client: int, downloads: int) -> float:
        """One local training plus validation passes (baseline, own model, downloads)."""
        if not self.uploaded.any():
            return 1.0
        data = self.ctx.data.clients[client]
        evaluations = (2 + downloads) * len(data.y_val)
        return 1.0 + FORWARD_COST * evaluations / (len(data.y_train) * float(max(self.ctx.train.epochs, 1)))

    # -- step -----------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        federated = 0
        if self.uploaded.any():
            federated = self.federate(self.selection(round))
        index = torch.as_tensor(members, device=self.base.device)
        result = self.ctx.engine.train(
            self.base[index], self.ctx.train_sets(members), self.ctx.train, torch_generator(self.ctx.seed, round, "train")
        )
        self.current[index] = result.params
        for r, i in enumerate(members):
            if int(i) in arrived:
                self.server[int(i)] = result.params[r]
                self.uploaded[int(i)] = True
        loss = mean_finite(result.loss)
        arrived_count = int(sum(int(i) in arrived for i in members))
        return StepInfo(train_loss=loss, aggregated=arrived_count, extra={"federated": federated})

    def federate(self, chosen: dict[int, list[int]]) -> int:
        """Eq. 3-5 for every participant; all validation losses in one evaluate call.

        Per client the slots are: its previous model (the baseline), its own
        freshly trained model, then its downloads. Sets ``base[i]`` to the new
        start of client i's local training; returns how many clients moved.
        """
        evaluated: list[torch.Tensor] = []
        owners: list[int] = []
        for i, peers in chosen.items():
            evaluated += [self.base[i], self.current[i]] + [self.server[j] for j in peers]
            owners += [i] * (2 + len(peers))
        stacked = torch.stack(evaluated)
        with self.ctx.engine.phase("fedfomo validation"):
            losses = self.ctx.engine.evaluate(stacked, self.ctx.val_sets(owners)).loss.double().cpu().numpy()
        moved = 0
        row = 0
        for i, peers in chosen.items():
            candidates = stacked[row + 1 : row + 2 + len(peers)]
            distances = (candidates.double() - self.base[i].double()).norm(dim=1).cpu().numpy()
            raw, weights = fomo_weights(losses[row], losses[row + 1 : row + 2 + len(peers)], distances)
            row += 2 + len(peers)
            self.affinity[i, peers] += raw[1:]
            if weights.sum() > 0:
                w = torch.as_tensor(weights, dtype=stacked.dtype, device=stacked.device)
                self.base[i] = self.base[i] + w @ (candidates - self.base[i])
                moved += 1
        return moved

    def client_params(self) -> torch.Tensor:
        return self.current

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone."""
        return self.current[torch.as_tensor(clients, dtype=torch.long, device=self.current.device)]

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.detach().cpu().clone(),
            "current": self.current.detach().cpu().clone(),
            "server": self.server.detach().cpu().clone(),
            "uploaded": self.uploaded.copy(),
            "affinity": self.affinity.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.base = state["base"].to(self.ctx.device)
        self.current = state["current"].to(self.ctx.device)
        self.server = state["server"].to(self.ctx.device)
        self.uploaded = np.asarray(state["uploaded"]).copy()
        self.affinity = np.asarray(state["affinity"]).copy()
