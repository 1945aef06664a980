"""The lockstep engine equals the plain per-client loop, and its parts are exact."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector

from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig, shuffle_schedule, slot_steps
from wirelessfl.learning.models import Architecture, get_architecture
from wirelessfl.learning.reference import ReferenceLoop
from wirelessfl.learning.workers import group_samples

TOL = 1e-5


def conv_prelu(input_shape, num_classes):
    """A layer the stacked model has no fast path for (PReLU has a parameter): it runs under vmap."""
    channels, height, width = input_shape
    return nn.Sequential(nn.Conv2d(channels, 3, 3), nn.PReLU(3), nn.Flatten(), nn.Linear(3 * (height - 2) * (width - 2), num_classes))


def model(name, shape, classes, **options):
    """A built-in by name, a user model by import path (examples/) or, for a callable, by factory."""
    if callable(name):
        return Architecture.of(name, shape, classes, **options)
    return get_architecture(name, shape, classes, **options)


BUILTIN = [
    ("lenet5", (1, 28, 28), 10, {}),
    ("lenet5", (1, 8, 8), 10, {}),
    ("cifar_cnn", (3, 12, 12), 10, {}),
    ("mlp", (1, 8, 8), 10, {}),
    ("leaf_cnn", (1, 8, 8), 10, {"conv1": 4, "conv2": 6, "fc": 16, "dropout": 0.3}),
]
USER = [
    ("examples.user_models:two_conv_dropout", (1, 8, 8), 10, {"width": 4, "hidden": 8, "p": 0.3}),  # F.dropout, x.view(x.size(0), -1)
    ("examples.user_models:small_resnet", (3, 8, 8), 10, {"width": 4}),  # GroupNorm, residual adds, adaptive pooling
    ("examples.user_models:gated", (1, 4, 4), 10, {}),  # untraceable, data-dependent branch: slot by slot
    (conv_prelu, (2, 6, 6), 10, {}),  # an unknown layer with parameters: vmap
]
ARCHS = BUILTIN + USER
IDS = [name if isinstance(name, str) else name.__name__ for name, *_ in ARCHS]


def make_data(arch, sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.rand((size, *arch.input_shape), generator=g), torch.randint(0, arch.num_classes, (size,), generator=g))
        for size in sizes
    ]


def both(arch, params, data, cfg, seed=1, **kwargs):
    engine = LockstepEngine(arch).train(params, data, cfg, torch.Generator().manual_seed(seed), **kwargs)
    reference = ReferenceLoop(arch).train(params, data, cfg, torch.Generator().manual_seed(seed), **kwargs)
    return engine, reference


def assert_same(engine, reference):
    assert torch.equal(engine.steps, reference.steps)
    assert (engine.params - reference.params).abs().max() <= TOL
    assert torch.allclose(engine.loss, reference.loss, atol=TOL, equal_nan=True)


def test_shuffle_schedule_cuts_fresh_permutations_into_batches():
    schedule = shuffle_schedule([5, 0, 3], 2, [1.0, 1.0, 2.5], torch.Generator().manual_seed(0))
    assert [len(b) for b in schedule[0]] == [2, 2, 1]
    assert sorted(torch.cat(schedule[0]).tolist()) == [0, 1, 2, 3, 4]
    assert schedule[1] == []
    # 3 samples, batch 2 -> 2 batches per epoch; 2.5 epochs -> 5 batches from 3 permutations
    assert [len(b) for b in schedule[2]] == [2, 1, 2, 1, 2]
    assert sorted(torch.cat(schedule[2][0:2]).tolist()) == [0, 1, 2]
    assert sorted(torch.cat(schedule[2][2:4]).tolist()) == [0, 1, 2]
    assert slot_steps([10, 10, 10, 0], 4, [0.5, 0.1, 0.0, 3.0]) == [2, 0, 0, 0]


def test_one_step_of_logistic_regression_matches_the_closed_form():
    arch = get_architecture("mlp", (1, 1, 2), 3, hidden=())
    x = torch.tensor([[[[1.0, 2.0]]], [[[3.0, -1.0]]]])
    y = torch.tensor([0, 2])
    cfg = TrainConfig(epochs=1, batch_size=2, lr=0.5, momentum=0.9)
    out = LockstepEngine(arch).train(torch.zeros(1, arch.param_count), [(x, y)], cfg, torch.Generator())
    # zero weights: softmax = 1/3 each; dW = mean_i (p_i - e_{y_i}) x_i^T, db = mean_i (p_i - e_{y_i})
    p_minus_e = torch.tensor([[1 / 3 - 1, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3 - 1]])
    flat_x = x.view(2, 2)
    d_w = p_minus_e.T @ flat_x / 2
    d_b = p_minus_e.mean(0)
    expected = -0.5 * torch.cat([d_w.flatten(), d_b])
    assert torch.allclose(out.params[0], expected, atol=1e-7)
    assert math.isclose(out.loss.item(), math.log(3), rel_tol=1e-6)
    assert out.steps.tolist() == [1]


@pytest.mark.parametrize("name, shape, classes, options", ARCHS, ids=IDS)
def test_lockstep_equals_the_reference_loop_with_uneven_slots(name, shape, classes, options):
    """Every built-in and every kind of user model (fast paths, vmap, slot by slot; dropout drawing the same masks)."""
    arch = model(name, shape, classes, **options)
    sizes = [9, 4, 6]
    data = make_data(arch, sizes)
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=2, batch_size=4, lr=0.05, momentum=0.9)
    engine, reference = both(arch, params, data, cfg)
    assert engine.steps.tolist() == [math.ceil(s / 4) * cfg.epochs for s in sizes]
    assert_same(engine, reference)
    assert (engine.params - params).abs().max() > 1e-3  # they did train


@pytest.mark.parametrize("part", ["head", "body"])
def test_trainable_mask_freezes_coordinates_exactly(part):
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [10, 6, 3])
    params = arch.init_flat(3, torch.Generator().manual_seed(2))
    head = arch.head_mask()
    trainable = head if part == "head" else ~head
    cfg = TrainConfig(epochs=2, batch_size=4, lr=0.1, momentum=0.9, weight_decay=0.01)
    engine, reference = both(arch, params, data, cfg, trainable=trainable)
    assert_same(engine, reference)
    assert torch.equal(engine.params[:, ~trainable], params[:, ~trainable])
    assert (engine.params[:, trainable] != params[:, trainable]).any(dim=1).all()


def test_a_coordinate_level_trainable_mask_matches_the_reference():
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [9, 5])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    trainable = torch.rand(arch.param_count, generator=torch.Generator().manual_seed(3)) < 0.5
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.9, weight_decay=0.01)
    engine, reference = both(arch, params, data, cfg, trainable=trainable)
    assert_same(engine, reference)
    assert torch.equal(engine.params[:, ~trainable], params[:, ~trainable])


def strided_pointwise(input_shape, num_classes, padding=0):
    """A ResNet shortcut alone: a 1x1 convolution at stride 2 on few channels."""
    channels, height, width = input_shape
    pixels = ((height - 1) // 2 + 1) * ((width - 1) // 2 + 1)
    return nn.Sequential(nn.Conv2d(channels, 6, 1, stride=2, padding=padding), nn.Flatten(), nn.Linear(6 * pixels, num_classes))


@pytest.mark.parametrize("channels, side, padding", [(3, 8, 0), (4, 9, "valid"), (2, 7, 0)])
def test_a_strided_pointwise_convolution_trains_as_in_the_reference(channels, side, padding):
    """Run as subsample + 1x1 (stacked._pointwise_strided): the strided kernel corrupted the heap on AVX2 CPUs."""
    arch = Architecture.of(lambda shape, classes: strided_pointwise(shape, classes, padding), (channels, side, side), 5)
    sizes = [5, 3, 4]
    data = make_data(arch, sizes)
    params = arch.init_flat(len(sizes), torch.Generator().manual_seed(4))
    engine, reference = both(arch, params, data, TrainConfig(epochs=2, batch_size=2, lr=0.1, momentum=0.9))
    assert_same(engine, reference)
    assert (engine.params - params).abs().max() > 1e-3


@pytest.mark.parametrize("name, shape", [("lenet5", (1, 28, 28)), ("cifar_cnn", (3, 12, 12))])
@pytest.mark.parametrize("convs", [(0,), (0, 1)])
def test_conv_biases_alone_train_as_in_the_reference(name, shape, convs):
    """With only conv biases trainable (named by path), autograd skips every weight gradient and stays exact."""
    arch = get_architecture(name, shape, 10)
    conv_layers = [path for path in arch.layers if isinstance(arch.template.get_submodule(path), nn.Conv2d)]
    trainable = arch.mask([f"{conv_layers[c]}.bias" for c in convs])
    assert int(trainable.sum()) == sum(arch.template.get_submodule(conv_layers[c]).bias.numel() for c in convs)
    data = make_data(arch, [9, 5])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.9)
    engine, reference = both(arch, params, data, cfg, trainable=trainable)
    assert_same(engine, reference)
    assert torch.equal(engine.params[:, ~trainable], params[:, ~trainable])
    assert (engine.params[:, trainable] != params[:, trainable]).any(dim=1).all()


def test_per_slot_fractional_epochs_and_an_empty_dataset():
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(16,))
    data = make_data(arch, [12, 12, 12, 0])
    params = arch.init_flat(4, torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=5, lr=0.1, momentum=0.5, weight_decay=0.001)
    engine, reference = both(arch, params, data, cfg, epochs=[0, 0.5, 2.5, 1])
    assert engine.steps.tolist() == [0, 2, 8, 0]  # 3 batches per epoch; 1.5 rounds up to 2, 7.5 to 8
    assert_same(engine, reference)
    assert torch.equal(engine.params[0], params[0]) and torch.equal(engine.params[3], params[3])
    assert math.isnan(engine.loss[0]) and math.isnan(engine.loss[3])


def test_plain_sgd_without_momentum_and_small_slot_groups_give_the_same_result():
    arch = get_architecture("lenet5", (1, 28, 28), 10)
    data = make_data(arch, [7, 13, 2, 9, 5])
    params = arch.init_flat(5, torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=4, lr=0.1, momentum=0.0)
    engine, reference = both(arch, params, data, cfg)
    assert_same(engine, reference)
    grouped = LockstepEngine(arch, max_samples=8).train(params, data, cfg, torch.Generator().manual_seed(1))
    assert (grouped.params - engine.params).abs().max() <= 1e-6


def test_a_full_batch_batch_size_pads_no_sample_beyond_the_largest_dataset():
    """batch_size 10,000 on datasets of 30, 7 and 19 samples: each group's batches are as wide as its largest dataset.

    max_samples 64 -> groups of 64 // 30 = 2 slots: (30, 7) steps on 30 rows, (19) on 19 (were 10,000 rows each).
    """
    arch = get_architecture("mlp", (1, 8, 8), 10)
    data = make_data(arch, [30, 7, 19])
    params = arch.init_flat(3, torch.Generator().manual_seed(2))
    full = TrainConfig(epochs=3, batch_size=10_000, lr=0.1, momentum=0.0)
    engine = LockstepEngine(arch, max_samples=64)
    widths = []
    gather = engine._gather
    engine._gather = lambda x_cat, y_cat, index, *rest: widths.append(index.shape[1]) or gather(x_cat, y_cat, index, *rest)
    out = engine.train(params, data, full, torch.Generator().manual_seed(1))
    assert sorted(widths) == [19] * 3 + [30] * 3  # 3 full-batch steps per group
    exact = LockstepEngine(arch, max_samples=64).train(params, data, TrainConfig(epochs=3, batch_size=30, lr=0.1, momentum=0.0), torch.Generator().manual_seed(1))
    assert torch.equal(out.params, exact.params)
    assert_same(out, ReferenceLoop(arch).train(params, data, full, torch.Generator().manual_seed(1)))


def test_same_seed_gives_identical_results_and_another_seed_does_not():
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [11, 6])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    cfg = TrainConfig(epochs=1, batch_size=4)
    engine = LockstepEngine(arch)
    first = engine.train(params, data, cfg, torch.Generator().manual_seed(5))
    second = engine.train(params, data, cfg, torch.Generator().manual_seed(5))
    other = engine.train(params, data, cfg, torch.Generator().manual_seed(6))
    assert torch.equal(first.params, second.params) and torch.equal(first.loss, second.loss)
    assert not torch.equal(first.params, other.params)


def test_concurrent_slot_groups_equal_single_threaded_training_and_keep_the_thread_count():
    """Groups of slots train on worker threads; results must not depend on the interleaving."""
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [9, 4, 12, 7, 3, 10])
    params = arch.init_flat(6, torch.Generator().manual_seed(3))
    cfg = TrainConfig(epochs=1, batch_size=4)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        concurrent = LockstepEngine(arch, max_samples=8).train(params, data, cfg, torch.Generator().manual_seed(4))
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        serial = LockstepEngine(arch, max_samples=8).train(params, data, cfg, torch.Generator().manual_seed(4))
    finally:
        torch.set_num_threads(threads)
    assert (concurrent.params - serial.params).abs().max() <= 1e-6
    assert torch.allclose(concurrent.loss, serial.loss, atol=1e-6)


def test_balanced_groups_give_every_worker_the_same_load():
    from wirelessfl.learning.workers import balanced_group as _balanced_group

    assert _balanced_group(20, 16) == 10
    assert _balanced_group(20, 16, multiple=2) == 10
    assert _balanced_group(20, 32, multiple=2) == 10
    assert _balanced_group(3, 32, multiple=4) == 3
    assert _balanced_group(0, 8, multiple=2) == 1


@pytest.mark.parametrize("name, shape, classes, options", ARCHS, ids=IDS)
def test_evaluate_and_logits_equal_one_model_at_a_time(name, shape, classes, options):
    arch = model(name, shape, classes, **options)
    data = make_data(arch, [9, 3, 0, 5])
    params = arch.init_flat(4, torch.Generator().manual_seed(2))
    engine = LockstepEngine(arch)
    logits = engine.logits(params, data, batch_size=4)
    for slot, (x, y) in enumerate(data):
        assert logits[slot].shape == (len(y), classes)
        if len(y):
            expected = arch.build_module(params[slot]).eval()(x).detach()
            assert torch.allclose(logits[slot], expected, atol=1e-5)
    result = engine.evaluate(params, data, batch_size=4)
    reference = ReferenceLoop(arch).evaluate(params, data)
    assert result.count.tolist() == [9, 3, 0, 5]
    assert torch.allclose(result.accuracy, reference.accuracy, equal_nan=True)
    assert torch.allclose(result.loss, reference.loss, atol=1e-5, equal_nan=True)


def test_passes_over_whole_datasets_do_not_depend_on_groups_or_threads():
    """evaluate, logits and full_gradient split slots into groups run on worker threads."""
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [9, 3, 0, 5, 12, 1, 7])
    params = arch.init_flat(7, torch.Generator().manual_seed(5))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        small = LockstepEngine(arch, max_samples=4)
        sizes = [9, 3, 0, 5, 12, 1, 7]
        assert small._eval_groups(sizes, 1024, 8) == (1, 6)  # 12 samples in 2 chunks of 6
        assert small._eval_groups(sizes, 4, 8) == (2, 4)  # 3 chunks of 4, 2 slots a pass, 4 groups for 2 workers
        grouped = (small.evaluate(params, data), small.logits(params, data), small.full_gradient(params, data))
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        whole = LockstepEngine(arch)
        single = (whole.evaluate(params, data), whole.logits(params, data), whole.full_gradient(params, data))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(grouped[0].accuracy.nan_to_num(-1), single[0].accuracy.nan_to_num(-1))
    assert torch.allclose(grouped[0].loss, single[0].loss, atol=1e-6, equal_nan=True)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grouped[1], single[1]))
    assert torch.allclose(grouped[2], single[2], atol=1e-6, equal_nan=True)


def test_evaluate_counts_correct_predictions_by_hand():
    arch = get_architecture("mlp", (1, 1, 2), 2, hidden=())
    # logits = [x0, x1]: predicts class 0 when x0 > x1
    params = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    x = torch.tensor([[[[2.0, 1.0]]], [[[0.0, 3.0]]], [[[5.0, 4.0]]]])
    y = torch.tensor([0, 0, 0])
    result = LockstepEngine(arch).evaluate(params, [(x, y)], batch_size=2)
    assert result.accuracy.tolist() == pytest.approx([2 / 3])
    expected_loss = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(3)) + math.log(1 + math.exp(-1))) / 3
    assert result.loss.item() == pytest.approx(expected_loss, rel=1e-6)


def test_evaluate_by_rows_equals_the_gathered_rows_bit_for_bit():
    """Slots that share a model (FedAvg's clients) read it by row: the numbers of the gathered ``params[rows]``."""
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [7, 3, 5, 2, 6])
    models = arch.init_flat(2, torch.Generator().manual_seed(4))
    rows = torch.tensor([1, 0, 1, 1, 0])
    engine = LockstepEngine(arch)
    by_rows, gathered = engine.evaluate(models, data, rows=rows), engine.evaluate(models[rows], data)
    assert torch.equal(by_rows.accuracy, gathered.accuracy) and torch.equal(by_rows.loss, gathered.loss)
    with pytest.raises(ValueError, match=r"rows must be in \[0, 1\] \(rows of params\)"):
        engine.evaluate(models, data, rows=torch.tensor([0, 1, 2, 0, 0]))
    with pytest.raises(ValueError, match=r"rows must have shape \[len\(datasets\)\] = \[5\], got \[4\]"):
        engine.evaluate(models, data, rows=rows[:4])


