"""FedEM: federated expectation-maximization over a mixture of M shared components.

Marfoq, Neglia, Bellet, Kameni, Vidal, "Federated Multi-Task Learning under a
Mixture of Distributions", NeurIPS 2021 (fedem-mixture-of-distributions.txt),
eq. 3-10, Alg. 1 (§3.2) and the unseen-client procedure of §2 and §3.2 (Table 3).

Every client's data is a mixture of M distributions; component m is a model
theta_m shared by all clients, and client t has its own mixture weights pi_t.
Each round (Alg. 1) the server broadcasts theta_1..theta_M; participant t runs

    E-step  q_t(z_i = m)  proportional to  pi_tm exp(-l(theta_m; x_i, y_i))      (eq. 8)
    M-step  pi_tm = (1 / n_t) sum_i q_t(z_i = m)                                 (eq. 9)

over its training samples (l is the cross-entropy, so exp(-l) = p_m(y | x), eq. 3),
then local SGD on every component with q_t(z_i = m) as per-sample loss weights
(the local solver of eq. 10, Alg. 1 line 7) and uploads the M components. The
server sets ``theta_m = sum_t n_t theta_{m,t} / sum_t n_t`` (Alg. 1 line 10: the
weights are the sample counts n_t / n, not responsibilities), renormalised over
the clients whose uploads arrived, as FedAvg does here; a component keeps its
model when nobody arrived. With M = 1 every q is 1 and FedEM is FedAvg.

With ``ctx.keep_optimizer_state`` every (client, component) pair keeps its own
optimizer state between the rounds it takes part in.

Client t predicts with the pi_t-weighted mixture of the components' predictive
distributions (eq. 5), so ``evaluate`` scores that mixture (accuracy and the
mixture's negative log-likelihood); ``client_params`` (one model per client) is
each client's component with the largest pi, for the places that need a single
model.

Unseen clients (Table 3): the scenario's held-out clients
(``training.unseen_fraction``, the same for every algorithm of a run) never train. After every round each fits its pi on its own training split
with the components frozen, starting from uniform weights as a newly arriving
client would: ``unseen_em_steps`` EM iterations of eq. 8-9 on pi alone (default
1, the "one E-step (8) and the first update in the M-step (9)" of §3.2; more
steps climb towards the maximum-likelihood pi of §2, which is concave in pi).

Each round's diagnostics say how the participants mix the components (:func:`mixture_use`).

Network cost: one broadcast of M models to the participants, M models uploaded
and M components trained per participant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import (
    Algorithm,
    ClientOptimizerState,
    Context,
    StepInfo,
    mean_finite,
    register,
    torch_generator,
)
from wirelessfl.algorithms.specs.fedem import SPEC
from wirelessfl.learning.lockstep import EvalResult
from wirelessfl.seam import CommPlan, Stream


def batched_e_step(pi: torch.Tensor, log_lik: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 8 and 9 for T clients at once: ``(q [T, M, N], new pi [T, M])``.

    ``pi`` ``[T, M]``, ``log_lik`` ``[T, M, N]`` padded to the longest client,
    ``mask`` ``[T, N]`` True on real samples. A client with no samples keeps its pi.
    """
    pi = pi.double().to(log_lik.device)
    q = torch.softmax(torch.log(pi).unsqueeze(-1) + log_lik, dim=1)
    real = mask.to(q.device).unsqueeze(1)
    count = real.sum(-1)
    new = torch.where(count > 0, (q * real).sum(-1) / count.clamp(min=1), pi)
    return q, new


def mixture_use(pi: torch.Tensor) -> dict[str, Any]:
    """How the participants mix the components, from their new pi ``[T, M]`` (the round's diagnostics).

    ``mixture_components_used``: the mean over clients of exp(entropy of pi_t), the number of components a
    client effectively uses (1: one component, as clustered FL; M: uniform, an ensemble of M FedAvg models
    that each see 1/M of the gradient). ``mixture_top_weight``: the mean of each client's largest weight.
    ``component_share``: the mean pi over clients, each component's share of the responsibilities.
    """
    pi = pi.double().cpu()
    entropy = -(pi * torch.log(pi.clamp(min=1e-300))).sum(-1)
    return {
        "mixture_components_used": float(torch.exp(entropy).mean()),
        "mixture_top_weight": float(pi.max(-1).values.mean()),
        "component_share": [float(v) for v in pi.mean(0)],
    }


