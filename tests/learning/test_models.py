"""Model descriptions: parameter counts, layouts, shapes, initialisation, errors."""

import math
import pickle

import pytest
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from wirelessfl.learning.catalog import ARCHITECTURES
from wirelessfl.learning.models import Architecture, get_architecture


def test_lenet5_on_28x28_has_the_classic_61706_parameters():
    arch = get_architecture("lenet5", (1, 28, 28), 10)
    conv1 = 6 * 1 * 5 * 5 + 6
    conv2 = 16 * 6 * 5 * 5 + 16
    fc1 = 400 * 120 + 120
    fc2 = 120 * 84 + 84
    fc3 = 84 * 10 + 10
    assert conv1 + conv2 + fc1 + fc2 + fc3 == 61706
    assert arch.param_count == 61706
    assert arch.head_size == fc3 == 850


def test_lenet5_count_does_not_depend_on_the_input_size_thanks_to_the_adapter():
    counts = {hw: get_architecture("lenet5", (1, *hw), 62).param_count for hw in [(28, 28), (32, 32), (8, 8)]}
    assert set(counts.values()) == {61706 - 850 + 84 * 62 + 62}
    digits = get_architecture("lenet5", (1, 8, 8), 10).build_module()
    assert isinstance(digits[0], nn.Upsample)
    assert digits(torch.zeros(3, 1, 8, 8)).shape == (3, 10)


def test_cifar_cnn_count_matches_pflego_layers():
    arch = get_architecture("cifar_cnn", (3, 32, 32), 10)
    conv = (64 * 3 * 25 + 64) + (64 * 64 * 25 + 64)
    fc = (64 * 8 * 8 * 384 + 384) + (384 * 192 + 192) + (192 * 10 + 10)
    assert arch.param_count == conv + fc == 1756426
    assert arch.head_size == 192 * 10 + 10


def test_mlp_default_is_one_hidden_layer_of_200_and_hidden_is_an_option():
    assert get_architecture("mlp", (1, 28, 28), 10).param_count == 784 * 200 + 200 + 200 * 10 + 10
    arch = get_architecture("mlp", (1, 4, 4), 3, hidden=[5, 7])
    assert arch.options == (("hidden", (5, 7)),)
    assert arch.param_count == (16 * 5 + 5) + (5 * 7 + 7) + (7 * 3 + 3)
    assert arch.head_size == 7 * 3 + 3


@pytest.mark.parametrize(
    "name, shape, classes",
    [("lenet5", (1, 28, 28), 10), ("lenet5", (3, 32, 32), 10), ("lenet5", (1, 8, 8), 10), ("cifar_cnn", (3, 32, 32), 10), ("cifar_cnn", (1, 28, 28), 5), ("mlp", (1, 8, 8), 10)],
)
def test_module_layout_matches_param_slices_and_output_shape(name, shape, classes):
    arch = get_architecture(name, shape, classes)
    module = arch.build_module()
    shapes = [tuple(p.shape) for p in module.parameters()]
    assert shapes == [s.shape for s in arch.param_slices]
    assert sum(p.numel() for p in module.parameters()) == arch.param_count
    assert module(torch.zeros(2, *shape)).shape == (2, classes)
    head = list(module.parameters())[-2:]
    assert sum(p.numel() for p in head) == arch.head_size
    mask = arch.head_mask()
    assert mask.sum() == arch.head_size and mask[-arch.head_size :].all()


def test_build_module_loads_a_flat_vector_in_the_same_layout():
    arch = get_architecture("lenet5", (1, 28, 28), 10)
    flat = torch.arange(arch.param_count, dtype=torch.float32)
    module = arch.build_module(flat)
    assert torch.equal(parameters_to_vector(module.parameters()), flat)
    assert module[0].bias.tolist() == [150.0, 151.0, 152.0, 153.0, 154.0, 155.0]  # after the 6*25 conv1 weights


