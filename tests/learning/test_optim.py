"""Optimizers as composable transforms: each equals torch.optim through the reference loop."""

import dataclasses
import math

import pytest
import torch

from wirelessfl.learning import optim
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.reference import ReferenceLoop

from test_lockstep import TOL, assert_same, both, make_data


# Adam divides by sqrt(v) + eps, so a coordinate whose gradient is float noise (~1e-9: v ~ 1e-17 on
# a few LeNet weights) moves by a full lr-sized step in either implementation, with a sign the noise
# picks (measured: v ~ 1e-15 at the one coordinate off by 2e-5 with eps = 1e-6). eps = 1e-4 keeps
# such coordinates still while every coordinate with a real gradient stays Adam-scaled.
OPTIMIZERS = {
    "sgd": dict(optimizer="sgd", lr=0.1, momentum=0.0),
    "sgd-weight-decay": dict(optimizer="sgd", lr=0.1, momentum=0.0, weight_decay=0.05),
    "momentum": dict(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.01),
    "nesterov": dict(optimizer="sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": dict(optimizer="adam", lr=0.01, betas=(0.8, 0.95), eps=1e-4),
    "adam-l2": dict(optimizer="adam", lr=0.01, weight_decay=0.1, eps=1e-4),
    "adamw": dict(optimizer="adamw", lr=0.01, weight_decay=0.1, eps=1e-4),
    "clipped-momentum": dict(optimizer="sgd", lr=0.1, momentum=0.9, clip_norm=0.05),
    "clipped-adamw": dict(optimizer="adamw", lr=0.01, weight_decay=0.1, eps=1e-4, clip_norm=0.05),
}


# The transforms act on flat rows whatever the model: every optimizer on the MLP, two on LeNet-5's convolutions.
CASES = [(name, "mlp") for name in OPTIMIZERS] + [("nesterov", "lenet5"), ("clipped-adamw", "lenet5")]


@pytest.mark.parametrize("name, model", CASES)
def test_every_optimizer_equals_torch_optim_with_uneven_slots_and_partial_batches(name, model):
    arch = get_architecture(model, (1, 8, 8), 10)
    sizes = [13, 8, 5]
    data = make_data(arch, sizes)
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=2, batch_size=4, **OPTIMIZERS[name])
    engine, reference = both(arch, params, data, cfg)
    assert_same(engine, reference)
    assert (engine.params - params).abs().max() > 1e-3  # it trained


@pytest.mark.parametrize("name", ["nesterov", "adamw", "clipped-adamw"])
def test_optimizers_respect_a_head_only_mask(name):
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [11, 6])
    params = arch.init_flat(2, torch.Generator().manual_seed(3))
    cfg = TrainConfig(epochs=2, batch_size=4, **OPTIMIZERS[name])
    head = arch.head_mask()
    engine, reference = both(arch, params, data, cfg, trainable=head)
    assert_same(engine, reference)
    assert torch.equal(engine.params[:, ~head], params[:, ~head])


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_optimizer_state_carried_over_two_rounds_equals_torch_optim_state(name):
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=[16])
    data = make_data(arch, [10, 7, 3])
    params = arch.init_flat(3, torch.Generator().manual_seed(4))
    cfg = TrainConfig(epochs=1, batch_size=4, **OPTIMIZERS[name])
    engine, reference = LockstepEngine(arch), ReferenceLoop(arch)
    first = [model.train(params, data, cfg, torch.Generator().manual_seed(5)) for model in (engine, reference)]
    second = [
        model.train(out.params, data, cfg, torch.Generator().manual_seed(6), opt_state=out.opt_state)
        for model, out in zip((engine, reference), first)
    ]
    assert_same(*second)
    fresh = engine.train(first[0].params, data, cfg, torch.Generator().manual_seed(6))
    assert (fresh.params - second[0].params).abs().max() > 1e-4  # the carried state mattered