def test_evaluate_with_models_made_per_group_equals_the_whole_tensor_bit_for_bit():
    """``params`` as a function of the slots: each group makes its own rows once (a split of 2 passes each), the
    groups together cover every slot once, and the numbers are those of the whole ``[n, P]`` tensor."""
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [7, 3, 5, 2, 6])
    models = arch.init_flat(5, torch.Generator().manual_seed(4))
    engine = LockstepEngine(arch, max_samples=4)  # passes of 8 samples: chunks of 4 (7 is two of them), 2 slots or fewer a group
    asked = []

    def made(group):
        asked.append((group.start, group.stop))
        return models[group].clone()

    per_group, whole = engine.evaluate(made, data, batch_size=4), engine.evaluate(models, data, batch_size=4)
    assert torch.equal(per_group.accuracy, whole.accuracy) and torch.equal(per_group.loss, whole.loss)
    covered = [slot for start, stop in sorted(asked) for slot in range(start, stop)]
    assert covered == list(range(5)) and max(stop - start for start, stop in asked) < 5  # once each, never all
    with pytest.raises(ValueError, match=r"^params made for slots 0\.\.1 have shape \[1, 2410\], expected \[2, 2410\]$".replace("2410", str(arch.param_count))):
        engine.evaluate(lambda group: models[:1], data, batch_size=4)
    with pytest.raises(ValueError, match=r"^rows cannot go with params made per group of slots \(a function of the slots\)$"):
        engine.evaluate(made, data, rows=torch.zeros(5, dtype=torch.long))


