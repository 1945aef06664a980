"""Ditto: a global model trained as FedAvg, and per client a personal model pulled towards it.

Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021, eq. (2) and Algorithm 1. Client k's personal
model v_k solves

    min_v  h_k(v; w*) = F_k(v) + (lambda / 2) ||v - w*||^2,

where w* is the global model of the usual federated objective. Each round a
participant receives w^t, (1) trains a copy of it on F_k as FedAvg's clients do
and uploads it (Algorithm 1's UPDATE_GLOBAL), and (2) trains its own v_k on the
gradient of h_k with w^t as the anchor (the engine's ``GradientCorrection``),
keeping v_k on the device; the server averages the arrived uploads by sample
count. Client k is evaluated with v_k; a held-out client (never trained) with
the global model.

Both trainings use the round's ``(seed, round, "train")`` shuffles and the
scenario's optimizer (each with its own per-client state under
``keep_optimizer_state``), and the personal update takes as many steps as the
global one (Algorithm 1's s local iterations = the scenario's local epochs).
So lambda = 0 makes v_k Local's model exactly, and the global model is FedAvg's
for every lambda (both tested). ``train_loss`` is the personal models' loss F_k
(without the proximal term). Payload: w^t down, one model up; work 2 (two
local trainings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import ClientOptimizerState, Context, MixingAlgorithm, StepInfo, register
from wirelessfl.algorithms.specs.ditto import SPEC
from wirelessfl.learning.lockstep import EvalResult, GradientCorrection


@register
class Ditto(MixingAlgorithm):
    """FedAvg's global model (``models``) plus personal models in the client store ``personal`` (``[m, P]`` rows);
    see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.personal = ctx.stores.new("personal", ctx.num_clients, self.models[0])  # every client's v_k, from the initial model
        self.personal_optimizer = ClientOptimizerState(ctx)

    def client_work(self) -> float:
        """Two trainings a round: the global model's and the personal one's."""
        return 2.0

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        start = self.received(members)
        trained, global_loss = self.train_clients(round, members, start)
        pull = GradientCorrection(float(self.params.lambda_), anchor=start)
        personal, loss = self.train_clients(round, members, self.personal.gather(members), pull, self.personal_optimizer)
        self.personal.scatter(members, personal)
        uploads = {int(i): trained[r] for r, i in enumerate(members) if int(i) in arrived}
        self.models = self.server_update(self.models, self.aggregate(uploads), bool(uploads))
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra={"global_train_loss": global_loss})

    def client_params(self) -> torch.Tensor:
        return self.global_for_held_out(self.personal.full().clone())

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone (their personal models; the global one for held-out clients)."""
        return self.global_for_held_out(self.personal.gather(clients), clients)

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """The personal models read from their store group by group of slots (no ``[m, P]`` copy of them)."""
        return self.evaluate_in_groups(split, clients)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "personal": self.personal.state_dict(),
            "personal_optimizer": self.personal_optimizer.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.personal.load_state_dict(state["personal"])
        self.personal_optimizer.load_state_dict(state["personal_optimizer"])
