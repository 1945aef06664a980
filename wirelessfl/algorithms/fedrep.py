"""FedRep: a shared representation (body) averaged by the server, a personal head trained first on frozen features.

Collins, Hassani, Mokhtari, Shakkottai, "Exploiting Shared Representations for
Personalized Federated Learning", ICML 2021, Algorithm 1. Each round a
participant receives the body phi^t and, with its own head h_i,

1. trains the head alone for tau_h epochs, the body frozen (Algorithm 1's
   head updates; ``head_epochs``, default 10 as the paper's §5 experiments);
2. then trains the body alone for the scenario's local epochs, the new head
   frozen (the body updates), and uploads the body.

The server sets phi^{t+1} to the n_i-weighted mean of the arrived bodies (the
paper's 1/(rn) sum, equal for equal sizes; FedPer's rule). Client i is
evaluated with (phi, h_i). The head is chosen as FedPer's: ``personal_layers``
counts modules with parameters from the output (default 1, the head).

Exactness: ``personal_layers: 0`` puts every layer in the body. There is then
no head to train (step 1 is skipped, it would draw nothing) and step 2 trains
every parameter with FedAvg's shuffles ``(seed, round, "train")`` and optimizer
state, so FedRep is FedAvg exactly (tested through ``simulate``). With a head,
``head_epochs: 0`` is not FedPer: the body is trained under a head that never
moves, where FedPer trains both together; no other setting reduces to a
baseline, which is why the check is the empty head.

CommPlan: the body down and up, payload (P - head)/P. Work per participant:
the body epochs are ordinary training (1); a head epoch is a forward pass (1/3)
plus a backward pass that stops at the head (autograd skips the frozen body),
2/3 of a training pass times the head's share of the parameters, so
work = 1 + (tau_h / E) (1/3 + (2/3) head/P).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from wirelessfl.algorithms.base import (
    FORWARD_COST, Algorithm, ClientOptimizerState, Context, StepInfo, mean_finite, register,
    torch_generator,
)
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.algorithms.specs.fedrep import SPEC
from wirelessfl.algorithms.fedper import SharedBody, no_body_message, personal_names
from wirelessfl.seam import CommPlan, Stream


@register
class FedRep(SharedBody, Algorithm):
    """Body ``body`` ``[P_body]`` shared, heads ``heads`` ``[m, P_head]`` personal; see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        arch, layers = ctx.arch, self.params.personal_layers
        if layers >= len(arch.layers):
            if len(arch.layers) == 1:
                raise ParamError(no_body_message(self.name, arch), self.name)
            raise ParamError(
                f"fedrep: personal_layers must be < {len(arch.layers)} (model {arch.name!r} has {len(arch.layers)} layers "
                f"with parameters and at least one must be shared), got {layers}", self.name, "personal_layers",
            )
        self.split = arch.split(personal_names(arch, layers))
        self.personal_mask = self.split.mask
        init = arch.init_flat(1, torch_generator(ctx.seed, "init")).to(ctx.device)[0]
        self.body = self.split.shared(init).clone()
        self.heads = ctx.stores.new("heads", ctx.num_clients, self.split.personal(init))  # every client's personal layers
        self.weights = torch.as_tensor(ctx.sizes(), dtype=torch.float64)
        self.head_optimizer = ClientOptimizerState(ctx)

    @property
    def trains_head(self) -> bool:
        return bool(self.personal_mask.any()) and self.params.head_epochs > 0

    def plan(self, round: int) -> CommPlan:
        members = frozenset(int(i) for i in self.participants(round))
        fraction = self.split.shared_fraction
        work = 1.0
        if self.trains_head:
            head_share = float(self.personal_mask.sum()) / self.ctx.arch.param_count
            work += self.params.head_epochs / max(self.ctx.train.epochs, 1) * (FORWARD_COST + 2 * FORWARD_COST * head_share)
        return CommPlan(
            streams=(Stream(fraction, members, "body"),),
            uplink={i: fraction for i in members},
            work={i: work for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        start = self.split.join(self.body.expand(len(members), -1), self.heads.gather(members))
        if self.trains_head:
            head_cfg = replace(self.ctx.train, epochs=int(self.params.head_epochs))
            result = self.ctx.engine.train(
                start, self.ctx.train_sets(members), head_cfg, torch_generator(self.ctx.seed, round, "train-head"),
                trainable=self.personal_mask, opt_state=self.head_optimizer.take(members),
            )
            self.head_optimizer.put(members, result.opt_state)
            start = result.params
            self.heads.scatter(members, self.split.personal(start))
        trained, loss = self.train_clients(round, members, start, trainable=~self.personal_mask)
        shared = self.split.shared(trained)
        uploads = {int(i): shared[r] for r, i in enumerate(members) if int(i) in arrived}
        self.body = self.aggregate(uploads)
        head_loss = mean_finite(result.loss) if self.trains_head else float("nan")
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra={"head_train_loss": head_loss})

    def aggregate(self, uploads: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """``sum_j n_j phi_j / sum_j n_j`` over the arrived bodies; none arrived keeps the body."""
        if not uploads:
            return self.body
        clients = sorted(uploads)
        stacked = torch.stack([uploads[i] for i in clients])
        weights = self.weights[clients]
        return (weights / weights.sum()).to(stacked.device, stacked.dtype) @ stacked

    def state_dict(self) -> dict[str, Any]:
        return {
            "body": self.body.detach().cpu().clone(),
            "heads": self.heads.state_dict(),
            "optimizer": self.optimizer_state.state_dict(),
            "head_optimizer": self.head_optimizer.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.body = state["body"].to(self.ctx.device).clone()
        self.heads.load_state_dict(state["heads"])
        self.optimizer_state.load_state_dict(state["optimizer"])
        self.head_optimizer.load_state_dict(state["head_optimizer"])
