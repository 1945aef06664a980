"""FedRep (Collins et al., ICML 2021): head first on a frozen body, then the body; no head is FedAvg exactly."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
import torch

from wirelessfl.algorithms import Context, get_algorithm, torch_generator
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, tiny_data
from simulated import curve, run

SIZES = (2, 5, 3, 10)


def make_ctx(hidden=(5,), train=None) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=hidden)
    train = train or TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.9)
    return Context(tiny_data(SIZES), arch, LockstepEngine(arch, "cpu"), train, seed=5)


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([{"name": "fedavg"}, {"name": "fedrep", "variants": {"personal_layers": [0, 1]}}])


def test_every_layer_in_the_body_is_fedavgs_trace_exactly(trace):
    pd.testing.assert_frame_equal(curve(trace, "fedrep personal_layers=0"), curve(trace, "fedavg"), check_exact=True)


def test_a_personal_head_changes_training(trace):
    assert not curve(trace, "fedrep personal_layers=1")["mean_loss"].equals(curve(trace, "fedavg")["mean_loss"])


def test_the_head_trains_on_a_frozen_body_then_the_body_under_the_new_head():
    ctx = make_ctx()
    algo = get_algorithm("fedrep")(ctx, head_epochs=3)
    engine, split = ctx.engine, algo.split
    members = torch.arange(4).numpy()
    start = algo.client_params()
    mask = algo.personal_mask
    heads = engine.train(
        start, ctx.train_sets(members), TrainConfig(epochs=3, batch_size=4, lr=0.1, momentum=0.9),
        torch.Generator().manual_seed(0), trainable=mask,
    )
    assert torch.equal(split.shared(heads.params), split.shared(start))  # the body did not move in the head phase
    algo.step(1, frozenset({0, 1, 3}))
    assert not torch.equal(algo.heads.full(), split.personal(start))
    # the body phase freezes the new head: the head a client keeps is the one the head phase left
    expected_heads = engine.train(
        start, ctx.train_sets(members), TrainConfig(epochs=3, batch_size=4, lr=0.1, momentum=0.9),
        torch_generator(ctx.seed, 1, "train-head"), trainable=mask,
    )
    assert torch.equal(algo.heads.full(), split.personal(expected_heads.params))
    body = engine.train(
        expected_heads.params, ctx.train_sets(members), ctx.train, torch_generator(ctx.seed, 1, "train"), trainable=~mask,
    )
    arrived = [0, 1, 3]
    weights = torch.tensor([SIZES[i] for i in arrived], dtype=torch.float32)
    mean = (weights[:, None] * split.shared(body.params)[arrived]).sum(0) / weights.sum()
    assert torch.allclose(algo.body, mean, atol=1e-6, rtol=0)


def test_payload_is_the_body_and_work_counts_the_head_epochs():
    ctx = make_ctx(train=TrainConfig(epochs=2, batch_size=4))
    algo = get_algorithm("fedrep")(ctx, head_epochs=6)
    plan = algo.plan(1)
    P, head = ctx.arch.param_count, ctx.arch.head_size
    assert [(s.payload, s.receivers) for s in plan.streams] == [((P - head) / P, frozenset(range(4)))]
    assert plan.uplink == {i: (P - head) / P for i in range(4)}
    assert plan.work[0] == pytest.approx(1 + 6 / 2 * (1 / 3 + 2 / 3 * head / P), rel=1e-12)
    no_head = get_algorithm("fedrep")(ctx, head_epochs=6, personal_layers=0).plan(1)
    assert no_head.work == {i: 1.0 for i in range(4)} and no_head.uplink == {i: 1.0 for i in range(4)}
    one_epoch = get_algorithm("fedrep")(ctx, head_epochs=1).plan(1)  # one head epoch is a head phase too
    assert one_epoch.work[0] == pytest.approx(1 + 1 / 2 * (1 / 3 + 2 / 3 * head / P), rel=1e-12)
    ctx.train = replace(ctx.train, epochs=0)  # no body epochs (the API allows it): head epochs count as if E = 1
    assert get_algorithm("fedrep")(ctx, head_epochs=6).plan(1).work[0] == pytest.approx(1 + 6 * (1 / 3 + 2 / 3 * head / P), rel=1e-12)


def test_the_state_round_trips_with_kept_optimizer_state():
    ctx = replace(make_ctx(), keep_optimizer_state=True)
    algo = get_algorithm("fedrep")(ctx, head_epochs=2)
    algo.step(1, frozenset({0, 2, 3}))
    copy = get_algorithm("fedrep")(ctx, head_epochs=2)
    copy.load_state_dict(algo.state_dict())
    algo.step(2, frozenset(range(4)))
    copy.step(2, frozenset(range(4)))
    assert torch.equal(algo.client_params(), copy.client_params())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"head_epochs": -1}, "fedrep: head_epochs must be an int >= 0, got -1"),
        ({"personal_layers": 1.5}, "fedrep: personal_layers must be an int >= 0, got 1.5"),
        ({"personal_layers": 2}, "fedrep: personal_layers must be < 2 (model 'mlp' has 2 layers with parameters and at least one must be shared), got 2"),
    ],
)
def test_bad_parameters_are_one_line(params, message):
    with pytest.raises(ValueError) as err:
        get_algorithm("fedrep")(make_ctx(), **params)
    assert str(err.value) == message


def test_a_model_with_one_layer_has_no_body_to_share():
    ctx = make_ctx(hidden=())
    with pytest.raises(ValueError) as err:
        get_algorithm("fedrep")(ctx)
    assert str(err.value) == (
        "fedrep: model 'mlp' has no shared body (its only layer with parameters is the personal head); "
        "it needs at least one hidden layer"
    )