def test_adam_bias_correction_counts_steps_per_slot():
    """One Adam step from zero state moves every coordinate by -lr * sign(g) (m_hat / sqrt(v_hat) = g / |g|)."""
    transform = optim.adam(lr=0.01, eps=1e-12)
    params = torch.zeros(2, 3)
    grad = torch.tensor([[0.5, -2.0, 1e-3], [3.0, 0.25, -0.5]])
    state = transform.init(params)
    update = transform.update(grad.clone(), state, params)
    assert torch.allclose(update * transform.step_size, -0.01 * grad.sign(), atol=1e-8)
    # slot 1 alone takes a second step: its count is 2, slot 0's stays 1
    rows = optim.select_rows(state, slice(1, 2))
    transform.update(torch.tensor([[3.0, 0.25, -0.5]]), rows, params[1:])
    counts = state[1][2]
    assert counts.flatten().tolist() == [1.0, 2.0]


def test_sample_weights_scale_each_samples_loss_like_the_reference():
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    sizes = [9, 5, 12]
    data = make_data(arch, sizes)
    g = torch.Generator().manual_seed(7)
    weights = [torch.rand(size, generator=g) for size in sizes]
    params = arch.init_flat(3, torch.Generator().manual_seed(8))
    cfg = TrainConfig(epochs=2, batch_size=4, lr=0.05, momentum=0.9)
    engine, reference = both(arch, params, data, cfg, sample_weights=weights)
    assert_same(engine, reference)
    unweighted = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1))
    assert (unweighted.params - engine.params).abs().max() > 1e-4


def test_unit_sample_weights_and_zero_weights_by_hand():
    arch = get_architecture("mlp", (1, 1, 2), 3, hidden=())
    x = torch.tensor([[[[1.0, 2.0]]], [[[3.0, -1.0]]]])
    y = torch.tensor([0, 2])
    cfg = TrainConfig(epochs=1, batch_size=2, lr=0.5, momentum=0.0)
    engine = LockstepEngine(arch)
    plain = engine.train(torch.zeros(1, arch.param_count), [(x, y)], cfg, torch.Generator())
    ones = engine.train(torch.zeros(1, arch.param_count), [(x, y)], cfg, torch.Generator(), sample_weights=[torch.ones(2)])
    assert torch.equal(plain.params, ones.params)
    # weight (2, 0): the step is the gradient of 2 * CE(sample 0) / 2 = the full gradient of sample 0 alone
    only_first = engine.train(torch.zeros(1, arch.param_count), [(x, y)], cfg, torch.Generator(), sample_weights=[torch.tensor([2.0, 0.0])])
    p_minus_e = torch.tensor([1 / 3 - 1, 1 / 3, 1 / 3])
    expected = -0.5 * torch.cat([torch.outer(p_minus_e, x.view(2, 2)[0]).flatten(), p_minus_e])
    assert torch.allclose(only_first.params[0], expected, atol=1e-7)
    assert math.isclose(only_first.loss.item(), math.log(3), rel_tol=1e-6)