def test_init_flat_is_pytorch_default_uniform_and_deterministic():
    arch = get_architecture("mlp", (1, 10, 10), 4, hidden=[50])
    a = arch.init_flat(40, torch.Generator().manual_seed(3))
    b = arch.init_flat(40, torch.Generator().manual_seed(3))
    assert a.shape == (40, arch.param_count) and torch.equal(a, b)
    assert not torch.equal(a, arch.init_flat(40, torch.Generator().manual_seed(4)))
    hidden_w = a[:, : 50 * 100]
    bound = 1 / math.sqrt(100)
    assert hidden_w.abs().max() <= bound
    assert hidden_w.abs().max() > 0.99 * bound
    assert abs(hidden_w.var().item() - bound**2 / 3) < 0.02 * bound**2
    head_b = a[:, -4:]
    assert head_b.abs().max() <= 1 / math.sqrt(50)


def test_architecture_is_a_plain_picklable_value():
    arch = get_architecture("mlp", (1, 8, 8), 10, hidden=(32,))
    arch.param_count  # fills the cached layer program
    clone = pickle.loads(pickle.dumps(arch))
    assert clone == arch and hash(clone) == hash(arch) and clone.param_count == arch.param_count
    assert set(ARCHITECTURES) == {"lenet5", "cifar_cnn", "mlp", "leaf_cnn"}


def test_bad_descriptions_raise_clear_errors():
    known = r"model name must be one of \['cifar_cnn', 'leaf_cnn', 'lenet5', 'mlp'\] or 'package.module:factory', got 'resnet'"
    with pytest.raises(ValueError, match=known):
        get_architecture("resnet", (1, 28, 28), 10)
    with pytest.raises(ValueError, match=f"^{known}$"):
        Architecture("resnet", (1, 28, 28), 10)
    with pytest.raises(ValueError, match=r"^model\.options for model 'lenet5': unknown option 'hidden'; allowed: none$"):
        get_architecture("lenet5", (1, 28, 28), 10, hidden=(3,))
    with pytest.raises(ValueError, match=r"model input_shape must be three positive ints \(C, H, W\), got \(28, 28\)"):
        Architecture("mlp", (28, 28), 10)
    with pytest.raises(ValueError, match="model num_classes must be an int >= 2, got 1"):
        get_architecture("mlp", (1, 2, 2), 1)
    with pytest.raises(ValueError, match=r"^model\.options for model 'mlp': hidden must be a sequence of positive ints, got \(0,\)"):
        get_architecture("mlp", (1, 2, 2), 2, hidden=(0,))
    with pytest.raises(ValueError, match=r"^model\.options for model 'mlp': hidden must be a sequence of positive ints, got 200$"):
        get_architecture("mlp", (1, 2, 2), 2, hidden=200)
    with pytest.raises(ValueError, match=r"^model\.options for model 'mlp': hidden must be a sequence of positive ints, got \(True,\)$"):
        get_architecture("mlp", (1, 2, 2), 2, hidden=[True])
    with pytest.raises(ValueError, match=r"build_module flat must have shape \(61706,\), got \(3,\)"):
        get_architecture("lenet5", (1, 28, 28), 10).build_module(torch.zeros(3))
    with pytest.raises(ValueError, match="init_flat n must be an int >= 0, got -1"):
        get_architecture("mlp", (1, 2, 2), 2).init_flat(-1, torch.Generator())


def batchnorm_net(input_shape, num_classes):
    return nn.Sequential(nn.Conv2d(input_shape[0], 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.LazyLinear(num_classes))


def stats_free_batchnorm(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.BatchNorm1d(4, track_running_stats=False), nn.Linear(4, num_classes))


def wrong_output(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(4, num_classes + 1))


class HeadFirst(nn.Module):
    """The head is registered before the body: personal parameters are not the trailing coordinates."""

    def __init__(self, num_classes):
        super().__init__()
        self.head = nn.Linear(3, num_classes)
        self.body = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(torch.flatten(x, 1))))


def head_first(input_shape, num_classes):
    return HeadFirst(num_classes)