@pytest.mark.parametrize("name, shape, classes, options", ARCHS, ids=IDS)
def test_full_gradient_equals_autograd_on_one_module(name, shape, classes, options):
    """Gradients at a point are taken in eval mode (no dropout): deterministic, as UCFL and PFLEGO need."""
    arch = model(name, shape, classes, **options)
    data = make_data(arch, [7, 3])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    grads = LockstepEngine(arch).full_gradient(params, data, batch_size=3)
    for slot, (x, y) in enumerate(data):
        module = arch.build_module(params[slot]).eval()
        F.cross_entropy(module(x), y).backward()
        expected = parameters_to_vector(p.grad for p in module.parameters())
        assert torch.allclose(grads[slot], expected, atol=1e-6)


def test_batch_gradients_are_per_batch_autograd_with_nan_padding():
    arch = get_architecture("lenet5", (1, 8, 8), 10)
    data = make_data(arch, [10, 3])
    params = arch.init_flat(2, torch.Generator().manual_seed(2))
    grads = LockstepEngine(arch).batch_gradients(params, data, 4, None, torch.Generator().manual_seed(7))
    schedule = shuffle_schedule([10, 3], 4, [1.0, 1.0], torch.Generator().manual_seed(7))
    assert grads.shape == (2, 3, arch.param_count)
    for slot, (x, y) in enumerate(data):
        for k, batch in enumerate(schedule[slot]):
            module = arch.build_module(params[slot])
            F.cross_entropy(module(x[batch]), y[batch]).backward()
            expected = parameters_to_vector(p.grad for p in module.parameters())
            assert torch.allclose(grads[slot, k], expected, atol=1e-6)
    assert grads[1, 1:].isnan().all() and not grads[1, 0].isnan().any()
    two = LockstepEngine(arch).batch_gradients(params, data, 4, 2, torch.Generator().manual_seed(7))
    assert torch.allclose(two, grads[:, :2], equal_nan=True)


