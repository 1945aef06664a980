"""pFedMe: personalized models as Moreau-envelope proximal points of the local model.

Dinh, Tran, Nguyen, "Personalized Federated Learning with Moreau Envelopes",
NeurIPS 2020, §3 and Algorithm 1. Client i's objective is the Moreau envelope

    F_i(w) = min_theta  f_i(theta) + (lambda / 2) ||theta - w||^2,

whose minimiser theta_i(w) is client i's personalized model. In round t a
participant sets w_{i,0} = w^t and, for each of its R local steps (one batch
D_i each: the scenario's epochs of batches),

    theta_i ~ argmin_theta  f_i(theta; D_i) + (lambda / 2) ||theta - w_{i,r}||^2
              (K gradient steps at the personal rate, on that one batch)
    w_{i,r+1} = w_{i,r} - eta lambda (w_{i,r} - theta_i)

with eta the round's client rate, and uploads w_{i,R}. The server mixes

    w^{t+1} = (1 - beta) w^t + beta avg_i w_{i,R},

so beta = 1 is plain averaging (taken as the average itself, FedAvg's rule;
tested). Client i is evaluated with its last theta_i; a held-out client (never
trained) with the global model.

The inner solve is the engine's training (plain SGD at ``personal_lr``,
``inner_steps`` epochs of the one batch, the proximal term as
``GradientCorrection``; the gradient with its proximal term is clipped to the
scenario's ``clip_norm`` when one is set, the safety a user reaches for when a
run diverges, which the paper's plain step does not have). theta starts each
round at w^t and warm-starts each inner solve from the previous one, as the
authors' code (CharlieDinh/pFedMe, ``pFedMeOptimizer``) does. The batches are
the round's common shuffles ``(seed, round, "train")``. Departure: the average is by sample count over the
arrived uploads (FedAvg's weights; the paper's 1/S for equal sizes).

CommPlan: FedAvg's payload (w down, w up). Work K: every local step is K
training passes on its batch (the w update is a vector operation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import Context, MixingAlgorithm, StepInfo, mean_finite, register, torch_generator
from wirelessfl.algorithms.specs.pfedme import SPEC
from wirelessfl.learning.lockstep import EvalResult, GradientCorrection, shuffle_schedule


@register
class PFedMe(MixingAlgorithm):
    """The server's model ``models`` and each client's personalized model in the client store ``personal``
    (``[m, P]`` rows)."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.personal = ctx.stores.new("personal", ctx.num_clients, self.models[0])  # every client's last theta_i

    def client_work(self) -> float:
        """K inner steps per batch."""
        return float(self.params.inner_steps)

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        local, loss = self.local_updates(round, members, self.received(members))
        uploads = {int(i): local[r] for r, i in enumerate(members) if int(i) in arrived}
        averaged = self.aggregate(uploads)
        beta = float(self.params.beta)
        self.models = averaged if beta == 1.0 else (1 - beta) * self.models + beta * averaged
        return StepInfo(train_loss=loss, aggregated=len(uploads))

    def local_updates(self, round: int, members: np.ndarray, start: torch.Tensor) -> tuple[torch.Tensor, float]:
        """Each member's R outer steps from ``start``: the inner proximal solve on the step's batch, then the w step.
        Returns the local models w_{i,R} and the mean inner loss (without the proximal term)."""
        cfg, data = self.ctx.train, self.ctx.data
        lam, steps = float(self.params.lambda_), int(self.params.inner_steps)
        inner = replace(cfg, epochs=steps, optimizer="sgd", momentum=0.0, nesterov=False, weight_decay=0.0,
                        lr=float(self.params.personal_lr))
        sizes = [len(data.clients[int(i)].y_train) for i in members]
        batches = shuffle_schedule(sizes, cfg.batch_size, [float(cfg.epochs)] * len(members), torch_generator(self.ctx.seed, round, "train"))
        w, theta, losses = start.clone(), start.clone(), []
        with self.ctx.engine.uncached():  # each step's batches are new tensors: a copy kept would never be read again
            for t in range(max((len(b) for b in batches), default=0)):
                sets = []
                for r, i in enumerate(members):
                    chosen = batches[r][t] if t < len(batches[r]) else torch.zeros(0, dtype=torch.long)  # done: no step
                    sets.append((data.clients[int(i)].x_train[chosen], data.clients[int(i)].y_train[chosen]))
                result = self.ctx.engine.train(
                    theta, sets, inner, torch_generator(self.ctx.seed, round, "pfedme-inner", t), correction=GradientCorrection(lam, anchor=w),
                )
                theta = result.params
                rows = torch.as_tensor([r for r in range(len(members)) if t < len(batches[r])], device=w.device)
                w[rows] = w[rows] - cfg.lr * lam * (w[rows] - theta[rows])
                losses.append(result.loss)
        self.personal.scatter(members, theta)
        return w, mean_finite(torch.cat(losses)) if losses else float("nan")

    def client_params(self) -> torch.Tensor:
        return self.global_for_held_out(self.personal.full().clone())

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone (their personal models; the global one for held-out clients)."""
        return self.global_for_held_out(self.personal.gather(clients), clients)

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """The personalized models read from their store group by group of slots (no ``[m, P]`` copy of them)."""
        return self.evaluate_in_groups(split, clients)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "personal": self.personal.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.personal.load_state_dict(state["personal"])
