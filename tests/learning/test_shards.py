"""A slot group trained as a self-contained job (learning/shards.py) gives the in-process rows bit for bit.

``PickledShards`` sends every job and result through ``pickle`` and runs it on a
second engine, as a Ray actor does, so these tests need no cluster.
"""

from __future__ import annotations

import pytest
import torch

from wirelessfl.learning.lockstep import GradientCorrection, LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.shards import PickledShards

SIZES = [40, 17, 33, 64, 5, 40, 21]


def _leaves(state) -> list[torch.Tensor]:
    return [state] if isinstance(state, torch.Tensor) else [t for inner in state for t in _leaves(inner)]


def _setup(model: str):
    arch = get_architecture(model, (1, 12, 12), 10)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(s, 1, 12, 12, generator=g), torch.randint(0, 10, (s,), generator=g)) for s in SIZES]
    data[5] = data[0]  # one dataset for two slots, as FedEM's components share a client's data
    return arch, data, arch.init_flat(len(SIZES), torch.Generator().manual_seed(0)), g


CASES = [("mlp", option) for option in ("plain", "trainable", "sample_weights", "correction", "epochs", "adam")]


# a model with dropout: each slot's masks come from its own seed, shipped with the job
@pytest.mark.parametrize("model, option", [*CASES, ("examples.user_models:two_conv_dropout", "plain")])
def test_a_shipped_group_trains_the_in_process_rows(model, option):
    arch, data, params, g = _setup(model)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=0.05, momentum=0.9)
    kw: dict = {}
    if option == "trainable":
        kw["trainable"] = arch.head_mask()
    elif option == "sample_weights":
        kw["sample_weights"] = [torch.rand(s, generator=g) for s in SIZES]
    elif option == "correction":
        kw["correction"] = GradientCorrection(0.1, params * 0.5, torch.randn(params.shape, generator=g) * 0.01)
    elif option == "epochs":
        kw["epochs"] = [1, 2, 0.5, 3, 1, 2, 0]
    elif option == "adam":
        cfg = TrainConfig(epochs=1, batch_size=8, lr=0.01, optimizer="adam", clip_norm=1.0)
    here = LockstepEngine(arch, "cpu", max_samples=32)  # several groups
    there = LockstepEngine(arch, "cpu", max_samples=32)
    there.shards = PickledShards()
    a = here.train(params, data, cfg, torch.Generator().manual_seed(5), **kw)
    b = there.train(params, data, cfg, torch.Generator().manual_seed(5), **kw)
    # a second call continues the optimizer state that came back from the shards
    a2 = here.train(a.params, data, cfg, torch.Generator().manual_seed(6), opt_state=a.opt_state, **kw)
    b2 = there.train(b.params, data, cfg, torch.Generator().manual_seed(6), opt_state=b.opt_state, **kw)
    assert torch.equal(a.params, b.params) and torch.equal(a2.params, b2.params)
    assert torch.equal(a.loss.nan_to_num(-1), b.loss.nan_to_num(-1)) and torch.equal(a.steps, b.steps)
    assert all(torch.equal(x, y) for x, y in zip(_leaves(a2.opt_state), _leaves(b2.opt_state)))
    assert there.shards.sent > 0
