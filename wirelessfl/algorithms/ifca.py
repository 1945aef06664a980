"""IFCA with epsilon-greedy cluster choice (and optional removal of converged cluster models).

Ghosh, Chung, Yin, Ramchandran, "An Efficient Framework for Clustered Federated
Learning", NeurIPS 2020, as restated and extended in Isaksson et al.,
"Adaptive Expert Models for Personalization in Federated Learning"
(adaptive-expert-models.txt): §2.4 eq. 2-3, §3.1 and Algorithms 1-4.

The server keeps J cluster models and broadcasts all of them (one stream of
payload J). Every participant k computes the training loss of each on its
training data and takes (Algorithm 3)

    j^k = argmin_j sum_{i in P^k} l(x_i, y_i, w_g^j)   with probability 1 - epsilon,
          uniform over the selectable models             with probability epsilon,

trains w_g^{j^k} locally (Algorithm 4) and uploads it. Each cluster model becomes
the n_k-weighted average of the uploads that chose it (eq. 2-3, renormalised over
the uploads that arrived); a model nobody chose keeps its value. epsilon = 0 is
plain IFCA. The paper keeps epsilon constant (Table 1: 0.33), so there is no decay.
Ties of the loss go to the lowest index.

Optional (Algorithm 1, lines 11-12): per-model early stopping. With
``early_stopping_patience = p > 0`` every participant also evaluates the model it
chose on its validation split (before training); a model's validation loss for
the round is the mean over its choosers that arrived (as in the authors' code,
EricssonResearch/fl-moe). After ``p`` consecutive measured rounds without a new
lowest loss the model is removed from the selectable set: it keeps its last
aggregate, is no longer broadcast (the stream's payload shrinks) and nobody
trains it. When every model is removed the federation has stopped.

A client's own model (``client_params``, used for its evaluation) is the cluster
model it chose most recently, cluster 0 before it first takes part.

Work per participant (1.0 = one ordinary local round of E = train.epochs epochs):
1 + J_active * F / E, with F = 1/3 the cost of a forward pass over the training
set relative to a training pass over it (forward + backward ~ 3 forwards; the
same constant as FedFomo), plus F * n_val / (n_train * E) for the validation
pass when early stopping is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import FORWARD_COST, Context, MixingAlgorithm, StepInfo, numpy_generator, register, torch_generator
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.algorithms.specs.ifca import SPEC
from wirelessfl.seam import CommPlan, Stream


def epsilon_greedy_choice(
    losses: np.ndarray, selectable: np.ndarray, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 3 for every row of ``losses`` ``[r, J]``: argmin over the selectable models, or uniform w.p. epsilon.

    Every row draws one uniform number and one uniform index whatever epsilon is, so
    the draws of a round do not depend on the losses.
    """
    losses = np.asarray(losses, dtype=np.float64)
    candidates = np.flatnonzero(selectable)
    if candidates.size == 0:
        raise ValueError("epsilon_greedy_choice needs at least one selectable model")
    explore = rng.random(losses.shape[0]) < epsilon
    random_pick = candidates[rng.integers(candidates.size, size=losses.shape[0])]
    greedy = candidates[np.argmin(np.nan_to_num(losses[:, candidates], nan=np.inf), axis=1)]
    return np.where(explore, random_pick, greedy).astype(np.int64)


def cluster_mixing(choice: np.ndarray, sizes: np.ndarray, clusters: int) -> torch.Tensor:
    """Eq. 2-3 as a ``[J, m]`` mixing matrix: ``W[j, k] = n_k`` when client k chose j, else 0.

    ``choice[k] = -1`` marks a client that did not choose this round. Rows are
    renormalised over the uploads that arrive by ``MixingAlgorithm.aggregate``.
    """
    choice = np.asarray(choice, dtype=np.int64)
    mixing = np.zeros((clusters, len(choice)))
    chose = np.flatnonzero(choice >= 0)
    mixing[choice[chose], chose] = np.asarray(sizes, dtype=np.float64)[chose]
    return torch.as_tensor(mixing, dtype=torch.float64)