def test_bad_inputs_raise_clear_errors():
    arch = get_architecture("mlp", (1, 2, 2), 3, hidden=())
    engine = LockstepEngine(arch)
    data = [(torch.zeros(2, 1, 2, 2), torch.tensor([0, 1]))]
    params = torch.zeros(1, arch.param_count)
    cfg = TrainConfig()
    g = torch.Generator()
    with pytest.raises(ValueError, match=r"params must have shape \[len\(datasets\), param_count\] = \[1, 15\], got \[2, 15\]"):
        engine.train(torch.zeros(2, 15), data, cfg, g)
    with pytest.raises(ValueError, match=r"datasets\[0\] x must have shape \[n_s, 1, 2, 2\], got \[2, 1, 3, 3\]"):
        engine.train(params, [(torch.zeros(2, 1, 3, 3), torch.tensor([0, 1]))], cfg, g)
    with pytest.raises(ValueError, match=r"datasets\[0\] y must have shape \[2\] \(one label per sample\), got \[3\]"):
        engine.train(params, [(torch.zeros(2, 1, 2, 2), torch.tensor([0, 1, 2]))], cfg, g)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 2\] \(num_classes\), got a label 3"):
        engine.evaluate(params, [(torch.zeros(2, 1, 2, 2), torch.tensor([0, 3]))])
    with pytest.raises(ValueError, match=r"trainable must be a bool tensor of shape \[15\] \(param_count\), got torch.float32 \[15\]"):
        engine.train(params, data, cfg, g, trainable=torch.ones(15))
    with pytest.raises(ValueError, match=r"epochs must give one epoch count per slot \(1\), got 2"):
        engine.train(params, data, cfg, g, epochs=[1, 1])
    with pytest.raises(ValueError, match=r"epochs\[0\] must be a finite number >= 0, got -1.0"):
        engine.train(params, data, cfg, g, epochs=[-1])
    with pytest.raises(ValueError, match="train.batch_size must be an int >= 1, got 0"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"train.momentum must be in \[0, 1\), got 1.0"):
        TrainConfig(momentum=1.0)
    with pytest.raises(ValueError, match="train.lr must be a finite number > 0, got 0"):
        TrainConfig(lr=0)
    with pytest.raises(ValueError, match="engine max_samples must be None or an int >= 1, got 0"):
        LockstepEngine(arch, max_samples=0)
    with pytest.raises(ValueError, match="num_batches must be None or an int >= 1, got 0"):
        engine.batch_gradients(params, data, 2, 0, g)


