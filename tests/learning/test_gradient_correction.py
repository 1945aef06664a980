"""The engine's gradient correction (FedProx's proximal pull, SCAFFOLD's control-variate offset) against the reference loop."""

from __future__ import annotations

import pytest
import torch

from wirelessfl.learning.lockstep import GradientCorrection, LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.learning.reference import ReferenceLoop

TOL = 1e-5


def make_data(arch, sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.rand((size, *arch.input_shape), generator=g), torch.randint(0, arch.num_classes, (size,), generator=g))
        for size in sizes
    ]


def rows(arch, n, seed, scale=1.0):
    return scale * torch.randn(n, arch.param_count, generator=torch.Generator().manual_seed(seed))


def train_both(arch, params, data, cfg, correction, **kwargs):
    engine = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1), correction=correction, **kwargs)
    reference = ReferenceLoop(arch).train(params, data, cfg, torch.Generator().manual_seed(1), correction=correction, **kwargs)
    return engine, reference


CONFIGS = [
    TrainConfig(epochs=2, batch_size=4, lr=0.05, momentum=0.9, weight_decay=0.01),
    TrainConfig(epochs=1, batch_size=3, lr=0.01, optimizer="adam", clip_norm=0.5),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["sgd-momentum-decay", "adam-clipped"])
@pytest.mark.parametrize("name, shape", [("lenet5", (1, 8, 8)), ("mlp", (1, 6, 6))])
def test_the_engine_equals_the_reference_loop_with_a_proximal_pull_and_an_offset(cfg, name, shape):
    """Uneven slots (the engine reorders them by step count): each slot keeps its own anchor and offset row."""
    arch = get_architecture(name, shape, 10)
    sizes = [5, 11, 8]
    data = make_data(arch, sizes)
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(2))
    correction = GradientCorrection(mu=0.7, anchor=params + rows(arch, 3, 3, 0.1), offset=rows(arch, 3, 4, 0.05))
    engine, reference = train_both(arch, params, data, cfg, correction)
    plain = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1))
    assert torch.equal(engine.steps, reference.steps)
    assert (engine.params - reference.params).abs().max() <= TOL
    assert torch.allclose(engine.loss, reference.loss, atol=TOL)
    assert (engine.params - plain.params).abs().max() > 1e-3  # the correction changed the training


def test_frozen_coordinates_stay_frozen_under_the_correction():
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [7, 4])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    head = arch.head_mask()
    correction = GradientCorrection(mu=0.5, anchor=torch.zeros_like(params), offset=rows(arch, 2, 5, 0.05))
    engine, reference = train_both(arch, params, data, CONFIGS[0], correction, trainable=head)
    assert (engine.params - reference.params).abs().max() <= TOL
    assert torch.equal(engine.params[:, ~head], params[:, ~head])


def test_one_plain_step_subtracts_the_rate_times_the_correction_by_hand():
    """theta_1 = theta_0 - lr (grad + mu (theta_0 - anchor) + offset): one full-batch SGD step without momentum."""
    arch = get_architecture("mlp", (1, 3, 3), 4, hidden=(5,))
    data = make_data(arch, [6, 6])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    anchor, offset = rows(arch, 2, 6), rows(arch, 2, 7)
    cfg = TrainConfig(epochs=1, batch_size=6, lr=0.1, momentum=0.0)
    plain = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1)).params
    corrected = LockstepEngine(arch).train(
        params, data, cfg, torch.Generator().manual_seed(1), correction=GradientCorrection(0.3, anchor, offset)
    ).params
    expected = plain - 0.1 * (0.3 * (params - anchor) + offset)
    assert torch.allclose(corrected, expected, atol=1e-6, rtol=0)


def test_a_zero_correction_trains_exactly_as_none():
    arch = get_architecture("mlp", (1, 4, 4), 3)
    data = make_data(arch, [9, 3])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    cfg = CONFIGS[0]
    plain = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1))
    zero = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(1), correction=GradientCorrection(0.0, params))
    assert torch.equal(plain.params, zero.params) and torch.equal(plain.loss, zero.loss)


def test_bad_corrections_are_one_line_each():
    arch = get_architecture("mlp", (1, 4, 4), 3)
    data = make_data(arch, [4, 4])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    with pytest.raises(ValueError, match=r"^correction mu must be a finite number >= 0, got -1.0$"):
        GradientCorrection(mu=-1.0, anchor=params)
    with pytest.raises(ValueError, match=r"^correction mu > 0 needs an anchor \(\[n, P\]: the point each slot is pulled towards\)$"):
        GradientCorrection(mu=0.1)
    wrong = GradientCorrection(offset=torch.zeros(1, arch.param_count))
    with pytest.raises(ValueError, match=rf"^correction offset must have shape \[slots, param_count\] = \[2, {arch.param_count}\], got \[1, {arch.param_count}\]$"):
        LockstepEngine(arch).train(params, data, CONFIGS[0], torch.Generator(), correction=wrong)