def test_bad_optimizer_settings_are_one_line_errors():
    cases = [
        (dict(optimizer="rmsprop"), "train.optimizer must be one of sgd, adam, adamw, got 'rmsprop'"),
        (dict(optimizer="adam", nesterov=True), "train.nesterov needs optimizer 'sgd' with momentum > 0"),
        (dict(momentum=0.0, nesterov=True), "train.nesterov needs optimizer 'sgd' with momentum > 0"),
        (dict(optimizer="adam", betas=(0.9, 1.0)), "train.betas must be two numbers in [0, 1), got (0.9, 1.0)"),
        (dict(eps=0.0), "train.eps must be a finite number > 0, got 0.0"),
        (dict(clip_norm=-1.0), "train.clip_norm must be null or a finite number > 0, got -1.0"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as info:
            TrainConfig(**kwargs)
        assert str(info.value) == message


def test_bad_sample_weights_and_opt_state_are_named():
    arch = get_architecture("mlp", (1, 1, 2), 3, hidden=())
    data = [(torch.zeros(3, 1, 1, 2), torch.zeros(3, dtype=torch.long))]
    engine, cfg = LockstepEngine(arch), TrainConfig()
    params = torch.zeros(1, arch.param_count)
    with pytest.raises(ValueError, match=r"^sample_weights\[0\] must have shape \[3\] \(one weight per sample\), got \[2\]$"):
        engine.train(params, data, cfg, torch.Generator(), sample_weights=[torch.ones(2)])
    adam_state = engine.train(params, data, dataclasses.replace(cfg, optimizer="adam"), torch.Generator()).opt_state
    with pytest.raises(ValueError, match="^opt_state does not match this optimizer and these slots"):
        engine.train(params, data, cfg, torch.Generator(), opt_state=adam_state)


def test_chain_applies_inner_scales_and_defers_only_the_last_by_hand():
    """chain(scale(2), add_decayed_weights(0.5), scale(-0.1)): updates 2 g + 0.5 p, added times -0.1."""
    transform = optim.chain(optim.scale(2.0), optim.add_decayed_weights(0.5), optim.scale(-0.1))
    params = torch.tensor([[1.0, -2.0], [4.0, 0.0]])
    grad = torch.tensor([[0.5, 1.0], [-1.0, 3.0]])
    update = transform.update(grad.clone(), transform.init(params), params)
    assert torch.equal(update, 2 * grad + 0.5 * params)
    assert transform.step_size == -0.1
    stepped = optim.apply_updates(params.clone(), update, transform)
    assert torch.allclose(stepped, params - 0.1 * (2 * grad + 0.5 * params), atol=1e-7)
    # a chain ending in a chain: the inner chain's deferred scale is the outer one's
    nested = optim.chain(optim.clip_by_global_norm(100.0), optim.sgd(lr=0.3))
    assert nested.step_size == -0.3
    # an inner chain's deferred scale is applied in place when another transform follows it
    outer = optim.chain(optim.sgd(lr=0.3, weight_decay=0.5), optim.scale(2.0))
    assert outer.step_size == 2.0
    assert torch.equal(outer.update(grad.clone(), outer.init(params), params), (grad + 0.5 * params) * -0.3)


@pytest.mark.parametrize("nesterov, weight_decay", [(False, 0.0), (True, 0.01), (False, 0.05)])
def test_fused_momentum_steps_equal_the_chain_and_torch_optim(nesterov, weight_decay):
    """sgd with momentum steps through torch's fused SGD kernel; the chain's passes and torch.optim.SGD agree."""
    transform = optim.sgd(lr=0.05, momentum=0.9, nesterov=nesterov, weight_decay=weight_decay)
    assert transform.fused is not None
    unfused = transform._replace(fused=None)
    g = torch.Generator().manual_seed(0)
    params = torch.randn(3, 50, generator=g)
    reference = [params[row].clone().requires_grad_(True) for row in range(3)]
    torch_opt = torch.optim.SGD(reference, lr=0.05, momentum=0.9, nesterov=nesterov, weight_decay=weight_decay)
    fused_p, chain_p = params.clone(), params.clone()
    fused_state, chain_state = transform.init(fused_p), unfused.init(chain_p)
    for _ in range(4):
        grad = torch.randn(3, 50, generator=g)
        optim.step(fused_p, grad.clone(), fused_state, transform)
        optim.step(chain_p, grad.clone(), chain_state, unfused)
        for row, p in enumerate(reference):
            p.grad = grad[row].clone()
        torch_opt.step()
    expected = torch.stack([p.detach() for p in reference])
    assert (fused_p - chain_p).abs().max() <= 1e-6 and (fused_p - expected).abs().max() <= 1e-6
    assert (fused_p - params).abs().max() > 0.1  # it moved


def test_a_chain_around_fused_sgd_runs_the_chain():
    """Clipping (or any transform) around sgd must not be skipped by the fused kernel."""
    assert optim.sgd(lr=0.1, momentum=0.0).fused is None  # one pass already
    clipped = optim.chain(optim.clip_by_global_norm(0.01), optim.sgd(lr=0.1, momentum=0.9))
    assert clipped.fused is None
    params, grad = torch.zeros(1, 2), torch.tensor([[3.0, 4.0]])
    optim.step(params, grad, clipped.init(params), clipped)
    assert torch.allclose(params, torch.tensor([[-0.1 * 0.006, -0.1 * 0.008]]), atol=1e-7)