@pytest.mark.parametrize("name, shape", [("lenet5", (1, 8, 8)), ("mlp", (1, 8, 8))])
def test_head_steps_on_cached_features_equal_head_only_full_batch_training(name, shape):
    """PFLEGO's tau - 1 head steps: the cached-feature path equals training the head alone, full batch."""
    arch = get_architecture(name, shape, 10)
    sizes = [13, 6, 9]
    data = make_data(arch, sizes)
    params = arch.init_flat(3, torch.Generator().manual_seed(5))
    steps, lr = 4, 0.3
    cached = LockstepEngine(arch).train_head(params, data, lr=lr, steps=steps)
    cfg = TrainConfig(epochs=steps, batch_size=max(sizes), lr=lr, momentum=0.0)
    reference = ReferenceLoop(arch).train(params, data, cfg, torch.Generator().manual_seed(0), trainable=arch.head_mask())
    assert (cached - reference.params).abs().max() <= TOL
    assert torch.equal(cached[:, ~arch.head_mask()], params[:, ~arch.head_mask()])
    assert (cached - params).abs().max() > 1e-3
    assert torch.equal(LockstepEngine(arch).train_head(params, data, lr=lr, steps=0), params)
    with pytest.raises(ValueError, match=r"^steps must be an int >= 0, got -1$"):
        LockstepEngine(arch).train_head(params, data, lr=lr, steps=-1)


def test_worker_threads_call_functional_call_on_their_own_module_copies():
    """functional_call swaps tensors into the module it is given: two threads sharing one computed with each other's."""
    import threading

    model = LockstepEngine(model_arch := Architecture.of(conv_prelu, (2, 6, 6), 10)).model
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(model._local_module(True))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(m) for m in seen}) == 2 and all(m is not model.module for m in seen)
    assert model._local_module(False) is model._local_module(True) and not model._local_module(False).training
    assert model_arch.param_count == sum(p.numel() for p in seen[0].parameters())


def test_the_default_group_size_is_the_devices():
    """512 samples a stacked pass on a CPU (cache-sized groups, one per worker thread); 8,192 on a GPU, where
    each group's step costs a fixed number of kernel launches."""
    arch = get_architecture("mlp", (1, 8, 8), 10)
    assert LockstepEngine(arch).max_samples == group_samples(torch.device("cpu")) == 512
    assert group_samples(torch.device("cuda")) == 8192
    assert LockstepEngine(arch, max_samples=64).max_samples == 64
