"""APFL: each client mixes a personal model v_i with the global model w by a weight alpha_i.

Deng, Kamani, Mahdavi, "Adaptive Personalized Federated Learning", arXiv:2003.13461,
2020, Algorithm 1 (local descent APFL). Client i keeps v_i and alpha_i; its
personalized model is

    v_bar_i = alpha_i v_i + (1 - alpha_i) w.

At every local step t, on the step's batch xi_t, a participant takes

    w_i^t = w_i^{t-1} - eta grad f_i(w_i^{t-1}; xi_t)                      (FedAvg's local step)
    v_i^t = v_i^{t-1} - eta alpha_i grad f_i(v_bar_i^{t-1}; xi_t)          (the chain rule through v_bar)

and, with ``adaptive_alpha`` (§3.3, the alpha step),

    alpha_i <- alpha_i - eta_alpha <v_i^{t-1} - w_i^{t-1}, grad f_i(v_bar_i^{t-1}; xi_t)>,

clipped to [0, 1] (ours: v_bar stays a convex combination). The server
averages the uploaded w_i as FedAvg does. Client i is evaluated with v_bar_i
built on the current global model; a held-out client with the global model.

How it is computed: the w_i are trained by the one lockstep call FedAvg makes
(``train_clients``), so the global model is FedAvg's for every alpha, and
alpha = 0 (v_bar = w) is FedAvg's trace exactly (tested through ``simulate``).
The personal step needs w_i^{t-1} at every step, which one lockstep call does
not expose, so a second pass retraces w_i step by step on the same batches
(one-step engine calls with the same optimizer and state) beside v_i; the two
w trajectories agree up to float rounding (the order of a batch's samples in
the sum). Departures: v_i takes the paper's plain SGD step at the round's
client rate whatever the scenario's optimizer, and the gradient at v_bar is
taken in evaluation mode (no dropout).

CommPlan: FedAvg's payload (w down, w up). Work 2: each local step is a
training pass at w_i and another at v_bar_i (the alpha step is a dot product);
the retracing pass is the simulator's, not the device's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import Context, MixingAlgorithm, StepInfo, mean_finite, register, torch_generator
from wirelessfl.algorithms.specs.apfl import SPEC
from wirelessfl.learning.lockstep import EvalResult, shuffle_schedule


@register
class APFL(MixingAlgorithm):
    """FedAvg's global model ``models``, personal models in the client store ``personal`` (``[m, P]`` rows) and
    weights ``alpha`` ``[m]``."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.personal = ctx.stores.new("personal", ctx.num_clients, self.models[0])  # every client's v_i
        self.alpha = torch.full((ctx.num_clients,), float(self.params.alpha), dtype=torch.float64)

    def client_work(self) -> float:
        """Two passes a local step: one at w, one at the mixed model (the retracing pass is the simulator's, not the device's)."""
        return 2.0

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        start = self.received(members)
        kept_state = self.optimizer_state.take(members)
        trained, loss = self.train_clients(round, members, start)
        grad_norm = self.personalize(round, members, start, kept_state)
        uploads = {int(i): trained[r] for r, i in enumerate(members) if int(i) in arrived}
        self.models = self.server_update(self.models, self.aggregate(uploads), bool(uploads))
        extra = {"personal_grad_norm": grad_norm, "mean_alpha": float(self.alpha[self.ctx.training_clients()].mean())}
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra=extra)

    def personalize(self, round: int, members: np.ndarray, start: torch.Tensor, kept_state: tuple | None) -> float:
        """Retrace each member's w step by step on the round's batches and take the v (and alpha) steps beside it;
        returns the mean norm of the gradients at v_bar."""
        cfg, data = self.ctx.train, self.ctx.data
        sizes = [len(data.clients[int(i)].y_train) for i in members]
        batches = shuffle_schedule(sizes, cfg.batch_size, [float(cfg.epochs)] * len(members), torch_generator(self.ctx.seed, round, "train"))
        w, v, alpha = start.clone(), self.personal.gather(members), self.alpha[members].clone()
        one_step = replace(cfg, epochs=1)
        state, norms = kept_state, []
        with self.ctx.engine.uncached():  # each step's batches are new tensors: a copy kept would never be read again
            for t in range(max((len(b) for b in batches), default=0)):
                active = [r for r in range(len(members)) if t < len(batches[r])]
                sets = []
                for r, i in enumerate(members):
                    x, y = data.clients[int(i)].x_train, data.clients[int(i)].y_train
                    chosen = batches[r][t] if t < len(batches[r]) else torch.zeros(0, dtype=torch.long)  # done: no step
                    sets.append((x[chosen], y[chosen]))
                rows = torch.as_tensor(active, device=w.device)
                a = alpha[active].to(w.dtype)[:, None].to(w.device)
                mixed = a * v[rows] + (1 - a) * w[rows]
                grad = self.ctx.engine.full_gradient(mixed, [sets[r] for r in active])
                norms.append(grad.norm(dim=1))
                if self.params.adaptive_alpha:
                    slope = ((v[rows] - w[rows]) * grad).sum(1).double().cpu()
                    alpha[active] = (alpha[active] - float(self.params.alpha_lr) * slope).clamp(0.0, 1.0)
                v[rows] = v[rows] - cfg.lr * a * grad
                result = self.ctx.engine.train(w, sets, one_step, torch_generator(self.ctx.seed, round, "apfl-retrace", t), opt_state=state)
                w, state = result.params, result.opt_state
        self.personal.scatter(members, v)
        self.alpha[members] = alpha
        return mean_finite(torch.cat(norms)) if norms else float("nan")

    def mixed(self, personal: torch.Tensor, clients: np.ndarray) -> torch.Tensor:
        """v_bar of ``clients`` from their rows ``personal`` of v: ``alpha_i v_i + (1 - alpha_i) w``."""
        alpha = self.alpha[torch.as_tensor(clients, dtype=torch.long)].to(self.models.dtype).to(self.models.device)[:, None]
        return alpha * personal + (1 - alpha) * self.models[0]

    def client_params(self) -> torch.Tensor:
        return self.global_for_held_out(self.mixed(self.personal.full(), np.arange(self.ctx.num_clients)))

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone, mixed as :meth:`client_params` mixes them (element by element: the same numbers)."""
        return self.global_for_held_out(self.mixed(self.personal.gather(clients), clients), clients)

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """v_bar made group by group of slots from the rows read from the store (no ``[m, P]`` of them)."""
        return self.evaluate_in_groups(split, clients)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "personal": self.personal.state_dict(), "alpha": self.alpha.clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.personal.load_state_dict(state["personal"])
        self.alpha = state["alpha"].to(torch.float64).clone()