def e_step(pi: torch.Tensor, log_lik: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 8 and 9 for one client: ``(q [n, M], new pi [M])`` from pi ``[M]`` and log p_m ``[M, n]``."""
    q, new = batched_e_step(pi[None], log_lik[None], torch.ones((1, log_lik.shape[1]), dtype=torch.bool))
    return q[0].T, new[0]


def batched_mixture_scores(pi: torch.Tensor, log_probs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(accuracy ``[T]``, mean NLL ``[T]``) of the eq. 5 predictor ``sum_m pi_m p_m`` for T padded clients.

    ``log_probs`` ``[T, M, N, C]`` (log-softmax of each component), ``labels`` and
    ``mask`` ``[T, N]``; a client with no samples gets NaN.
    """
    log_mix = torch.logsumexp(torch.log(pi.double().to(log_probs.device))[:, :, None, None] + log_probs, dim=1)
    labels = labels.to(log_mix.device).long()
    real = mask.to(log_mix.device)
    count = real.sum(-1).double()
    correct = ((log_mix.argmax(-1) == labels) & real).sum(-1).double()
    nll = -(log_mix.gather(-1, labels.unsqueeze(-1)).squeeze(-1) * real).sum(-1)
    return correct / count, nll / count


def mixture_scores(pi: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean NLL) of the eq. 5 predictor ``sum_m pi_m softmax(logits_m)`` on one dataset.

    ``logits`` is ``[M, n, C]``; an empty dataset gives ``(nan, nan)``.
    """
    mask = torch.ones((1, len(labels)), dtype=torch.bool)
    accuracy, nll = batched_mixture_scores(pi[None], torch.log_softmax(logits.double(), dim=-1)[None], labels[None], mask)
    return float(accuracy[0]), float(nll[0])


@register
class FedEM(Algorithm):
    """M shared components, per-client mixture weights, EM rounds (Alg. 1)."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        self.M = self.params.components
        m = ctx.num_clients
        self.components = ctx.arch.init_flat(self.M, torch_generator(ctx.seed, "init")).to(ctx.device)
        self.pi = torch.full((m, self.M), 1.0 / self.M, dtype=torch.float64)
        self._held_out = ctx.held_out.copy()
        self.optimizer_state = ClientOptimizerState(ctx, rows=m * self.M)  # row i * M + c: client i, component c

    # -- plan -----------------------------------------------------------------
    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        return CommPlan(
            streams=(Stream(float(self.M), frozenset(int(i) for i in members), "components"),),
            uplink={int(i): float(self.M) for i in members},
            work={int(i): float(self.M) for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    # -- step -----------------------------------------------------------------
    def component_log_likelihoods(self, clients: Sequence[int], split: str) -> list[torch.Tensor]:
        """Per client, ``[M, n]`` log p_m(y | x) on its ``split`` data; (client, component) pairs are slots."""
        log_lik, mask = self._padded_log_likelihoods(clients, split)
        return [log_lik[k, :, : int(mask[k].sum())] for k in range(len(clients))]

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        """Alg. 1 lines 2-10; then the held-out clients refit pi.

        Slot ``r * M + c`` is participant r's copy of component c. ``train_loss``
        is the mean over participants of ``sum_c`` (q-weighted cross-entropy of
        slot c), the local objective of eq. 10 (FedAvg's loss when M = 1).
        """
        members = self.participants(round)
        M, T = self.M, len(members)
        with self.ctx.engine.phase("fedem e-step"):
            log_lik, mask = self._padded_log_likelihoods(members, "train")
            q, pi = batched_e_step(self.pi[members], log_lik, mask)
        self.pi[members] = pi.cpu()
        sizes = mask.sum(-1).tolist()
        sets = self.ctx.train_sets(members)
        slots = (members[:, None] * M + np.arange(M)).reshape(-1)
        result = self.ctx.engine.train(
            self.components.repeat(T, 1),
            [s for s in sets for _ in range(M)],
            self.ctx.train,
            torch_generator(self.ctx.seed, round, "train"),
            sample_weights=[q[r, c, : sizes[r]].float() for r in range(T) for c in range(M)],
            opt_state=self.optimizer_state.take(slots),
        )
        self.optimizer_state.put(slots, result.opt_state)
        trained = result.params.view(T, M, -1)
        per_client = result.loss.view(T, M).sum(dim=1)
        loss = mean_finite(per_client)
        rows = [r for r, i in enumerate(members) if int(i) in arrived]
        if rows:
            sizes = self.ctx.sizes()[members[rows]]
            weights = torch.as_tensor(sizes / sizes.sum(), dtype=torch.float64).to(trained.dtype).to(trained.device)
            self.components = torch.einsum("t,tmp->mp", weights, trained[rows])
        extra: dict[str, Any] = mixture_use(pi)
        if len(self._held_out):
            self.fit_unseen()
            extra["unseen_acc"] = float(self._mixture_eval(self._held_out, "test")[0].mean())
        return StepInfo(train_loss=loss, aggregated=len(rows), extra=extra)

    def fit_unseen(self) -> None:
        """Refit every held-out client's pi on its training split, components frozen (§2, §3.2).

        From uniform weights, ``unseen_em_steps`` EM iterations of eq. 8-9 on pi
        alone; a client without training samples keeps its pi.
        """
        log_lik, mask = self._padded_log_likelihoods(self._held_out, "train")
        pi = torch.full((len(self._held_out), self.M), 1.0 / self.M, dtype=torch.float64)
        for _ in range(int(self.params.unseen_em_steps)):
            _, pi = batched_e_step(pi, log_lik, mask)
        has_data = mask.any(-1).cpu()
        held = torch.as_tensor(self._held_out)
        self.pi[held[has_data]] = pi.cpu()[has_data]

    # -- evaluation -----------------------------------------------------------
    def _sets(self, clients: Sequence[int], split: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return self.ctx.split_sets(split, clients)

    def _padded_log_probs(self, clients: Sequence[int], split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every component's log-softmax on every client's ``split``, padded: ``[T, M, N, C]``, labels and mask ``[T, N]``.

        (client, component) pairs are slots of one lockstep pass; the per-client
        arithmetic of eq. 5 and 8-9 then runs once over the padded batch.
        """
        M, T = self.M, len(clients)
        sets = self._sets(clients, split)
        flat = self.ctx.engine.logits(self.components.repeat(T, 1), [s for s in sets for _ in range(M)])
        logits = torch.nn.utils.rnn.pad_sequence(flat, batch_first=True) if flat else torch.zeros((0, 0, self.ctx.arch.num_classes))
        longest = logits.shape[1]
        log_probs = torch.log_softmax(logits.double(), dim=-1).view(T, M, longest, -1)
        labels = torch.zeros((T, longest), dtype=torch.int64, device=logits.device)
        mask = torch.zeros((T, longest), dtype=torch.bool, device=logits.device)
        for k, (_, y) in enumerate(sets):
            labels[k, : len(y)] = y.to(logits.device)
            mask[k, : len(y)] = True
        return log_probs, labels, mask

    def _padded_log_likelihoods(self, clients: Sequence[int], split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``[T, M, N]`` log p_m(y | x) of every client's ``split`` samples (padded) and the ``[T, N]`` mask."""
        log_probs, labels, mask = self._padded_log_probs(clients, split)
        index = labels.unsqueeze(1).unsqueeze(-1).expand(*log_probs.shape[:-1], 1)
        return log_probs.gather(-1, index).squeeze(-1), mask

    def _mixture_eval(self, clients: Sequence[int], split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(accuracy ``[T]``, NLL ``[T]``) of each client's eq. 5 mixture on its ``split``."""
        log_probs, labels, mask = self._padded_log_probs(clients, split)
        return batched_mixture_scores(self.pi[torch.as_tensor(clients)], log_probs, labels, mask)

    def evaluate(self, split: str = "test") -> EvalResult:
        """Every client's eq. 5 mixture on its own split: accuracy and the mixture's NLL."""
        clients = np.arange(self.ctx.num_clients)
        accuracy, loss = self._mixture_eval(clients, split)
        device = self.ctx.device
        count = torch.tensor([len(y) for _, y in self._sets(clients, split)], dtype=torch.int64, device=device)
        return EvalResult(
            accuracy=accuracy.to(device, torch.float32),
            loss=loss.to(device, torch.float32),
            count=count,
        )

    def client_params(self) -> torch.Tensor:
        """``[m, P]``: each client's most weighted component (only where one model per client is needed)."""
        best = torch.as_tensor(np.argmax(self.pi.numpy(), axis=1), device=self.components.device)
        return self.components[best]

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone: each one's most weighted component."""
        best = np.argmax(self.pi[torch.as_tensor(clients, dtype=torch.long)].numpy(), axis=1)
        return self.components[torch.as_tensor(best, device=self.components.device)]

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "components": self.components.detach().cpu().clone(),
            "pi": self.pi.clone(),
            "optimizer": self.optimizer_state.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.components = state["components"].to(self.ctx.device)
        self.pi = state["pi"].clone().double()
        self.optimizer_state.load_state_dict(state.get("optimizer"))
