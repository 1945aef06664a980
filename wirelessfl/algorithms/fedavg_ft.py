"""FedAvg+ : FedAvg, then local fine-tuning of the global model before evaluation.

Named FedAvg+ in Marfoq, Neglia, Bellet, Kameni, Vidal, "Federated Multi-Task
Learning under a Mixture of Distributions", NeurIPS 2021
(fedem-mixture-of-distributions.txt, §4 "Other FL approaches": "FedAvg with
local tuning (FedAvg+) [27] ... updated the local model through a single pass
on the local dataset"); [27] is Jiang, Konecny, Rush, Kannan, "Improving
Federated Learning Personalization via Model Agnostic Meta Learning",
arXiv:1909.12488.

The global model trains exactly as FedAvg. Client i's own model is a copy of
the current global model fine-tuned on client i's training data for
``finetune_epochs`` epochs (default 1, the single pass of the paper; a
fraction is a fraction of an epoch's batches; 0 is plain FedAvg) with the
scenario's local optimizer (rate ``finetune_lr``, default ``train.lr``). All
clients fine-tune together in one ``engine.train`` call, lazily when the
clients' models are asked for (evaluation), from a generator derived from
(seed, round, "finetune"), so the result is a function of the state and the
round. The fine-tuning optimizer starts fresh each time, unless
``keep_optimizer_state``: then each client's fine-tuning keeps its own
optimizer state from one evaluation to the next, apart from the training
optimizer's, as the FedEM authors' code does (omarfoq/FedEM, client.py: the
tuned learners are a deepcopy of the learners, optimizer included, made once,
and ``update_tuned_learners`` copies the global weights into them and fits
them at every logged round).

Fine-tuning is not counted as work in the CommPlan: the fine-tuned copy never
leaves the device and never feeds back into the global model, so it does not
delay any round; in the paper's protocol it is done once, on the model a client
deploys, not in every round. The per-round plan is FedAvg's. (Its one-off cost
is finetune_epochs / train.epochs local rounds per client, at deployment.)

Its training is FedAvg's round for round (``trains_as``): a scenario that
also runs FedAvg with the same training trains the global model once, and
this curve fine-tunes that model at each evaluation (``follow``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import ClientOptimizerState, Context, StepInfo, register, torch_generator
from wirelessfl.algorithms.specs.fedavg_ft import SPEC
from wirelessfl.algorithms.fedavg import FedAvg


@register
class FedAvgFineTuned(FedAvg):
    """FedAvg whose clients evaluate a locally fine-tuned copy; see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.round = 0
        self._tuned: torch.Tensor | None = None
        self.finetune_state = ClientOptimizerState(ctx)

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        info = super().step(round, arrived)
        self.round = int(round)
        self._tuned = None
        return info

    def global_params(self) -> torch.Tensor:
        """``[m, P]``: the FedAvg model every client receives (before fine-tuning)."""
        return super().client_params()

    def client_params(self) -> torch.Tensor:
        if self._tuned is None:
            self._tuned = self.fine_tune(self.global_params())
        return self._tuned

    def fine_tune(self, start: torch.Tensor) -> torch.Tensor:
        """Every client's fine-tuned copy of its row of ``start``, in one lockstep call."""
        epochs = float(self.params.finetune_epochs)
        if epochs == 0:
            return start
        cfg = self.ctx.train
        if self.params.finetune_lr is not None:
            cfg = replace(cfg, lr=float(self.params.finetune_lr))
        clients = np.arange(self.ctx.num_clients)
        result = self.ctx.engine.train(
            start,
            self.ctx.train_sets(clients),
            cfg,
            torch_generator(self.ctx.seed, self.round, "finetune"),
            epochs=[epochs] * len(clients),
            opt_state=self.finetune_state.take(clients),
        )
        self.finetune_state.put(clients, result.opt_state)
        return result.params

    def follow(self, trainer: FedAvg, round: int) -> None:
        """FedAvg's state after ``round``: the global model this curve fine-tunes when evaluated."""
        FedAvg.load_state_dict(self, trainer.state_dict())
        self.round = int(round)
        self._tuned = None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "round": self.round, "finetune_optimizer": self.finetune_state.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.round = int(state["round"])
        self._tuned = None
        self.finetune_state.load_state_dict(state.get("finetune_optimizer"))
