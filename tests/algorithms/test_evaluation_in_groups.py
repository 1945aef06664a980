"""Methods whose per-client models live in client stores evaluate them group by group of slots: the numbers of
evaluating their whole ``client_params``, without building it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.learning.client_store import ClientStores
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, tiny_data

METHODS = {
    "ditto": {},
    "pfedme": {"inner_steps": 2},
    "apfl": {"adaptive_alpha": True, "alpha_lr": 0.5},
    "fedper": {},
    "fedrep": {"head_epochs": 1},
    "pflego": {"tau": 2},
}


@pytest.mark.parametrize("where", ["memory", "disk"])
@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_evaluation_group_by_group_is_that_of_every_clients_model(name, where, tmp_path, monkeypatch):
    """Two of the three training clients trained (on disk client 1's rows are still unwritten), client 2 held
    out (Ditto, pFedMe and APFL give it the global model): 4 test samples a client and passes of 4 samples, so
    each client is a group of its own and no call makes more than one client's model."""
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    ctx = Context(tiny_data((2, 5, 3, 10)), arch, LockstepEngine(arch, "cpu", max_samples=2), TrainConfig(epochs=1, batch_size=4),
                  seed=5, participation=0.5)
    ctx = replace(ctx, held_out=np.array([2]), stores=ClientStores(where, tmp_path))
    algo = get_algorithm(name)(ctx, **METHODS[name])
    algo.step(1, frozenset(range(4)))
    assert algo.participants(1).tolist() == [0, 3]
    whole = algo.client_params()
    sample = np.array([1, 2, 3])
    expected = [ctx.engine.evaluate(whole, ctx.test_sets(np.arange(4))), ctx.engine.evaluate(whole[sample], ctx.test_sets(sample))]
    asked = []
    params_of = algo.params_of
    monkeypatch.setattr(algo, "params_of", lambda clients: asked.append(clients.tolist()) or params_of(clients))
    got = [algo.evaluate("test"), algo.evaluate("test", sample)]
    for e, g in zip(expected, got):
        assert torch.equal(g.accuracy, e.accuracy) and torch.equal(g.loss, e.loss)
    assert sorted(asked) == [[0], [1], [1], [2], [2], [3], [3]]
