"""PFLEGO: personalized FL with exact (stochastic) gradient descent on the global loss.

Nikoloutsopoulos, Koutsopoulos, Titsias, "Personalized Federated Learning with
Exact Distributed Stochastic Gradient Descent Updates" (pflego.txt): §3.1
eq. 1-2, §3.2 eq. 3-4, Algorithm 1 and §3.3 eq. 5-6.

The model is a shared body theta and one linear head W_i per client (the last
linear layer, ``arch.head_mask()``). The objective is eq. 1,

    L(psi) = sum_i alpha_i l_i(W_i, theta),  alpha_i = N_i / sum_j N_j,

with l_i the mean cross-entropy over client i's N_i training samples (eq. 2).
The I clients of eq. 1 are the training clients: held-out ones
(``training.unseen_fraction``) are never sampled and have alpha_i = 0, so the
alphas sum to 1 over the clients that train and I/r is unbiased for them.
Round t samples I_t (§3.2.1): ``sampling: fixed`` draws r = |I_t| clients
uniformly (the same draw as every other algorithm's ``participation``);
``sampling: binomial`` lets each client take part independently with
probability ``participation``, and r = I * participation. Either way
P(i in I_t) = r / I. Each participant

* receives theta and takes tau - 1 full-batch gradient-descent steps on W_i
  alone with rate beta (``client_lr``), theta frozen;
* computes the joint full gradient (grad_W l_i, grad_theta l_i) at
  (W_i, theta), updates its head and uploads g_i = grad_theta l_i;

and the server sets (eq. 4) ``theta <- theta - rho (I/r) sum_{i in I_t}
alpha_i g_i`` over the uploads that arrived, rho = ``server_lr``.

The head's final step: eq. 5-6 state that the final head steps and the server
step together are ``psi <- psi - rho grad^s L`` with grad^s_{W_i} L =
(I/r) alpha_i grad_W l_i -- an unbiased SGD step on eq. 1, and plain gradient
descent on eq. 1 when everybody takes part and tau = 1. Eq. 3 and Algorithm 1
print the head step without alpha_i. ``final_head_step: exact`` (default)
follows eq. 5 and makes the exact-gradient property hold; ``eq3`` follows
eq. 3 as printed (a per-block step size rho / alpha_i on W_i).

Training runs in the engine: the tau - 1 head steps are ``engine.train_head``,
full-batch steps on the body's features computed once and cached (§3.3; equal to
training the head alone, tested), and the joint gradient is
``engine.full_gradient``. A participant's head keeps its update
even when its upload misses the deadline (the head never leaves the device).
All steps are plain gradient descent as in Algorithm 1: the scenario's
``train`` settings other than ``lr`` (the default of both rates) are not used,
and there is no optimizer state to keep between rounds.

``server_optimizer: adam`` steps the body with Adam at rate rho instead (b1
0.9, b2 0.999, eps 1e-8, its state kept by the server), as the authors' code
does by default (sotirisnik/PFLEGO main.py: ``--optimizer adam``,
``optimizers.adam(step_size=server_lr)`` over the I/r-scaled aggregated body
gradient); the heads' final step stays the plain step above. With rho =
0.001 a plain step moves the body by rho times the gradient, Adam by about
rho per coordinate, which is orders of magnitude more when gradients are
small. (The code normalises the sampled clients' weights to sum to 1 before
the I/r factor: per round only a rescaling of the gradient, which Adam all but
ignores.)
``tau`` defaults to 50, the paper's value for every dataset (§4.2).

CommPlan: one stream with the body to the participants and an upload of the
body gradient, both of payload body / all parameters. Work, relative to an
ordinary local round (``train.epochs`` passes over the local data, a pass =
forward and backward of every sample), follows the paper's implementation
(§3.3): a forward pass to cache the features (1/3 of a pass), tau - 1 head
steps on the cached features (head_size / param_count of a pass each: exact
for an MLP up to biases and ReLUs, an upper bound for a conv net, whose body
costs more per parameter) and the joint pass (1); tau = 1 is the joint pass
alone. So work =
(1 + [tau > 1] (1/3 + (tau - 1) head_size / param_count)) / train.epochs,
growing with tau.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import Algorithm, Context, StepInfo, mean_finite, numpy_generator, register, torch_generator
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.algorithms.specs.pflego import SPEC
from wirelessfl.algorithms.fedper import SharedBody, no_body_message
from wirelessfl.learning import optim
from wirelessfl.seam import CommPlan, Stream

#: Cost of a forward pass relative to a training pass (forward + backward ~ 3 forwards).
FORWARD_COST = 1.0 / 3.0


@register
class PFLEGO(SharedBody, Algorithm):
    """Exact distributed SGD on eq. 1; see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        if len(ctx.arch.head_paths) == len(ctx.arch.param_names):
            raise ParamError(no_body_message(self.name, ctx.arch), self.name)
        arch = ctx.arch
        self.split = arch.split(arch.head_paths)
        init = arch.init_flat(1, torch_generator(ctx.seed, "init")).to(ctx.device)[0]
        self.body = self.split.shared(init).clone()
        self.heads = ctx.stores.new("heads", ctx.num_clients, self.split.personal(init))  # every client's W_i
        sizes = ctx.sizes().copy()
        sizes[ctx.held_out] = 0.0  # eq. 1 sums over the clients that train: held-out ones have alpha_i = 0
        self.alpha = torch.as_tensor(sizes / sizes.sum(), dtype=torch.float64)
        self.server_state: optim.State | None = None  # Adam's moments of the body (server_optimizer: adam)

    # -- rates and sampling ----------------------------------------------------
    @property
    def server_lr(self) -> float:
        """rho of eq. 3-4."""
        return float(self.params.server_lr if self.params.server_lr is not None else self.ctx.train.lr)

    @property
    def client_lr(self) -> float:
        """beta of the tau - 1 head-only steps."""
        return float(self.params.client_lr if self.params.client_lr is not None else self.ctx.train.lr)

    def participants(self, round: int) -> np.ndarray:
        """I_t: a fixed-size uniform sample, or each client independently (Binomial B(I, rho)).

        Both draw from the training clients only (I = their number): a held-out
        client (``training.unseen_fraction``) must stay unseen, as in the base class.
        """
        if self.params.sampling == "fixed":
            return super().participants(round)
        pool = self.ctx.training_clients()
        rng = numpy_generator(self.ctx.seed, round, "participation")
        return pool[rng.random(len(pool)) < self.ctx.participation]

    def unbiasing_factor(self, drawn: int) -> float:
        """I / r = 1 / P(i in I_t), I the training clients: r = |I_t| (``drawn``) for fixed-size sampling,
        I * participation for Binomial."""
        if self.params.sampling == "binomial":
            return 1.0 / min(self.ctx.participation, 1.0)
        return len(self.ctx.training_clients()) / drawn

    # -- plan -----------------------------------------------------------------
    @property
    def body_fraction(self) -> float:
        return self.split.shared_fraction

    def relative_work(self) -> float:
        """Module docstring: feature pass, tau - 1 head steps on cached features, joint pass."""
        tau = int(self.params.tau)
        head = self.ctx.arch.head_size / self.ctx.arch.param_count
        passes = 1.0 + (FORWARD_COST + (tau - 1) * head if tau > 1 else 0.0)
        return passes / float(max(self.ctx.train.epochs, 1))

    def plan(self, round: int) -> CommPlan:
        members = frozenset(int(i) for i in self.participants(round))
        fraction = self.body_fraction
        work = self.relative_work()
        return CommPlan(
            streams=(Stream(fraction, members, "body"),) if members else (),
            uplink={i: fraction for i in members},
            work={i: work for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    # -- step -----------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        if not len(members):
            return StepInfo(train_loss=float("nan"), aggregated=0)
        engine = self.ctx.engine
        sets = self.ctx.train_sets(members)
        params = self.split.join(self.body.expand(len(members), -1), self.heads.gather(members))
        with engine.phase("pflego head steps"):
            params = self.head_steps(params, sets, round)
        with engine.phase("pflego gradient"):
            grads = engine.full_gradient(params, sets).to(torch.float64)
            loss = engine.evaluate(params, sets).loss
        grads = torch.nan_to_num(grads, nan=0.0)  # a client without training data has alpha_i = 0
        rho, scale = self.server_lr, self.unbiasing_factor(len(members))
        alpha = self.alpha[members].to(grads.device)
        head_factor = rho * scale * (alpha if self.params.final_head_step == "exact" else torch.ones_like(alpha))
        heads = self.split.personal(params).to(torch.float64) - head_factor[:, None] * self.split.personal(grads)
        self.heads.scatter(members, heads.to(self.heads.default.dtype))
        arrived_rows = [r for r, i in enumerate(members) if int(i) in arrived]
        if arrived_rows:
            rows = torch.as_tensor(arrived_rows, device=grads.device)
            direction = alpha[rows] @ self.split.shared(grads[rows])
            self.body = self.server_step(self.body.to(torch.float64), scale * direction).to(self.body.dtype)
        return StepInfo(
            train_loss=mean_finite(loss),
            aggregated=len(arrived_rows),
            extra={"unbiasing_factor": scale},
        )

    def server_step(self, body: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
        """Eq. 4, ``theta - rho * gradient``; or Adam's step at rate rho (``server_optimizer: adam``), float64."""
        if self.params.server_optimizer == "sgd":
            return body - self.server_lr * gradient
        adam = optim.adam(self.server_lr)
        if self.server_state is None:
            self.server_state = adam.init(body[None])
        return optim.step(body[None].clone(), gradient[None].clone(), self.server_state, adam)[0]

    def head_steps(self, params: torch.Tensor, sets: list, round: int) -> torch.Tensor:
        """The tau - 1 full-batch gradient-descent steps on the heads alone, on cached body features."""
        del round  # full-batch steps draw nothing
        return self.ctx.engine.train_head(params, sets, lr=self.client_lr, steps=int(self.params.tau) - 1)

    # -- state ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        server = None if self.server_state is None else optim.map_state(lambda t: t.detach().cpu().clone(), self.server_state)
        return {"body": self.body.detach().cpu().clone(), "heads": self.heads.state_dict(), "server": server}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.body = state["body"].to(self.ctx.device).clone()
        self.heads.load_state_dict(state["heads"])
        server = state.get("server")  # absent from checkpoints written before server_optimizer existed
        self.server_state = None if server is None else optim.map_state(lambda t: t.to(self.ctx.device).clone(), server)