@register
class IFCA(MixingAlgorithm):
    """J cluster models, each client trains the one it picks (epsilon-greedy); see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        m = ctx.num_clients
        clusters = self.params.clusters
        if clusters > m:
            raise ParamError(f"{self.name}: clusters must be an int in [1, {m}] (the number of clients), got {clusters!r}", self.name, "clusters")
        self.clusters = clusters
        self.models = ctx.arch.init_flat(self.clusters, torch_generator(ctx.seed, "init")).to(ctx.device)
        self.mixing = cluster_mixing(np.full(m, -1), ctx.sizes(), self.clusters)
        self.selectable = np.ones(self.clusters, dtype=bool)
        self.best_val_loss = np.full(self.clusters, np.inf)
        self.stale_rounds = np.zeros(self.clusters, dtype=np.int64)

    # -- plan -----------------------------------------------------------------
    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        running = bool(self.selectable.any())
        return CommPlan(
            streams=self.streams_for(members),
            uplink={int(i): 1.0 for i in members} if running else {},
            work={int(i): self.relative_work(int(i)) for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def streams_for(self, members: np.ndarray) -> tuple[Stream, ...]:
        """One broadcast of every selectable cluster model to all participants."""
        payload = float(self.selectable.sum())
        if payload == 0 or len(members) == 0:
            return ()
        return (Stream(payload, frozenset(int(i) for i in members), "cluster-models"),)

    def relative_work(self, client: int) -> float:
        """1 local round + the J loss evaluations (+ the early-stopping validation pass); 0 once stopped."""
        if not self.selectable.any():
            return 0.0
        data = self.ctx.data.clients[client]
        epochs = float(max(self.ctx.train.epochs, 1))
        work = 1.0 + FORWARD_COST * float(self.selectable.sum()) / epochs
        if self.params.early_stopping_patience:
            work += FORWARD_COST * len(data.y_val) / (len(data.y_train) * epochs)
        return work

    # -- step -----------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        if not self.selectable.any():
            return StepInfo(train_loss=float("nan"), aggregated=0, extra={"stopped": True})
        with self.ctx.engine.phase("ifca cluster losses"):
            choice = self.choose(round, members, self.cluster_losses(members))
            val_loss = self.validation_losses(members, choice)
        trained, loss = self.train_chosen(round, members, choice)
        return self.finish_round(members, choice, trained, loss, val_loss, arrived)

    def cluster_losses(self, members: np.ndarray) -> np.ndarray:
        """``[r, J]`` mean training loss of every selectable cluster model on every participant (inf elsewhere).

        One lockstep evaluation over (client, cluster) slots.
        """
        candidates = np.flatnonzero(self.selectable)
        owners = np.repeat(members, len(candidates))
        slots = self.models[torch.as_tensor(np.tile(candidates, len(members)), device=self.models.device)]
        losses = np.full((len(members), self.clusters), np.inf)
        if len(owners):
            values = self.ctx.engine.evaluate(slots, self.ctx.train_sets(owners)).loss.double().cpu().numpy()
            losses[:, candidates] = values.reshape(len(members), len(candidates))
        return losses

    def choose(self, round: int, members: np.ndarray, losses: np.ndarray) -> np.ndarray:
        rng = numpy_generator(self.ctx.seed, round, "explore")
        return epsilon_greedy_choice(losses, self.selectable, float(self.params.epsilon), rng)

    def validation_losses(self, members: np.ndarray, choice: np.ndarray) -> np.ndarray | None:
        """Early stopping's measurement: each participant's validation loss of the model it chose (None when off)."""
        if not self.params.early_stopping_patience or not len(members):
            return None
        slots = self.models[torch.as_tensor(choice, device=self.models.device)]
        return self.ctx.engine.evaluate(slots, self.ctx.val_sets(members)).loss.double().cpu().numpy()

    def train_chosen(self, round: int, members: np.ndarray, choice: np.ndarray) -> tuple[torch.Tensor, float]:
        """Algorithm 4 for every participant in one lockstep call (FedAvg's generator and optimizer-state rule)."""
        return self.train_clients(round, members, self.models[torch.as_tensor(choice, device=self.models.device)])

    def finish_round(
        self,
        members: np.ndarray,
        choice: np.ndarray,
        trained: torch.Tensor,
        loss: float,
        val_loss: np.ndarray | None,
        arrived: frozenset[int],
    ) -> StepInfo:
        """Record the choices, aggregate per cluster (eq. 2-3) and apply early stopping."""
        self.assignment[members] = choice
        round_choice = np.full(self.ctx.num_clients, -1, dtype=np.int64)
        round_choice[members] = choice
        self.mixing = cluster_mixing(round_choice, self.ctx.sizes(), self.clusters)
        uploads = {int(i): trained[r] for r, i in enumerate(members) if int(i) in arrived}
        self.models = self.aggregate(uploads)
        removed = self.early_stopping(members, choice, val_loss, arrived)
        counts = np.bincount(choice, minlength=self.clusters)
        extra: dict[str, Any] = {"cluster_counts": counts.tolist(), "selectable": int(self.selectable.sum())}
        if removed:
            extra["removed"] = removed
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra=extra)

    def early_stopping(
        self, members: np.ndarray, choice: np.ndarray, val_loss: np.ndarray | None, arrived: frozenset[int]
    ) -> list[int]:
        """Algorithm 1 lines 11-12; returns the clusters removed this round."""
        if val_loss is None:
            return []
        reported = np.array([int(i) in arrived for i in members], dtype=bool) & np.isfinite(val_loss)
        removed = []
        for j in np.flatnonzero(self.selectable):
            mine = reported & (choice == j)
            if not mine.any():
                continue
            mean = float(val_loss[mine].mean())
            if mean < self.best_val_loss[j]:
                self.best_val_loss[j] = mean
                self.stale_rounds[j] = 0
            else:
                self.stale_rounds[j] += 1
                if self.stale_rounds[j] >= self.params.early_stopping_patience:
                    self.selectable[j] = False
                    removed.append(int(j))
        return removed

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "selectable": self.selectable.copy(),
            "best_val_loss": self.best_val_loss.copy(),
            "stale_rounds": self.stale_rounds.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.selectable = np.asarray(state["selectable"], dtype=bool).copy()
        self.best_val_loss = np.asarray(state["best_val_loss"], dtype=np.float64).copy()
        self.stale_rounds = np.asarray(state["stale_rounds"], dtype=np.int64).copy()