def test_a_user_model_by_import_path_or_factory_is_named_by_parameter_path():
    arch = get_architecture("examples.user_models:small_resnet", (3, 8, 8), 5, width=4)
    assert arch.head_paths == ("fc.weight", "fc.bias") and arch.head_size == 16 * 5 + 5
    assert arch.layers[0] == "stem" and "blocks.1.shortcut.0" in arch.layers
    assert int(arch.mask(["blocks.2"]).sum()) == sum(p.numel() for p in arch.template.blocks[2].parameters())
    clone = pickle.loads(pickle.dumps(arch))
    assert clone == arch and clone.param_count == arch.param_count
    # a factory passed as a function keeps its import path when it has one
    assert Architecture.of(head_first, (1, 2, 2), 3).factory is None
    local = Architecture.of(lambda shape, classes: HeadFirst(classes), (1, 2, 2), 3)
    assert local.factory is not None and local.param_count == 4 * 3 + 3 + 3 * 3 + 3
    # GroupNorm's weights start at 1, not at a fan-in bound: each row is the factory's own initialisation
    rows = arch.init_flat(2, torch.Generator().manual_seed(0))
    norm = arch.mask(["norm.weight"])
    assert torch.equal(rows[:, norm], torch.ones(2, int(norm.sum())))
    assert not torch.equal(rows[0], rows[1])
    assert torch.equal(rows, arch.init_flat(2, torch.Generator().manual_seed(0)))


def test_a_head_that_is_not_trailing_splits_by_index():
    arch = Architecture.of(head_first, (1, 2, 2), 3)
    assert arch.head_paths == ("head.weight", "head.bias") and arch.layers == ("head", "body")
    split = arch.split(["head"])
    assert not split.trailing and split.personal_size == 12
    rows = torch.arange(2 * arch.param_count, dtype=torch.float32).view(2, -1)
    assert torch.equal(split.personal(rows), rows[:, :12]) and torch.equal(split.shared(rows), rows[:, 12:])
    assert torch.equal(split.join(split.shared(rows), split.personal(rows)), rows)
    trailing = get_architecture("mlp", (1, 2, 2), 3).split(["2"])
    assert trailing.trailing and torch.equal(trailing.join(trailing.shared(rows[:, :27]), trailing.personal(rows[:, :27])), rows[:, :27])


def test_user_models_that_cannot_train_in_lockstep_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^model 'nowhere.at.all:net': cannot import module 'nowhere.at.all' \(ModuleNotFoundError: "):
        get_architecture("nowhere.at.all:net", (1, 2, 2), 3)
    with pytest.raises(ValueError, match=r"^model 'examples.user_models:nothing': module 'examples.user_models' has no attribute 'nothing'$"):
        get_architecture("examples.user_models:nothing", (1, 2, 2), 3)
    with pytest.raises(ValueError, match=r"^model .*batchnorm_net' has buffers \(1.running_mean, 1.running_var, 1.num_batches_tracked\): the lockstep engine trains parameters only; use GroupNorm or LayerNorm instead of BatchNorm$"):
        Architecture.of(batchnorm_net, (1, 4, 4), 3)
    with pytest.raises(ValueError, match=r"uses batch statistics \(BatchNorm1d at '1'\), which would see the padding of partial batches; use GroupNorm or LayerNorm$"):
        Architecture.of(stats_free_batchnorm, (1, 2, 2), 3)
    with pytest.raises(ValueError, match=r"must map \[B, 1, 2, 2\] inputs to \[B, 3\] logits, got \[2, 4\] for B = 2$"):
        Architecture.of(wrong_output, (1, 2, 2), 3)
    with pytest.raises(ValueError, match=r"^model.options for model 'examples.user_models:small_resnet': the factory refused them \(.*depth.*\)$"):
        get_architecture("examples.user_models:small_resnet", (3, 8, 8), 5, depth=3)
    with pytest.raises(ValueError, match=r"^model head 'nope' names no parameters; the model's layers are 1, 3$"):
        get_architecture("mlp", (1, 2, 2), 3, head="nope")


def test_a_small_meta_template_is_shape_checked_on_zeroed_cpu_storage_and_a_large_one_stays_on_meta(monkeypatch):
    from wirelessfl.learning import models

    with torch.device("meta"):
        module = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    probe = models.probe_of(module)
    assert probe is not module and all(p.device.type == "meta" for p in module.parameters())
    assert [(n, p.shape, p.device.type) for n, p in probe.named_parameters()] == [
        (n, p.shape, "cpu") for n, p in module.named_parameters()
    ]
    assert all(not p.any() for p in probe.parameters())
    assert probe(torch.zeros(2, 4)).shape == (2, 2)
    monkeypatch.setattr(models, "PROBE_ON_CPU_BYTES", 4 * (4 * 3 + 3 + 3 * 2 + 2) - 1)
    assert models.probe_of(module) is module
    cpu_module = nn.Linear(4, 3)
    assert models.probe_of(cpu_module) is cpu_module
