"""SCAFFOLD: FedAvg whose local steps are corrected by control variates, c - c_i.

Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, "SCAFFOLD: Stochastic
Controlled Averaging for Federated Learning", ICML 2020, Algorithm 1. The
server keeps the model x and a control variate c; client i keeps c_i (all zero
at start). A participant receives (x, c), takes K_i local steps on

    g_i(y) - c_i + c                                        (line 10)

(the engine's ``GradientCorrection`` with offset c - c_i), sets, by option II,

    c_i+ = c_i - c + (x - y_i) / (K_i eta_l)                (line 12)

and uploads (y_i - x, c_i+ - c_i). The server takes, over the uploads that
arrived,

    x <- x + eta_g sum_i w_i (y_i - x)                      (line 16)
    c <- c + (1/N) sum_i (c_i+ - c_i)                       (line 17)

with N the training clients. K_i is the steps client i took (its epochs over
its batches), eta_l the round's client rate. With c = c_i = 0 (round 1) the
local training is FedAvg's, and with eta_g = 1 the new x is FedAvg's average
(tested through ``simulate``).

Departures, each said here: w_i = n_i / sum n over the arrived clients
(FedAvg's weights; the paper's 1/|S| is the same for equal sizes); a client
commits c_i+ only when its upload arrived, so c stays the mean of the c_i (a
lost upload loses the client's whole round, as for its model). Option II's
(x - y_i)/(K_i eta_l) is the mean gradient of plain SGD steps; with momentum it
is the mean update per step over the rate. A client that took no step
(``epochs = 0``, possible through the API only) keeps its c_i: line 12's
(x - y_i)/(K_i eta_l) is 0/0 there.

CommPlan: x and c down (payload 2), y_i - x and c_i+ - c_i up (payload 2),
work 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from wirelessfl.algorithms.base import Context, MixingAlgorithm, StepInfo, register
from wirelessfl.algorithms.specs.scaffold import SPEC
from wirelessfl.learning.lockstep import GradientCorrection
from wirelessfl.learning.schedule import slot_steps
from wirelessfl.seam import CommPlan, Stream


@register
class Scaffold(MixingAlgorithm):
    """FedAvg's server model ``models`` plus ``control`` (c, ``[P]``) and ``client_controls`` (c_i, ``[m, P]``)."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.control = torch.zeros(ctx.arch.param_count, device=ctx.device)
        self.client_controls = torch.zeros(ctx.num_clients, ctx.arch.param_count, device=ctx.device)

    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        return CommPlan(
            streams=(Stream(2.0, frozenset(int(i) for i in members), "model+control"),),
            uplink={int(i): 2.0 for i in members},
            work={int(i): 1.0 for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        index = torch.as_tensor(members, device=self.models.device)
        start = self.received(members)
        offset = self.control[None, :] - self.client_controls[index]
        correction = GradientCorrection(offset=offset) if bool(offset.any()) else None
        trained, loss = self.train_clients(round, members, start, correction)
        cfg = self.ctx.train
        steps = slot_steps([int(n) for n in self.ctx.sizes()[members]], cfg.batch_size, [float(cfg.epochs)] * len(members))
        steps_t = torch.as_tensor(steps, dtype=trained.dtype, device=trained.device)
        refreshed = -offset + (start - trained) / (steps_t[:, None] * cfg.lr)
        refreshed = torch.where(steps_t[:, None] > 0, refreshed, self.client_controls[index])
        took = [r for r, i in enumerate(members) if int(i) in arrived]
        uploads = {int(members[r]): trained[r] for r in took}
        averaged = self.aggregate(uploads)
        rate = float(self.params.server_lr)
        self.models = averaged if rate == 1.0 else self.models + rate * (averaged - self.models)
        if took:
            rows = torch.as_tensor(took, device=trained.device)
            delta = refreshed[rows] - self.client_controls[index[rows]]
            self.control = self.control + delta.sum(0) / len(self.ctx.training_clients())
            self.client_controls[index[rows]] = refreshed[rows]
        return StepInfo(train_loss=loss, aggregated=len(uploads))

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "control": self.control.detach().cpu().clone(),
            "client_controls": self.client_controls.detach().cpu().clone(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.control = state["control"].to(self.ctx.device).clone()
        self.client_controls = state["client_controls"].to(self.ctx.device).clone()
