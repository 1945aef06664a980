"""FedMoE: IFCA with epsilon-greedy cluster choice plus a per-client mixture of experts.

Isaksson, Listo Zec, Cöster, Gillblad, Girdzijauskas, "Adaptive Expert Models
for Personalization in Federated Learning" (adaptive-expert-models.txt),
§3.1 eq. 5, Algorithms 1-4, §4.3 and Table 1.

The federation is :class:`~wirelessfl.algorithms.ifca.IFCA` with epsilon-greedy
exploration (Table 1: epsilon = 0.33). On top, every client k keeps two models
that never leave the device:

* a local expert f_l^k, the same architecture as the cluster models, trained only
  on the client's data with AdamW (Table 1: lr 2.69e-4, weight decay 9.89e-3);
* a gate f_h^k(x) giving softmax weights over the J + 1 experts (the J cluster
  models and the local expert), trained with AdamW (Table 1: lr 3e-6, weight
  decay 6.88e-4) on the negative log-likelihood of the mixture while the experts
  are frozen (the paper's MoE stage trains only the gate on top of the trained
  experts, the authors' ``train_gate_only``). See
  :mod:`wirelessfl.learning.gating` for the gate (a small MLP on x).

The client's prediction is eq. 5 on predictive distributions:
p(y|x) = g_l(x) softmax(f_l^k(x)) + sum_j g_j(x) softmax(f_g^j(x)).

The paper trains the experts first and the gate afterwards; here every round a
participant (1) receives the cluster models, (2) computes their logits on its
training data (which give both IFCA's losses for the cluster choice and the
gate's frozen expert outputs), (3) trains its local expert, (4) trains its gate
over the received cluster models and its new local expert, (5) trains the
chosen cluster model and uploads it. Both on-device optimizers continue across
rounds. The mixture is evaluated with the latest (aggregated) cluster models,
the convention under which every algorithm here evaluates a client's model; the
gate was trained on the versions received at the start of the round.

Which samples the gate learns from (``gate_split``): the paper trains it on the
local data (``train``, the default). There the local expert has just been fit to
those very samples, so a gate that learns fast puts all its weight on the local
expert (measured on digits, p = 0.2, gate lr 0.01: weight 1.0 on the local
expert after 6 rounds, and the mixture equal to the local expert, 85% against
IFCA's 93%); Table 1's gate lr 3e-6 hides that by hardly moving the gate.
``gate_split: val`` trains the gate on the client's validation split, data none
of the experts was fit to (the validation accuracy is then no longer held out).

``client_params()`` returns the chosen cluster model (IFCA's model, ``[m, P]``);
``evaluate`` evaluates the mixture.

Traffic is IFCA's. With early stopping on, a removed cluster model stays an
expert, so its final version goes once more to each participant that does not
hold it (a unicast-or-multicast stream of payload 1 per removed model).

Work per participant (E = train.epochs, F = 1/3 forward/training pass):
1 (the cluster model) + J F / E (logits of all J cluster models, the removed ones
included) + local_epochs / E (the local expert) + F / E (its logits) +
gate_epochs * G / (E * P) (the gate, G its parameters, P the model's: the cost
of a pass taken as proportional to parameters, which overstates the gate for
convolutional models) + the early-stopping validation pass when on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from wirelessfl.algorithms.base import FORWARD_COST, Context, StepInfo, mean_finite, register, torch_generator
from wirelessfl.algorithms.specs.fedmoe import SPEC
from wirelessfl.algorithms.ifca import IFCA
from wirelessfl.learning import optim
from wirelessfl.learning.gating import GateArchitecture, evaluate_mixture, train_gates
from wirelessfl.learning.lockstep import EvalResult
from wirelessfl.seam import Stream


def _assign_rows(full, rows: torch.Tensor, part) -> None:
    """Write a nested optimizer state of some slots back into the state of all clients."""
    if isinstance(full, torch.Tensor):
        full[rows] = part.to(full.device)
        return
    for whole, piece in zip(full, part):
        _assign_rows(whole, rows, piece)


def mean_losses(logits: list[torch.Tensor], labels: list[torch.Tensor], experts: int) -> np.ndarray:
    """``[r, E]`` mean cross-entropy of each expert from per-client logits ``[n_i, E, C]`` (IFCA's choice losses)."""
    rows = [
        F.cross_entropy(z.transpose(1, 2), y.to(z.device).unsqueeze(1).expand(-1, experts), reduction="none").mean(0)
        for z, y in zip(logits, labels)
    ]
    return torch.stack(rows).double().cpu().numpy() if rows else np.zeros((0, experts))


@register
class FedMoE(IFCA):
    """IFCA + epsilon-greedy, with a local expert and a gate per client; see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        m = ctx.num_clients
        adamw = dict(optimizer="adamw", momentum=0.0, nesterov=False)
        self.local_cfg = replace(
            ctx.train, lr=float(self.params.local_lr), weight_decay=float(self.params.local_weight_decay), **adamw
        )
        self.gate_cfg = replace(
            ctx.train, lr=float(self.params.gate_lr), weight_decay=float(self.params.gate_weight_decay), **adamw
        )
        input_dim = int(np.prod(ctx.arch.input_shape))
        self.gate = GateArchitecture(input_dim, self.clusters + 1, int(self.params.gate_hidden))
        self.local = ctx.arch.init_flat(m, torch_generator(ctx.seed, "local-init")).to(ctx.device)
        self.local_opt = optim.build(self.local_cfg).init(self.local)
        self.gates = self.gate.init_flat(m, torch_generator(ctx.seed, "gate-init")).to(ctx.device)
        self.gate_opt = optim.build(self.gate_cfg).init(self.gates)
        self.held = np.zeros((m, self.clusters), dtype=bool)  # client holds the current version of cluster model j

    # -- plan -----------------------------------------------------------------
    def streams_for(self, members: np.ndarray) -> tuple[Stream, ...]:
        """IFCA's broadcast, plus the final version of each removed model to the participants lacking it."""
        streams = list(super().streams_for(members))
        for j in np.flatnonzero(~self.selectable):
            receivers = frozenset(int(i) for i in members if not self.held[i, j])
            if receivers:
                streams.append(Stream(1.0, receivers, f"final-cluster-{j}"))
        return tuple(streams)

    def relative_work(self, client: int) -> float:
        data = self.ctx.data.clients[client]
        epochs = float(max(self.ctx.train.epochs, 1))
        running = bool(self.selectable.any())
        work = (1.0 if running else 0.0) + FORWARD_COST * (self.clusters + 1) / epochs
        work += self.params.local_epochs / epochs
        work += self.params.gate_epochs * self.gate.param_count / (epochs * self.ctx.arch.param_count)
        if running and self.params.early_stopping_patience:
            work += FORWARD_COST * len(data.y_val) / (len(data.y_train) * epochs)
        return work

    # -- step -----------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        index = torch.as_tensor(members, device=self.local.device)
        self.held[members] = True
        train_sets = self.ctx.train_sets(members)
        cluster_logits = self.expert_logits(self.models, members, train_sets)  # per client [n, J, C]
        local_loss = self.train_local(round, members, index, train_sets)
        gate_sets = train_sets if self.params.gate_split == "train" else self.ctx.val_sets(members)
        gate_clusters = cluster_logits if gate_sets is train_sets else self.expert_logits(self.models, members, gate_sets)
        local_logits = self.ctx.engine.logits(self.local[index], gate_sets)
        experts = [torch.cat([c, l.unsqueeze(1)], dim=1) for c, l in zip(gate_clusters, local_logits)]
        gate_loss = self.train_gates(round, members, index, gate_sets, experts)
        extra = {"local_loss": local_loss, "gate_loss": gate_loss}
        if not self.selectable.any():
            return StepInfo(train_loss=float("nan"), aggregated=0, extra={**extra, "stopped": True})
        losses = mean_losses(cluster_logits, [y for _, y in train_sets], self.clusters)
        losses[:, ~self.selectable] = np.inf
        choice = self.choose(round, members, losses)
        val_loss = self.validation_losses(members, choice)
        trained, loss = self.train_chosen(round, members, choice)
        chosen_and_arrived = {int(c) for c, i in zip(choice, members) if int(i) in arrived}
        info = self.finish_round(members, choice, trained, loss, val_loss, arrived)
        for j in chosen_and_arrived:
            self.held[:, j] = False  # model j changed: nobody holds its new version yet
        info.extra.update(extra)
        return info

    def expert_logits(self, models: torch.Tensor, members: np.ndarray, datasets) -> list[torch.Tensor]:
        """Per member, ``[n_i, J, C]`` logits of all cluster models on its data (one lockstep pass)."""
        J = models.shape[0]
        if not len(members):
            return []
        owners = [d for d in datasets for _ in range(J)]
        flat = self.ctx.engine.logits(models.repeat(len(members), 1), owners)
        return [torch.stack(flat[r * J : (r + 1) * J], dim=1) for r in range(len(members))]

    def train_local(self, round: int, members: np.ndarray, index: torch.Tensor, train_sets) -> float:
        """Every participant's local expert, one lockstep AdamW call continuing its optimizer."""
        if not len(members):
            return float("nan")
        result = self.ctx.engine.train(
            self.local[index],
            train_sets,
            self.local_cfg,
            torch_generator(self.ctx.seed, round, "local"),
            epochs=[float(self.params.local_epochs)] * len(members),
            opt_state=optim.select_rows(self.local_opt, index),
        )
        self.local[index] = result.params
        _assign_rows(self.local_opt, index, result.opt_state)
        return mean_finite(result.loss)

    def train_gates(self, round: int, members: np.ndarray, index: torch.Tensor, train_sets, experts) -> float:
        """Every participant's gate over its frozen experts, one batched AdamW run continuing its optimizer.

        ``train_sets`` are the samples the gate learns from: the training split
        (the paper) or, with ``gate_split: val``, the validation split.
        """
        if not len(members):
            return float("nan")
        result = train_gates(
            self.gate,
            self.gates[index],
            [self.ctx.engine.inputs(x) for x, _ in train_sets],
            experts,
            [y for _, y in train_sets],
            self.gate_cfg,
            torch_generator(self.ctx.seed, round, "gate"),
            epochs=[float(self.params.gate_epochs)] * len(members),
            opt_state=optim.select_rows(self.gate_opt, index),
        )
        self.gates[index] = result.params
        _assign_rows(self.gate_opt, index, result.opt_state)
        return mean_finite(result.loss)

    # -- evaluation -----------------------------------------------------------
    def evaluate(self, split: str = "test") -> EvalResult:
        """Every client's mixture (eq. 5) on its own ``split``."""
        clients = np.arange(self.ctx.num_clients)
        sets = self.ctx.split_sets(split, clients)
        cluster_logits = self.expert_logits(self.models, clients, sets)
        local_logits = self.ctx.engine.logits(self.local, sets)
        experts = [torch.cat([c, l.unsqueeze(1)], dim=1) for c, l in zip(cluster_logits, local_logits)]
        return evaluate_mixture(self.gate, self.gates, [self.ctx.engine.inputs(x) for x, _ in sets], experts, [y for _, y in sets])

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        def cpu(state):
            return optim.map_state(lambda t: t.detach().cpu().clone(), state)

        return {
            **super().state_dict(),
            "local": self.local.detach().cpu().clone(),
            "local_opt": cpu(self.local_opt),
            "gates": self.gates.detach().cpu().clone(),
            "gate_opt": cpu(self.gate_opt),
            "held": self.held.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        device = self.ctx.device
        self.local = state["local"].to(device).clone()
        self.local_opt = optim.map_state(lambda t: t.to(device).clone(), state["local_opt"])
        self.gates = state["gates"].to(device).clone()
        self.gate_opt = optim.map_state(lambda t: t.to(device).clone(), state["gate_opt"])
        self.held = np.asarray(state["held"], dtype=bool).copy()
