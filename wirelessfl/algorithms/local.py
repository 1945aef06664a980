"""Local learning: every client trains alone; nothing is sent.

The no-collaboration baseline of user-centric-fl.txt §V. Its rounds cost only
compute time (no streams, no uploads), so on a time axis it is as fast as the
slowest client.
"""

from __future__ import annotations

import numpy as np
import torch

from wirelessfl.algorithms.base import Context, MixingAlgorithm, StepInfo, register
from wirelessfl.algorithms.specs.local import SPEC
from wirelessfl.learning.lockstep import EvalResult
from wirelessfl.seam import CommPlan


@register
class Local(MixingAlgorithm):
    """``theta_i <- theta_i^{t-1/2}``: each client keeps its own model; nothing is mixed, so no mixing matrix is kept."""

    spec = SPEC

    def __init__(self, ctx: Context, **hparams) -> None:
        super().__init__(ctx, **hparams)
        m = ctx.num_clients
        self.personal = ctx.stores.new("models", m, self.models[0])  # every client's model, from the initial one
        self.assignment = np.arange(m)

    def state_dict(self) -> dict:
        """Without ``mixing``: Local never aggregates, so it keeps no mixing matrix (an ``[m, m]`` identity
        would be 800 MB at 10,000 clients). ``models`` is the client store's state (every client's model)."""
        state = super().state_dict()
        del state["mixing"]
        state["models"] = self.personal.state_dict()
        return state

    def load_state_dict(self, state) -> None:
        """Also a checkpoint written when Local kept the identity as its mixing: that entry is not read."""
        models = self.models
        super().load_state_dict({**state, "models": models, "mixing": self.mixing})
        self.personal.load_state_dict(state["models"])

    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        return CommPlan(
            streams=(),
            uplink={int(i): 0.0 for i in members},
            work={int(i): 1.0 for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def received(self, members: np.ndarray) -> torch.Tensor:
        """Each member starts from its own model."""
        return self.personal.gather(members)

    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        members = self.participants(round)
        trained, loss = self.local_training(round, members)
        self.personal.scatter(members, trained)
        return StepInfo(train_loss=loss, aggregated=0)

    def client_params(self) -> torch.Tensor:
        return self.personal.full()

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        return self.personal.gather(clients)

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """Each client's own model read from the store by row (no ``[m, P]`` copy in RAM)."""
        ids = np.arange(self.ctx.num_clients) if clients is None else np.asarray(clients)
        params, rows = self.personal.compact(ids)
        return self.ctx.engine.evaluate(params, self.ctx.split_sets(split, ids), rows=rows)
