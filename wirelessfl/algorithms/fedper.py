"""FedPer: a shared body averaged by the server, personal layers kept on the device.

Arivazhagan, Aggarwal, Singh, Choudhary, "Federated Learning with
Personalization Layers", arXiv:1912.00818 (2019), Algorithm 1; a baseline of
pflego.txt §4 (its ref. [2]).

The model is base layers W_B (shared) followed by K_P personalization layers
W_P,i (one copy per client). Each round a participant receives W_B, trains
(W_B, W_P,i) jointly with the scenario's local optimizer, keeps W_P,i and
uploads W_B; the server sets ``W_B <- sum_j n_j W_B,j / sum_j n_j`` over the
uploads that arrived (FedAvg restricted to the base layers). Client i's model
is (current W_B, W_P,i).

``personal_layers`` is K_P, counted in modules with parameters from the output
(the paper varies K_P); 1 (default) is the model's head (``arch.head_mask()``,
the last linear layer of the built-in models); 0 leaves nothing personal, and
FedPer is then FedAvg exactly. ``personal_params`` instead names the personal
parameters by path (``[fc2]`` or ``[blocks.2, fc]``), for any model. With
``keep_optimizer_state`` each client's optimizer state (whole model) carries
over between its rounds, as for FedAvg. Both the downlink stream and the
upload carry only W_B: payload = body parameters / all parameters. Work is 1.0
(an ordinary local round of the whole model).

Wireless levers (docs/levers.md): ``scheduling`` picks who trains and uploads
W_B; ``compression`` compresses the upload of the shared part, the update
W_B,j - W_B (the personal layers never leave the device), so its payload is the
compressed bits of the body over 32 bits per parameter of the whole model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from wirelessfl.algorithms.base import Algorithm, Context, StepInfo, register, torch_generator
from wirelessfl.algorithms.compression import Compressor
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.algorithms.specs.fedper import SPEC
from wirelessfl.learning.lockstep import EvalResult
from wirelessfl.learning.models import Architecture
from wirelessfl.seam import CommPlan, Stream


def personal_names(arch: Architecture, layers: int) -> tuple[str, ...]:
    """Parameter names of the last ``layers`` modules with parameters (the head first)."""
    if not layers:
        return ()
    return arch.names_under(arch.layers[len(arch.layers) - layers :]) if layers > 1 else arch.head_paths


def no_body_message(name: str, arch: Architecture) -> str:
    """The one-line error for a model whose every layer would be personal."""
    return (
        f"{name}: model {arch.name!r} has no shared body (its only layer with parameters is the personal head); "
        "it needs at least one hidden layer"
    )


class SharedBody:
    """Client i's model is the shared ``body`` beside its head, row i of the client store ``heads`` (``split`` joins
    them): FedPer, FedRep and PFLEGO."""

    def client_params(self) -> torch.Tensor:
        return self.split.join(self.body.expand(self.ctx.num_clients, -1), self.heads.full())

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """The rows of ``clients`` alone: the shared body beside their heads (no ``[m, P]`` for a sample or a chunk)."""
        return self.split.join(self.body.expand(len(clients), -1), self.heads.gather(clients))

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """The body beside the heads read from the store group by group of slots (no ``[m, P]`` of the models)."""
        return self.evaluate_in_groups(split, clients)


@register
class FedPer(SharedBody, Algorithm):
    """Size-weighted averaging of the base layers; see the module docstring."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        layers = self.params.personal_layers
        arch = ctx.arch
        personal = self.params.personal_params
        if personal is not None:
            names = arch.names_under(personal)
            unknown = [p for p in personal if not arch.names_under([p])]
            if unknown:
                raise ParamError(f"fedper: personal_params names no parameters of model {arch.name!r}: {', '.join(unknown)} (its layers: {', '.join(arch.layers)})", self.name, "personal_params")
            if len(names) == len(arch.param_names):
                raise ParamError(f"fedper: personal_params covers every parameter of model {arch.name!r}; at least one must be shared", self.name, "personal_params")
        else:
            available = len(arch.layers)
            if layers >= available:
                if available == 1:
                    raise ParamError(no_body_message(self.name, arch), self.name)
                raise ParamError(
                    f"fedper: personal_layers must be < {available} (model {arch.name!r} has {available} layers with "
                    f"parameters and at least one must be shared), got {layers}", self.name, "personal_layers",
                )
            names = personal_names(arch, int(layers))
        self.split = arch.split(names)
        init = arch.init_flat(1, torch_generator(ctx.seed, "init")).to(ctx.device)[0]
        self.body = self.split.shared(init).clone()
        self.heads = ctx.stores.new("heads", ctx.num_clients, self.split.personal(init))  # every client's personal layers
        self.weights = torch.as_tensor(ctx.sizes(), dtype=torch.float64)
        if self.compressor is not None:  # what is uploaded, and so compressed, is the body alone
            self.compressor = Compressor(ctx.compression, ctx.num_clients, self.split.shared_size, ctx.stores)

    @property
    def body_fraction(self) -> float:
        return self.split.shared_fraction

    def plan(self, round: int) -> CommPlan:
        members = frozenset(int(i) for i in self.participants(round))
        fraction = self.body_fraction
        upload = fraction if self.compressor is None else fraction * self.compressor.payload
        return CommPlan(
            streams=(Stream(fraction, members, "body"),),
            uplink={i: upload for i in members},
            work={i: 1.0 for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        trained, loss = self.train_clients(round, members, self.split.join(self.body.expand(len(members), -1), self.heads.gather(members)))
        self.heads.scatter(members, self.split.personal(trained))
        shared = self.split.shared(trained)
        received = self.body.expand(len(members), -1)
        if self.compressor is not None:
            shared = self.compressor.apply(members, received, shared, torch_generator(self.ctx.seed, round, "compression"))
        uploads = {int(i): shared[r] for r, i in enumerate(members) if int(i) in arrived}
        self.body = self.aggregate(uploads)
        self.record_uploads(round, members, received, uploads)
        return StepInfo(train_loss=loss, aggregated=len(uploads))

    def aggregate(self, uploads: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """``sum_j n_j W_B,j / sum_j n_j`` over the uploads; no upload keeps the current body."""
        if not uploads:
            return self.body
        clients = sorted(uploads)
        stacked = torch.stack([uploads[i] for i in clients])
        weights = self.weights[clients]
        weights = (weights / weights.sum()).to(stacked.device, stacked.dtype)
        return weights @ stacked

    def state_dict(self) -> dict[str, Any]:
        return {
            "body": self.body.detach().cpu().clone(),
            "heads": self.heads.state_dict(),
            "optimizer": self.optimizer_state.state_dict(),
            **self.lever_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.body = state["body"].to(self.ctx.device).clone()
        self.heads.load_state_dict(state["heads"])
        self.optimizer_state.load_state_dict(state["optimizer"])
        self.load_lever_state(state)
