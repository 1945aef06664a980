"""Server optimizers: the new global model as an optimizer step on the pseudo-gradient x - mean(uploads).

Reddi, Charles, Zaheer, Garrett, Rush, Konečný, Kumar, McMahan, "Adaptive
Federated Optimization", ICLR 2021, Algorithm 2 (FedAdagrad, FedAdam, FedYogi).
With Delta_t = mean(uploads) - x_t (the average client update), the server takes

    m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
    v_t = v_{t-1} + Delta_t^2                                           (FedAdagrad)
    v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2                         (FedAdam)
    v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)     (FedYogi)
    x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)

and FedAvgM (Hsu, Qi, Brown, arXiv:1909.06335, 2019) is SGD with momentum on
-Delta_t. Every rule but Yogi is ``torch.optim``'s, applied to the pseudo-gradient
g_t = -Delta_t = x_t - mean(uploads):

* ``sgd``: ``torch.optim.SGD`` (lr 1 is FedAvg: taken as the average itself, since
  x - (x - mean) is not the mean to the last bit);
* ``momentum``: ``torch.optim.SGD(momentum=...)`` (FedAvgM);
* ``adam``: ``torch.optim.Adam(eps=tau)``, which adds Kingma and Ba's bias
  correction (m_t / (1 - beta1^t), v_t / (1 - beta2^t)) that Algorithm 2 leaves out;
* ``adagrad``: ``torch.optim.Adagrad(eps=tau, initial_accumulator_value=tau^2)``,
  Algorithm 2 with beta1 = 0 (torch's Adagrad has no momentum) and v_{-1} = tau^2;
* ``yogi``: :class:`Yogi` below, Algorithm 2 as written (no bias correction,
  v_{-1} = tau^2): torch.optim has no Yogi and no installed library provides one.

A round in which no upload arrived takes no step (the model and the optimizer's
state stay as they are).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

NAMES = ("sgd", "momentum", "adam", "yogi", "adagrad")


@dataclass(frozen=True)
class ServerOptimizer:
    """``training.server_optimizer``: the rule (``NAMES``), its rate eta and its constants."""

    name: str
    lr: float
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.99)
    tau: float = 1e-3

    @property
    def is_averaging(self) -> bool:
        """True for plain averaging (sgd at lr 1), which takes the average itself."""
        return self.name == "sgd" and self.lr == 1.0


class Yogi(torch.optim.Optimizer):
    """FedYogi's server step (Reddi et al., ICLR 2021, Algorithm 2; Zaheer et al., NeurIPS 2018's Yogi), written
    here because torch.optim has no Yogi; ``p.grad`` is the pseudo-gradient -Delta_t."""

    def __init__(self, params, lr: float, betas: tuple[float, float], tau: float) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "tau": tau})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                delta = -param.grad
                state = self.state[param]
                if not state:
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.full_like(param, group["tau"] ** 2)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                squared = delta * delta
                m.mul_(beta1).add_(delta, alpha=1 - beta1)
                v.sub_(squared * torch.sign(v - squared), alpha=1 - beta2)
                param.add_(m / (v.sqrt() + group["tau"]), alpha=group["lr"])
        return None


class ServerOptimizerState:
    """One ``torch.optim`` optimizer over the server's models; ``update`` turns the average into the new models."""

    def __init__(self, spec: ServerOptimizer, models: torch.Tensor) -> None:
        self.spec = spec
        self.param = models.detach().clone().requires_grad_(True)
        self.optimizer = build(spec, self.param)

    def update(self, previous: torch.Tensor, averaged: torch.Tensor) -> torch.Tensor:
        """The models after one step on the pseudo-gradient ``previous - averaged``."""
        if self.spec.is_averaging:
            return averaged
        with torch.no_grad():
            self.param.copy_(previous)
        self.param.grad = (previous - averaged).detach().to(self.param.dtype)
        self.optimizer.step()
        self.param.grad = None
        return self.param.detach().clone()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The optimizer's buffers (step counts, moments), tensors only."""
        return {key: value.detach().cpu().clone() for key, value in self.optimizer.state[self.param].items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # torch.optim keeps step counts on the CPU unless capturable
        self.optimizer.state[self.param] = {
            key: value.clone() if key == "step" else value.to(self.param.device).clone() for key, value in state.items()
        }


def build(spec: ServerOptimizer, param: torch.Tensor) -> torch.optim.Optimizer:
    """The ``torch.optim`` optimizer (or :class:`Yogi`) ``spec`` names, over ``param``."""
    if spec.name in ("sgd", "momentum"):
        return torch.optim.SGD([param], lr=spec.lr, momentum=spec.momentum if spec.name == "momentum" else 0.0)
    if spec.name == "adam":
        return torch.optim.Adam([param], lr=spec.lr, betas=spec.betas, eps=spec.tau)
    if spec.name == "adagrad":
        return torch.optim.Adagrad([param], lr=spec.lr, eps=spec.tau, initial_accumulator_value=spec.tau**2)
    if spec.name == "yogi":
        return Yogi([param], lr=spec.lr, betas=spec.betas, tau=spec.tau)
    raise ValueError(f"training.server_optimizer.name: must be one of {', '.join(NAMES)}, got {spec.name!r}")
